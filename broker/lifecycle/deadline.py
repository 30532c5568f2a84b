"""The tier rule for a job with a deadline: on spot, on on-demand (break-glass), or waiting.

Owns: ``DeadlineTier`` (the rule), ``TierMemory`` (what it has watched of one
job's pool: its ``broker.lifecycle.spells.Spells`` and losses) and ``Prior``
(what the market said of the pool before: the snapshot's ``available_share``
and hazard). ``LifecycleManager`` keeps one
memory per workload and asks ``decide`` on a revocation (after ``replace``
failed: break glass now, or wait) and on each ``tick`` (a stretch: back to
spot, stay, or end; a waiting job: open on-demand or keep waiting).

Must not: see the future, read a clock (the manager passes the hours), choose
pools, touch the break-glass ledger or do I/O. Pure given its inputs.

Notation (hours, as ``policies.online.deadline``): ``C`` compute, ``R``
deadline, ``d`` changeover (the workload's restart), ``t`` elapsed, ``cp``
progress, ``ep(t) = C t / R`` Uniform Progress's line, ``k`` the on-demand /
spot price ratio, ``a`` the progress per hour spot alone is expected to give.

**Target.** Uniform Progress asks for ``ep(t)`` whatever the market: where
spot is held most of the time it buys on-demand in every outage to stay on
that line, then finishes hours early with spot still on offer. This rule asks
only for the progress that leaves the rest doable by spot at its expected
rate ``a`` with a reserve for one typical outage near the end, and never
more than Uniform Progress::

    target(t) = min(ep(t), clip(C - a (R - reserve - t), 0, C))
    a = share x (1 - losses_per_held_hour x d),  reserve = 2d + mean outage

(every loss costs a changeover of progress). ``share`` and the loss rate are
the prior blended with what was watched since the job started (the prior
weighs as ``PRIOR_WEIGHT_HOURS`` of watching).

**On-demand as late as the outages allow.** Every on-demand stretch started
in the middle of a job costs a changeover at ``k`` and, when spot returns, a
restart on spot: the bench-only rule paid 7 on-demand starts per window at
low availability and a loose deadline, the optimum fewer than one (bench,
seed 0).
Both lines above are capped by a lazy one, which keeps a reserve of
``LAZY_OUTAGES`` typical outages (the watched mean outage, else the
regime's) and ``2d`` for the final on-demand run to absorb::

    target(t) = min(ep(t), line(t), max(0, C - (R - t - lazy)))
    lazy = 2d + LAZY_OUTAGES x min(mean outage, LAZY_OUTAGE_CAP_HOURS)

so outages are waited through, spot spells taken meanwhile, until the
deadline needs on-demand. (``line`` applies only where spot is not scarce:
with ``a`` below what the job still needs from spot,
``a < (C - cp) / (R - t)``, the tail is on-demand whatever happens.)
Measured on the bench (1,680 windows, seeds 0 and 1, the rule alone): mean
cost 0.965 / 0.965 x Uniform Progress with it, 0.971 / 0.970 without; the
low-availability, loose-deadline quadrant 0.989 / 0.990 with it, 1.001 /
1.000 without. With 8 or 12 outages the figures move by at most 0.007 (a
little worse on both seeds); at 4 the reserve no longer covers the outages
(0.972 / 0.970).
Where spot is scarce its outages last hours, and six of them uncapped leave
no lazy cap at all: on-demand follows Uniform Progress's line, and the job
finishes hours early (2.8 h on average at low availability and a loose
deadline, seed 1) with spot in those hours unused. A typical outage counts
as at most ``LAZY_OUTAGE_CAP_HOURS`` (1 h) in the reserve. Gap closure
against greedy on seeds 0 / 1 / 2 / 3 (2 and 3 held out): 0.391 / 0.398 /
0.381 / 0.392 with the cap, 0.391 / 0.410 / 0.389 / 0.403 without; a cap of 0.75 h
measured 0.420 / 0.415 (seeds 0 / 1), 1.25 h 0.393 / 0.399, 2 h 0.407
(seed 1).

**Changeovers** cost ``d`` of billed time and of slack. Uniform Progress
leaves on-demand for idle as soon as it is ``2d`` ahead and restarts a few
ticks later, paying ``k d`` each time through a whole outage. This rule, on
on-demand while spot is out, keeps it unless ahead of ``target(t +
outage)``, the outage's expected remainder: one restart per outage at most.
Leaving on-demand for spot behind ``target(t + 2d + mean outage)`` is a
bet: a spell of ``S`` more hours saves ``(k - 1) S``; if it ends, the
changeovers in and back out cost ``2 k d``, and ``2d`` of slack worth
``(k - 1) a`` an hour. It is taken when the expected saving is positive and
at least what waiting one more tick would expect, ``S`` from the spells
watched given the current spell's age (spells are heavy-tailed: a flapping
return of one-tick blips is waited out). The line is looked at one outage
and a round trip's two changeovers ahead; the bench-only rule looked ``2d``
ahead and, at low availability, went back to spot from on-demand 8 times a
window where the optimum did once (seed 0). Alone, the longer look measures
0.971 / 0.969 x Uniform Progress (seeds 0 / 1) against 0.971 / 0.970 with
``2d``, the low-availability quadrants 0.986 and 0.999 against 0.988 and
1.001 on seed 0.

Rules, the first that applies: done -> idle; safety net (idle, or on
on-demand, and ``R(t) < C(t) + 2d`` on the tick grid:
``policies.online.deadline.last_safe_moment``) -> on-demand to the end; on
spot and spot available -> stay; spot available -> spot, unless on
on-demand, behind ``target(t + 2d + mean outage)`` and the bet does not pay
(then stay); on on-demand -> stay unless ahead of ``target(t + outage)``
(the outage's expected remainder); behind
``target(t)`` -> on-demand; else wait. The safety net is Uniform Progress's:
the same deadline guarantee. It never moves a running spot instance to
on-demand (the manager has no such step: spot is left only when revoked).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from broker.lifecycle.spells import MAX_SPELLS, Spells
from policies.online.deadline import (
    EPS,
    JobSpec,
    Mode,
    TickView,
    expected_progress,
    is_done,
    last_safe_moment,
)

__all__ = ["DeadlineTier", "Prior", "TierMemory"]

# Why these numbers:
# - the pool's share and loss rate before the job weigh as a day of our own
#   watching (as markets.hazard.posterior weighs its advisor prior);
PRIOR_WEIGHT_HOURS = 24.0
# - with no history at all: spot held half the time (the middle of the
#   0.17-0.91 range published for V100 zones, docs/concepts/market.md), lost once
#   per hour held (1-node GPU traces: 0.1-2 per hour held, markets.hazard.posterior);
UNINFORMED_SHARE = 0.5
UNINFORMED_LOSSES_PER_HELD_HOUR = 1.0
# - on-demand waits until the time left is the work left plus 2d and this
#   many typical outages (module docstring: 8 and 12 measure a little worse
#   on both bench seeds, 4 much worse).
LAZY_OUTAGES = 6.0
# - and counts a typical outage as at most an hour in that reserve: where spot
#   is scarce, outages last hours and six of them made on-demand follow
#   Uniform Progress's line from the start, finishing hours early with spot
#   left unused (module docstring: 0.75 h is too thin a reserve, 1.25-2 h
#   keep part of the gain).
LAZY_OUTAGE_CAP_HOURS = 1.0


@dataclass(frozen=True, slots=True)
class Prior:
    """What was known of the pool before the job: the share of recent time
    spot could be held (``PoolSnapshot.available_share``), its losses per
    hour held (``PoolSnapshot.hazard``), how many hours that covers, and the
    spells with and without spot the manager watched (hours, oldest first)."""

    held_share: float
    losses_per_held_hour: float | None
    hours: float
    up_spells_hours: tuple[float, ...] = ()
    down_spells_hours: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class TierMemory:
    """What the rule has watched of one job's pool since the job started:
    its spells (the prior's first), hours with spot and spot losses;
    ``committed`` once the safety net put it on on-demand to the end."""

    prior: Prior | None = None
    committed: bool = False
    spells: Spells = field(default_factory=Spells)
    held_hours: float = 0.0
    losses: int = 0


def _mean_residual(spells: Sequence[float], age: float) -> float | None:
    """Mean remaining length of a spell ``age`` old, from the spells seen
    (``None``: none seen; past the longest, as long again as it has lasted)."""
    if not spells:
        return None
    longer = [x for x in spells if x > age + EPS]
    return sum(longer) / len(longer) - age if longer else age


class DeadlineTier:
    """The tier rule (module docstring). Stateless: the memory is the caller's."""

    @staticmethod
    def start(prior: Prior | None) -> TierMemory:
        if prior is None:
            return TierMemory()
        spells = Spells(
            up=prior.up_spells_hours[-MAX_SPELLS:], down=prior.down_spells_hours[-MAX_SPELLS:]
        )
        return TierMemory(prior=prior, spells=spells)

    @staticmethod
    def observe(memory: TierMemory, available: bool, hours: float) -> TierMemory:
        """Fold ``hours`` of watching the pool, with or without spot now."""
        # the hours watched are the new state's: the look sees it now
        lost = memory.spells.available and not available
        return replace(
            memory,
            spells=memory.spells.turned(available).watched(hours),
            held_hours=memory.held_hours + (hours if available else 0.0),
            losses=memory.losses + (1 if lost else 0),
        )

    @staticmethod
    def estimates(memory: TierMemory) -> tuple[float, float]:
        """(held share, losses per hour held): the prior blended with what was seen."""
        share0, rate0, w0 = UNINFORMED_SHARE, UNINFORMED_LOSSES_PER_HELD_HOUR, 1.0
        p = memory.prior
        if p is not None and p.hours > 0:
            share0, w0 = p.held_share, min(PRIOR_WEIGHT_HOURS, p.hours)
            rate0 = p.losses_per_held_hour if p.losses_per_held_hour is not None else rate0
        share = (share0 * w0 + memory.held_hours) / (w0 + memory.spells.seen_hours)
        held = share0 * w0 + memory.held_hours
        rate = (rate0 * share0 * w0 + memory.losses) / held if held > 0 else rate0
        return share, rate

    def rate(self, job: JobSpec, memory: TierMemory) -> float:
        """Expected progress per hour from spot alone."""
        share, losses = self.estimates(memory)
        return max(0.0, share * (1.0 - losses * job.changeover_hours))

    def mean_outage(self, memory: TierMemory) -> float:
        """Hours of a typical outage: the watched ones', else the regime's."""
        if memory.spells.down:
            return sum(memory.spells.down) / len(memory.spells.down)
        share, losses = self.estimates(memory)
        return (1.0 - share) / (share * losses) if share * losses > 0 else math.inf

    def target(self, job: JobSpec, memory: TierMemory, at_hours: float, progress: float) -> float:
        """Progress wanted by ``at_hours`` (``progress``: done so far)."""
        ep = expected_progress(job, at_hours)
        a = self.rate(job, memory)
        left_h = job.deadline_hours - at_hours
        need = (job.compute_hours - progress) / left_h if left_h > EPS else math.inf
        out = min(self.mean_outage(memory), job.deadline_hours, LAZY_OUTAGE_CAP_HOURS)
        lazy_reserve = 2.0 * job.changeover_hours + LAZY_OUTAGES * out
        wanted = min(ep, max(0.0, job.compute_hours - (left_h - lazy_reserve)))
        if a < need:  # scarce spot: the tail is on-demand anyway
            return wanted
        reserve = 2.0 * job.changeover_hours
        if memory.spells.down:
            reserve += sum(memory.spells.down) / len(memory.spells.down)
        rem = max(0.0, left_h - reserve)
        line = min(job.compute_hours, max(0.0, job.compute_hours - a * rem))
        return min(line, wanted)

    def _join_spot(self, job: JobSpec, memory: TierMemory, age: float) -> bool:
        """Behind the target on on-demand: leave it for a spot spell ``age``
        old now (see the module docstring for the bet)?"""
        k, d, tick = job.price_ratio, job.changeover_hours, job.tick_hours
        loss = 2.0 * k * d + 2.0 * d * (k - 1.0) * self.rate(job, memory)
        if not memory.spells.up:
            _, losses = self.estimates(memory)
            return (k - 1.0) * (1.0 / losses if losses > 0 else math.inf) > loss

        def value(at: float) -> tuple[float, int]:
            longer = [x - at for x in memory.spells.up if x > at + EPS]
            if not longer:  # past every spell seen: as long again
                return (k - 1.0) * max(at, tick) - loss, 0
            return (k - 1.0) * sum(longer) / len(longer) - loss, len(longer)

        now, n_now = value(age)
        later, n_later = value(age + tick)
        survive = n_later / n_now if n_now else 1.0
        return now > 0 and now >= survive * max(later, 0.0)

    def _outage_left(self, memory: TierMemory, age: float) -> float:
        """Expected remaining hours of an outage ``age`` old."""
        rest = _mean_residual(memory.spells.down, age)
        if rest is not None:
            return rest
        share, losses = self.estimates(memory)  # the regime's mean outage
        return (1.0 - share) / (share * losses) if share * losses > 0 else math.inf

    def decide(self, job: JobSpec, view: TickView, memory: TierMemory) -> tuple[Mode, TierMemory]:
        """The tier for the coming tick, ``memory`` having watched this one
        (``observe``); returns the memory to keep (the safety net commits)."""
        if is_done(job, view):
            return Mode.IDLE, memory
        if memory.committed or (view.mode != Mode.SPOT and last_safe_moment(job, view)):
            return Mode.ON_DEMAND, replace(memory, committed=True)
        if view.mode == Mode.SPOT and view.spot_available:
            return Mode.SPOT, memory
        t, cp, d = view.elapsed_hours, view.progress_hours, job.changeover_hours
        age = memory.spells.run_hours - job.tick_hours  # the current spell's age before this tick
        if view.spot_available:
            down = sum(memory.spells.down) / len(memory.spells.down) if memory.spells.down else 0.0
            behind = cp < self.target(job, memory, t + 2.0 * d + down, cp) - EPS
            if view.mode == Mode.ON_DEMAND and behind and not self._join_spot(job, memory, age):
                return Mode.ON_DEMAND, memory
            return Mode.SPOT, memory
        if view.mode == Mode.ON_DEMAND:
            ahead_at = t + max(2.0 * d, min(self._outage_left(memory, age), job.deadline_hours))
            if cp < self.target(job, memory, ahead_at, cp) - EPS:
                return Mode.ON_DEMAND, memory
            return Mode.IDLE, memory
        if cp < self.target(job, memory, t, cp) - EPS:
            return Mode.ON_DEMAND, memory
        return Mode.IDLE, memory
