"""Per-tick decision rules for one restartable job with a deadline.

Owns: the deadline setting's decision rules (docs/docs/benchmarks.md, the "Can't
Be Late" setting, NSDI 2024) as pure functions of what the job knows at a tick:
``on_demand``, ``greedy``, ``uniform_progress`` (exactly as published): the
baselines, which ``policies.online.registry`` knows by name. Spotfolio's own
tier rule lives in the lifecycle manager (``broker.lifecycle.deadline``); the
bench runs it through the manager (``broker.bench.product.deadline``). Each rule is a
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

The safety nets "``R(t) < C(t) + 2d``" (``last_safe_moment``) and
"``R(t) < C(t) + d``" (``last_net``) are evaluated on the tick grid the way the
authors' simulator does (skypilot-org/can-t-be-late, ``strategies``: remaining
time floored to whole ticks, remaining work plus the changeovers rounded up to
whole ticks), so a job idle at the start of a tick can always still finish on
on-demand, whatever the tick length. Whether the instance held has paid its
changeover (the last net's condition) is ``TickView.changeover_left_hours``,
which the simulator reports at each tick start.
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
    "last_net",
    "last_safe_moment",
    "remaining_time_on_grid",
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


def remaining_time_on_grid(job: JobSpec, view: TickView) -> float:
    """``T = floor((R0 - t) / D) * D``: the whole ticks left before the deadline."""
    tick = job.tick_hours
    return math.floor((job.deadline_hours - view.elapsed_hours) / tick + EPS) * tick


def _work_on_grid(hours: float, tick: float) -> float:
    """``ceil(hours / D) * D``: whole ticks needed to run ``hours``."""
    return math.ceil(hours / tick - EPS) * tick


def last_safe_moment(job: JobSpec, view: TickView) -> bool:
    """The safety net's test ``ceil((c + 2d) / D) D >= T`` (Uniform Progress
    rule 5, greedy's switch): waiting one more tick without on-demand could
    leave too little time to finish on on-demand after a changeover."""
    _, rem_work = _remaining(job, view)
    need = _work_on_grid(rem_work + 2.0 * job.changeover_hours, job.tick_hours)
    return need >= remaining_time_on_grid(job, view) - EPS


def last_net(job: JobSpec, view: TickView) -> bool:
    """The last net's test ``ceil((c + d) / D) D >= T`` (Uniform Progress rule 6):
    one more changeover is all the time left can absorb."""
    _, rem_work = _remaining(job, view)
    need = _work_on_grid(rem_work + job.changeover_hours, job.tick_hours)
    return need >= remaining_time_on_grid(job, view) - EPS


class OnDemand:
    """All on-demand: the cost every ratio is measured against."""

    name = "on_demand"

    def start(self, job: JobSpec) -> None:
        return None

    def decide(self, job: JobSpec, view: TickView, memory: None) -> tuple[Mode, None]:
        return (Mode.IDLE if is_done(job, view) else Mode.ON_DEMAND), None


class Greedy:
    """Greedy, the strawman of "Can't Be Late" (Wu et al., NSDI 2024, section 3;
    the published simulator skypilot-org/can-t-be-late, ``strategies``).

    Rules, each tick (later override earlier):

    1. done -> idle;
    2. spot if spot is available, else idle (wait for spot);
    3. on on-demand now -> on-demand (once on on-demand, stay to the end);
    4. the last safe moment (``last_safe_moment``: ``ceil((c + 2d) / D) D >= T``)
       and idle -> on-demand.

    On spot it keeps spot however thin the slack: the ``2d`` in the test leaves
    room for one changeover after a revocation. Its documented weakness: all the
    slack goes on waiting, so the job ends with one long on-demand run, blind to
    spot that returns meanwhile. Memory: whether it has committed to on-demand
    (the same as "on on-demand now": it reaches on-demand no other way).
    """

    name = "greedy"

    def start(self, job: JobSpec) -> bool:
        return False  # committed to on-demand

    def decide(self, job: JobSpec, view: TickView, memory: bool) -> tuple[Mode, bool]:
        if is_done(job, view):
            return Mode.IDLE, memory
        if memory or view.mode == Mode.ON_DEMAND:
            return Mode.ON_DEMAND, True
        if view.mode == Mode.IDLE and last_safe_moment(job, view):
            return Mode.ON_DEMAND, True
        return (Mode.SPOT if view.spot_available else Mode.IDLE), False


def expected_progress(job: JobSpec, at_hours: float) -> float:
    """``ep(t) = C t / R``."""
    return job.compute_hours * at_hours / job.deadline_hours


class UniformProgress:
    """Uniform Progress, exactly as published: "Can't Be Late" (Wu et al., NSDI
    2024, section 4) in the form of its simulator's ``_step``
    (skypilot-org/can-t-be-late, ``strategies``).

    Job of ``C0`` hours, deadline ``R0``, changeover ``d``, tick ``D``; at
    elapsed ``t`` with progress ``p``, remaining work ``c = C0 - p`` and
    remaining time ``T = floor((R0 - t) / D) D``. Each tick, later rules
    override earlier ones:

    1. ``c ~ 0`` -> idle (and nothing else applies);
    2. default: spot if spot is available, else idle;
    3. behind the line (``p < C0 t / R0``): spot if available, else on-demand;
    4. on on-demand now: stay on on-demand unless spot is available **and**
       ``p >= C0 (t + 2d) / R0`` (on-demand is left only for spot, never for
       idle);
    5. safety net: ``ceil((c + 2d) / D) D >= T`` and idle or on on-demand now
       -> on-demand;
    6. last net: ``ceil((c + d) / D) D >= T``: stay on spot only if on spot now
       with its changeover fully paid (``TickView.changeover_left_hours`` ~ 0);
       otherwise on-demand.

    "Now" is ``TickView.mode``: a spot instance revoked at this tick is already
    idle. No memory: every rule reads the present only.
    """

    name = "uniform_progress"

    def start(self, job: JobSpec) -> None:
        return None

    def decide(self, job: JobSpec, view: TickView, memory: None) -> tuple[Mode, None]:
        if is_done(job, view):  # 1
            return Mode.IDLE, None
        t, p, d = view.elapsed_hours, view.progress_hours, job.changeover_hours
        spot = view.spot_available
        choice = Mode.SPOT if spot else Mode.IDLE  # 2
        if p < expected_progress(job, t) - EPS:  # 3
            choice = Mode.SPOT if spot else Mode.ON_DEMAND
        if view.mode == Mode.ON_DEMAND:  # 4
            ahead = p >= expected_progress(job, t + 2.0 * d) - EPS
            choice = Mode.SPOT if spot and ahead else Mode.ON_DEMAND
        if view.mode in (Mode.IDLE, Mode.ON_DEMAND) and last_safe_moment(job, view):  # 5
            choice = Mode.ON_DEMAND
        if last_net(job, view):  # 6
            paid = view.changeover_left_hours <= EPS
            choice = Mode.SPOT if view.mode == Mode.SPOT and paid else Mode.ON_DEMAND
        return choice, None
