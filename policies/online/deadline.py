"""Per-tick decision rules for one restartable job with a deadline.

Owns: the deadline setting's decision rules (benchmarks.md section 1, the "Can't
Be Late" setting, NSDI 2024) as pure functions of what the job knows at a tick:
``on_demand``, ``greedy``, ``uniform_progress`` (exactly as published) here,
and ``spotfolio`` (ours) in ``policies.online.progress``; the
registry ``policies.online.registry`` knows all four by name. Each rule is a
``DeadlinePolicy``: ``start(job)`` gives its memory, ``decide(job, view,
memory)`` returns the mode for the coming tick and the memory to carry.
Everything a rule knows is in ``TickView`` (the past and the present); nothing
here can see the future.

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
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Protocol

__all__ = [
    "EPS",
    "DeadlinePolicy",
    "Greedy",
    "JobSpec",
    "Mode",
    "OnDemand",
    "PoolHistory",
    "TickView",
    "UniformProgress",
    "expected_progress",
    "is_done",
    "last_safe_moment",
]

# Tolerance on hours of progress and time (float sums of tick lengths).
EPS = 1e-9


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
    """A pure per-tick rule with explicit memory.

    The memory is each rule's own type, opaque to whoever carries it between
    ticks (the simulator, the registry): ``Any`` stands for "the type this
    rule's ``start`` returns", which one protocol over all rules cannot name.
    """

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


def is_done(job: JobSpec, view: TickView) -> bool:
    return view.progress_hours >= job.compute_hours - EPS


def last_safe_moment(job: JobSpec, view: TickView) -> bool:
    """``R(t) < C(t) + 2d`` on the tick grid: waiting one more tick idle could
    leave too little time to finish on on-demand after a changeover."""
    rem_time, rem_work = _remaining(job, view)
    tick = job.tick_hours
    time_ticks = math.floor(rem_time / tick + EPS)
    need_ticks = math.ceil((rem_work + 2.0 * job.changeover_hours) / tick - EPS)
    return need_ticks >= time_ticks


class OnDemand:
    """All on-demand: the cost every ratio is measured against."""

    name = "on_demand"

    def start(self, job: JobSpec) -> None:
        return None

    def decide(self, job: JobSpec, view: TickView, memory: None) -> tuple[Mode, None]:
        return (Mode.IDLE if is_done(job, view) else Mode.ON_DEMAND), None


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
        if is_done(job, view):
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
        if is_done(job, view):
            return Mode.IDLE, memory
        if memory or (view.mode == Mode.IDLE and last_safe_moment(job, view)):
            return Mode.ON_DEMAND, True
        if view.mode == Mode.SPOT and view.spot_available:
            return Mode.SPOT, False
        t, cp, d = view.elapsed_hours, view.progress_hours, job.changeover_hours
        if view.mode == Mode.ON_DEMAND and cp < expected_progress(job, t + 2.0 * d) - EPS:
            return Mode.ON_DEMAND, False
        if view.spot_available:
            return Mode.SPOT, False
        if cp < expected_progress(job, t) - EPS:
            return Mode.ON_DEMAND, False
        return Mode.IDLE, False
