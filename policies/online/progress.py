"""Spotfolio's decision rule for one restartable job with a deadline.

Owns: ``SpotfolioDeadline`` (and its ``SpotfolioMemory``): Uniform Progress's
safety net and hysteresis (``policies.online.deadline``), a progress target
that follows the availability regime observed so far (the pool's history
before the job weighs as a day of watching), and changeovers bought only when
they are expected to pay. Causal: a pure function of ``TickView`` and its
memory.

Must not: see the future, simulate or read traces (as every rule of
``policies.online.deadline``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from policies.online.deadline import (
    EPS,
    JobSpec,
    Mode,
    TickView,
    expected_progress,
    is_done,
    last_safe_moment,
)

__all__ = ["SpotfolioDeadline", "SpotfolioMemory"]


@dataclass(frozen=True)
class SpotfolioMemory:
    """What spotfolio's rule has seen: hours watched and held and spot losses
    since the job started, the current spell's age, and the lengths of the
    spells with (``up``) and without (``down``) spot, the pool's history first."""

    committed: bool = False
    seen_hours: float = 0.0
    held_hours: float = 0.0
    losses: int = 0
    last_available: bool | None = None
    run_hours: float = 0.0
    up: tuple[float, ...] = ()
    down: tuple[float, ...] = ()


# Why these numbers (spotfolio's rule):
# - the pool's share and loss rate before the job weigh as a day of our own
#   watching (as markets.hazard.posterior weighs its advisor prior);
PRIOR_WEIGHT_HOURS = 24.0
# - with no history at all: spot held half the time (the middle of the
#   0.17-0.91 range published for V100 zones, economics.md section 7), lost once
#   per hour held (1-node GPU traces: 0.1-2 per hour held, markets.hazard.posterior);
UNINFORMED_SHARE = 0.5
UNINFORMED_LOSSES_PER_HELD_HOUR = 1.0
# - spell lengths are judged on every spell watched: they are heavy-tailed, so
#   a few recent ones say little of the next (the cap only bounds memory).
MAX_SPELLS = 512


def _mean_residual(spells: Sequence[float], age: float) -> float | None:
    """Mean remaining length of a spell ``age`` old, from the spells seen
    (``None``: none seen; past the longest, as long again as it has lasted)."""
    if not spells:
        return None
    longer = [x for x in spells if x > age + EPS]
    return sum(longer) / len(longer) - age if longer else age


