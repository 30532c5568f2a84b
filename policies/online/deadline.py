"""Per-tick decision rules for one restartable job with a deadline.

Owns: the deadline setting's decision rules (benchmarks.md section 1, the "Can't
Be Late" setting, NSDI 2024) as pure functions of what the job knows at a tick:
``on_demand``, ``greedy``, ``uniform_progress`` (exactly as published) and
``spotfolio`` (ours). Each rule is a ``DeadlinePolicy``: ``start(job)`` gives
its memory, ``decide(job, view, memory)`` returns the mode for the coming tick
and the memory to carry. Everything a rule knows is in ``TickView`` (the past
and the present); nothing here can see the future.

Must not: simulate (``broker.simulate.deadline`` moves the job and bills it),
read traces, or know the optimum (``broker.simulate.omniscient``).

Notation (hours): ``C`` compute needed, ``R`` deadline, ``d`` changeover,
``t`` elapsed, ``cp(t)`` progress, ``C(t) = C - cp(t)`` and ``R(t) = R - t``
what is left, ``ep(t) = C t / R`` Uniform Progress's expected progress.
A changeover (``d``) is paid on every switch *into* spot or on-demand.

The safety net "``R(t) < C(t) + 2d``" is evaluated on the tick grid the way
the authors' simulator does (skypilot-org/can-t-be-late, ``strategies``:
remaining time floored to whole ticks, remaining work plus ``2d`` rounded up to
whole ticks), so a job idle at the start of a tick can always still finish on
on-demand, whatever the tick length.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import IntEnum
from typing import Any, Protocol

from markets.errors import InputError

__all__ = [
    "DEADLINE_POLICIES",
    "DeadlinePolicy",
    "Greedy",
    "JobSpec",
    "Mode",
    "OnDemand",
    "PoolHistory",
    "SpotfolioDeadline",
    "SpotfolioMemory",
    "TickView",
    "UniformProgress",
    "deadline_policy",
    "expected_progress",
    "last_safe_moment",
]

_EPS = 1e-9


class Mode(IntEnum):
    """What the job runs on during a tick."""

    IDLE = 0
    SPOT = 1
    ON_DEMAND = 2


@dataclass(frozen=True)
class PoolHistory:
    """A pool's spot availability over a past stretch: share held, and the
    lengths of its completed spells with spot (``up``) and without (``down``),
    oldest first (a spell cut by either end of the stretch is left out)."""

    hours: float
    held_share: float
    up_spells_hours: tuple[float, ...] = ()
    down_spells_hours: tuple[float, ...] = ()

    @property
    def losses_per_held_hour(self) -> float | None:
        held = self.hours * self.held_share
        return len(self.up_spells_hours) / held if held > 0 else None

    @classmethod
    def from_held(cls, held: Sequence[bool], tick_hours: float) -> PoolHistory | None:
        """Summarise a per-tick held series (``None`` if it is empty)."""
        n = len(held)
        if n == 0:
            return None
        up: list[float] = []
        down: list[float] = []
        start = 0
        for i in range(1, n + 1):
            if i == n or held[i] != held[start]:
                if start > 0 and i < n:  # complete on both sides
                    (up if held[start] else down).append((i - start) * tick_hours)
                start = i
        return cls(
            hours=n * tick_hours,
            held_share=sum(bool(h) for h in held) / n,
            up_spells_hours=tuple(up),
            down_spells_hours=tuple(down),
        )


@dataclass(frozen=True)
class JobSpec:
    """The job and the market's fixed terms, all in hours.

    ``prior``: the pool's availability history watched *before* the job
    started (what a broker monitoring the market has; a market snapshot's
    ``available_share`` and hazard summarise the same), ``None`` if none.
    """

    compute_hours: float
    deadline_hours: float
    changeover_hours: float
    tick_hours: float
    price_ratio: float = 3.0  # k: on-demand price / spot price
    prior: PoolHistory | None = None


@dataclass(frozen=True)
class TickView:
    """What the job knows at the start of a tick.

    ``mode`` is what it holds now: a spot instance revoked at this tick has
    already turned into ``IDLE``. ``spot_available``: could spot be held in
    this tick. ``changeover_left_hours``: changeover still to pay on the
    instance held.
    """

    elapsed_hours: float
    progress_hours: float
    mode: Mode
    spot_available: bool
    changeover_left_hours: float = 0.0


class DeadlinePolicy(Protocol):
    """A pure per-tick rule with explicit memory."""

    name: str

    def start(self, job: JobSpec) -> Any:
        """Memory before the first tick."""
        ...

    def decide(self, job: JobSpec, view: TickView, memory: Any) -> tuple[Mode, Any]:
        """The mode for this tick and the memory to carry to the next."""
        ...


def _remaining(job: JobSpec, view: TickView) -> tuple[float, float]:
    """(R(t), C(t)) in hours."""
    return job.deadline_hours - view.elapsed_hours, job.compute_hours - view.progress_hours


def _done(job: JobSpec, view: TickView) -> bool:
    return view.progress_hours >= job.compute_hours - _EPS


def last_safe_moment(job: JobSpec, view: TickView) -> bool:
    """``R(t) < C(t) + 2d`` on the tick grid: waiting one more tick idle could
    leave too little time to finish on on-demand after a changeover."""
    rem_time, rem_work = _remaining(job, view)
    tick = job.tick_hours
    time_ticks = math.floor(rem_time / tick + _EPS)
    need_ticks = math.ceil((rem_work + 2.0 * job.changeover_hours) / tick - _EPS)
    return need_ticks >= time_ticks


class OnDemand:
    """All on-demand: the cost every ratio is measured against."""

    name = "on_demand"

    def start(self, job: JobSpec) -> None:
        return None

    def decide(self, job: JobSpec, view: TickView, memory: None) -> tuple[Mode, None]:
        return (Mode.IDLE if _done(job, view) else Mode.ON_DEMAND), None


class Greedy:
    """Wait for spot; switch to on-demand only at the last safe moment, and
    stay there (the paper's "greedy"/strawman, skypilot-org/can-t-be-late).
    Its documented weakness: all the slack goes on waiting, so the job ends
    with one long on-demand run, blind to the spot that returns meanwhile;
    and it holds spot however thin the slack (safe here only because the last
    safe moment keeps ``2d``: a revocation still leaves time for one
    changeover)."""

    name = "greedy"

    def start(self, job: JobSpec) -> bool:
        return False  # committed to on-demand

    def decide(self, job: JobSpec, view: TickView, memory: bool) -> tuple[Mode, bool]:
        if _done(job, view):
            return Mode.IDLE, memory
        if memory or (view.mode != Mode.SPOT and last_safe_moment(job, view)):
            return Mode.ON_DEMAND, True
        if view.spot_available:
            return Mode.SPOT, False
        return Mode.IDLE, False


def expected_progress(job: JobSpec, at_hours: float) -> float:
    """``ep(t) = C t / R``."""
    return job.compute_hours * at_hours / job.deadline_hours


class UniformProgress:
    """Uniform Progress as published; each tick, the first rule that applies:

    1. done -> idle;
    2. safety net: idle and ``R(t) < C(t) + 2d`` -> on-demand to the end;
    3. on spot and spot available -> stay on spot;
    4. hysteresis: on on-demand and ``cp(t) < ep(t + 2d)`` -> stay on on-demand;
    5. spot available -> spot;
    6. ``cp(t) < ep(t)`` -> on-demand;
    7. else idle.

    Memory: whether the safety net has fired ("to the end").
    """

    name = "uniform_progress"

    def start(self, job: JobSpec) -> bool:
        return False

    def decide(self, job: JobSpec, view: TickView, memory: bool) -> tuple[Mode, bool]:
        if _done(job, view):
            return Mode.IDLE, memory
        if memory or (view.mode == Mode.IDLE and last_safe_moment(job, view)):
            return Mode.ON_DEMAND, True
        if view.mode == Mode.SPOT and view.spot_available:
            return Mode.SPOT, False
        t, cp, d = view.elapsed_hours, view.progress_hours, job.changeover_hours
        if view.mode == Mode.ON_DEMAND and cp < expected_progress(job, t + 2.0 * d) - _EPS:
            return Mode.ON_DEMAND, False
        if view.spot_available:
            return Mode.SPOT, False
        if cp < expected_progress(job, t) - _EPS:
            return Mode.ON_DEMAND, False
        return Mode.IDLE, False


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
#   watching (as markets.interruptions weighs its advisor prior);
PRIOR_WEIGHT_HOURS = 24.0
# - with no history at all: spot held half the time (the middle of the
#   0.17-0.91 range published for V100 zones, economics.md section 7), lost once
#   per hour held (1-node GPU traces: 0.1-2 per hour held, markets.interruptions);
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
    longer = [x for x in spells if x > age + _EPS]
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
            if memory.run_hours < memory.seen_hours - _EPS:  # we saw the spell begin
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
            longer = [x - at for x in memory.up if x > at + _EPS]
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
        if _done(job, view):
            return Mode.IDLE, memory
        if memory.committed or self._thin(job, view):
            return Mode.ON_DEMAND, replace(memory, committed=True)
        if view.mode == Mode.SPOT and view.spot_available:
            return Mode.SPOT, memory
        t, cp, d = view.elapsed_hours, view.progress_hours, job.changeover_hours
        age = memory.run_hours - job.tick_hours  # the current spell's age before this tick
        if view.spot_available:
            behind = cp < self.target(job, memory, t + 2.0 * d) - _EPS
            if view.mode == Mode.ON_DEMAND and behind and not self._join_spot(job, memory, age):
                return Mode.ON_DEMAND, memory
            return Mode.SPOT, memory
        if view.mode == Mode.ON_DEMAND:
            ahead_at = t + max(
                2.0 * d, min(self._outage_left(job, memory, age), job.deadline_hours)
            )
            if cp < self.target(job, memory, ahead_at) - _EPS:
                return Mode.ON_DEMAND, memory
            return Mode.IDLE, memory
        if cp < self.target(job, memory, t) - _EPS:
            return Mode.ON_DEMAND, memory
        return Mode.IDLE, memory


DEADLINE_POLICIES: dict[str, type[Any]] = {
    "on_demand": OnDemand,
    "greedy": Greedy,
    "uniform_progress": UniformProgress,
    "spotfolio": SpotfolioDeadline,
}


def deadline_policy(name: str) -> DeadlinePolicy:
    """A fresh policy by name; an unknown name is an ``InputError`` listing the
    valid ones."""
    try:
        cls = DEADLINE_POLICIES[name]
    except KeyError:
        raise InputError(
            "--policy", None, f"one of {', '.join(sorted(DEADLINE_POLICIES))}", got=name
        ) from None
    policy: DeadlinePolicy = cls()
    return policy