class SpotfolioDeadline:
    """Spotfolio's rule: Uniform Progress's safety net and hysteresis, a progress
    target that follows the observed availability regime, and changeovers
    bought only when they are expected to pay. Causal: it uses the pool's
    history before the job (``JobSpec.prior``) and each tick seen since.

    **Target.** Uniform Progress asks for ``ep(t) = C t / R`` whatever the
    market: where spot is held most of the time it buys on-demand in every
    outage to stay on that line, then finishes hours early with spot still on
    offer. Spotfolio asks only for the progress that leaves the rest doable by
    spot at its expected rate ``a`` and still keeps a reserve for one typical
    outage near the end, and never more than Uniform Progress::

        target(t) = min(ep(t), clip(C - a (R - reserve - t), 0, C))
        a = share x (1 - losses_per_held_hour x d),  reserve = 2d + mean outage

    (every loss costs a changeover of progress). Where spot is scarcer than
    the job fraction this is Uniform Progress's line: falling behind there
    only moves on-demand later, into time spot might have covered.

    **Changeovers** cost ``d`` of billed time and of slack. Uniform Progress
    leaves on-demand for idle as soon as it is ``2d`` ahead and restarts a few
    ticks later, paying ``k d`` each time through a whole outage. Spotfolio, on
    on-demand while spot is out, keeps it unless ahead of ``target(t +
    outage)``, the outage's expected remainder: one restart per outage at
    most. Leaving on-demand for spot behind the target is a bet: a spell of
    ``S`` more hours saves ``(k - 1) S``; if it ends, the changeovers in and
    back out cost ``2 k d``, and ``2d`` of slack worth ``(k - 1) a`` an hour
    (at the end, slack is spot time that would otherwise be on-demand). It is
    taken when the expected saving is positive and at least what waiting one
    more tick would expect, ``S`` from the spells seen given the current
    spell's age (spells are heavy-tailed: a flapping return of one-tick blips
    is waited out; a long spell costs one tick).

    Rules, the first that applies: done -> idle; safety net (idle and
    ``R(t) < C(t) + 2d`` on the tick grid, or on on-demand when leaving it
    would cross that line) -> on-demand to the end; on spot and spot available
    -> stay; spot available -> spot, unless on on-demand, behind ``target(t +
    2d)`` and the bet does not pay (then stay); on on-demand -> stay unless
    ahead of ``target(t + outage)``; behind ``target(t)`` -> on-demand; else
    idle. The safety net is Uniform Progress's: the same deadline guarantee.
    """

    name = "spotfolio"

    def start(self, job: JobSpec) -> SpotfolioMemory:
        p = job.prior
        if p is None:
            return SpotfolioMemory()
        return SpotfolioMemory(
            up=p.up_spells_hours[-MAX_SPELLS:], down=p.down_spells_hours[-MAX_SPELLS:]
        )

    @staticmethod
    def estimates(job: JobSpec, memory: SpotfolioMemory) -> tuple[float, float]:
        """(held share, losses per hour held), the prior blended with what was seen."""
        share0, rate0, w0 = UNINFORMED_SHARE, UNINFORMED_LOSSES_PER_HELD_HOUR, 1.0
        p = job.prior
        if p is not None and p.hours > 0:
            share0, w0 = p.held_share, min(PRIOR_WEIGHT_HOURS, p.hours)
            rate0 = p.losses_per_held_hour if p.losses_per_held_hour is not None else rate0
        share = (share0 * w0 + memory.held_hours) / (w0 + memory.seen_hours)
        held = share0 * w0 + memory.held_hours
        rate = (rate0 * share0 * w0 + memory.losses) / held if held > 0 else rate0
        return share, rate

    def rate(self, job: JobSpec, memory: SpotfolioMemory) -> float:
        """Expected progress per hour from spot alone."""
        share, losses = self.estimates(job, memory)
        return max(0.0, share * (1.0 - losses * job.changeover_hours))

    def target(self, job: JobSpec, memory: SpotfolioMemory, at_hours: float) -> float:
        """Progress wanted by ``at_hours``."""
        reserve = 2.0 * job.changeover_hours
        if memory.down:
            reserve += sum(memory.down) / len(memory.down)
        rem = max(0.0, job.deadline_hours - reserve - at_hours)
        line = min(job.compute_hours, max(0.0, job.compute_hours - self.rate(job, memory) * rem))
        return min(line, expected_progress(job, at_hours))

    def observe(self, job: JobSpec, view: TickView, memory: SpotfolioMemory) -> SpotfolioMemory:
        """Fold this tick's availability into the memory (before deciding)."""
        avail, tick = view.spot_available, job.tick_hours
        up, down, run = memory.up, memory.down, memory.run_hours + tick
        if memory.last_available is not None and memory.last_available != avail:
            if memory.run_hours < memory.seen_hours - EPS:  # we saw the spell begin
                if memory.last_available:
                    up = (*up, memory.run_hours)[-MAX_SPELLS:]
                else:
                    down = (*down, memory.run_hours)[-MAX_SPELLS:]
            run = tick
        return replace(
            memory,
            seen_hours=memory.seen_hours + tick,
            held_hours=memory.held_hours + (tick if avail else 0.0),
            losses=memory.losses + (1 if memory.last_available and not avail else 0),
            last_available=avail,
            run_hours=run,
            up=up,
            down=down,
        )

    def _join_spot(self, job: JobSpec, memory: SpotfolioMemory, age: float) -> bool:
        """Behind the target on on-demand: leave it for a spot spell ``age``
        old now (see the class docstring for the bet)?"""
        k, d, tick = job.price_ratio, job.changeover_hours, job.tick_hours
        loss = 2.0 * k * d + 2.0 * d * (k - 1.0) * self.rate(job, memory)
        if not memory.up:
            _, losses = self.estimates(job, memory)
            return (k - 1.0) * (1.0 / losses if losses > 0 else math.inf) > loss

        def value(at: float) -> tuple[float, int]:
            longer = [x - at for x in memory.up if x > at + EPS]
            if not longer:  # past every spell seen: as long again
                return (k - 1.0) * max(at, tick) - loss, 0
            return (k - 1.0) * sum(longer) / len(longer) - loss, len(longer)

        now, n_now = value(age)
        later, n_later = value(age + tick)
        survive = n_later / n_now if n_now else 1.0
        return now > 0 and now >= survive * max(later, 0.0)

    def _outage_left(self, job: JobSpec, memory: SpotfolioMemory, age: float) -> float:
        """Expected remaining hours of an outage ``age`` old."""
        rest = _mean_residual(memory.down, age)
        if rest is not None:
            return rest
        share, losses = self.estimates(job, memory)  # the regime's mean outage
        return (1.0 - share) / (share * losses) if share * losses > 0 else math.inf

    @staticmethod
    def _thin(job: JobSpec, view: TickView) -> bool:
        """The safety net. On on-demand the same line: leaving it for spot
        spends ``d``, and a revocation right after still leaves time to come
        back (the tick-grid check covers both changeovers)."""
        return view.mode != Mode.SPOT and last_safe_moment(job, view)

    def decide(
        self, job: JobSpec, view: TickView, memory: SpotfolioMemory
    ) -> tuple[Mode, SpotfolioMemory]:
        memory = self.observe(job, view, memory)
        if is_done(job, view):
            return Mode.IDLE, memory
        if memory.committed or self._thin(job, view):
            return Mode.ON_DEMAND, replace(memory, committed=True)
        if view.mode == Mode.SPOT and view.spot_available:
            return Mode.SPOT, memory
        t, cp, d = view.elapsed_hours, view.progress_hours, job.changeover_hours
        age = memory.run_hours - job.tick_hours  # the current spell's age before this tick
        if view.spot_available:
            behind = cp < self.target(job, memory, t + 2.0 * d) - EPS
            if view.mode == Mode.ON_DEMAND and behind and not self._join_spot(job, memory, age):
                return Mode.ON_DEMAND, memory
            return Mode.SPOT, memory
        if view.mode == Mode.ON_DEMAND:
            ahead_at = t + max(
                2.0 * d, min(self._outage_left(job, memory, age), job.deadline_hours)
            )
            if cp < self.target(job, memory, ahead_at) - EPS:
                return Mode.ON_DEMAND, memory
            return Mode.IDLE, memory
        if cp < self.target(job, memory, t) - EPS:
            return Mode.ON_DEMAND, memory
        return Mode.IDLE, memory
