"""The deadline-job tick engine: one restartable job replayed over a real trace.

Owns: ``DeadlineSetting`` (the job and market terms), ``DeadlineWindow`` (a
stretch of a trace and a job fraction), ``simulate_deadline`` (run one policy
over one window) and ``DeadlineOutcome`` (what happened, in work and money).

Must not: decide anything (the rules live in ``policies.online.deadline``;
this module only asks them each tick and applies the answer) or know the
future on a policy's behalf.

Each tick of ``tick_s`` seconds, in order:

1. if the job holds spot and the trace says spot cannot be held in this tick,
   the instance is revoked: the job becomes idle (a *preemption*; the
   changeover it was paying is forfeit, its progress is kept: the job is
   restartable, as in "Can't Be Late");
2. the policy sees ``TickView`` (elapsed time, progress, mode, this tick's
   availability) and names a mode; a request for spot that the trace refuses
   leaves the job idle for the tick;
3. switching *into* spot or on-demand starts a changeover of ``d`` hours:
   billed, no progress; staying continues the one in progress;
4. a tick on spot or on-demand is billed whole at its tier's price; it pays
   changeover first, then progress; work past completion in the last tick is
   ``lost``. The job stops at completion.

All durations are integer multiples of one quantum (the gcd of tick, ``d``
and ``C`` in seconds), so the engine is exact and the dynamic programme in
``broker.simulate.omniscient`` moves on the same grid. Invariants (checked by
``DeadlineOutcome.check``): progress + lost + overhead = hours held = billed
hours; cost = spot hours x spot price + on-demand hours x on-demand price.
The deadline is the window's last tick boundary: ``floor(R / tick)`` ticks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from broker.simulate import BoolArray
from policies.online.deadline import DeadlinePolicy, JobSpec, Mode, PoolHistory, TickView

__all__ = [
    "DeadlineOutcome",
    "DeadlineSetting",
    "DeadlineWindow",
    "Grid",
    "Scripted",
    "simulate_deadline",
]


@dataclass(frozen=True)
class DeadlineSetting:
    """docs/docs/benchmarks.md defaults: ``k = 3``, ``d = 0.2 h``, ``C = 48 h``."""

    compute_hours: float = 48.0
    changeover_hours: float = 0.2
    price_ratio: float = 3.0  # k = on-demand / spot
    spot_usd_per_hour: float = 1.0  # costs are reported as ratios; 1 keeps them in spot-hours

    @property
    def on_demand_usd_per_hour(self) -> float:
        return self.spot_usd_per_hour * self.price_ratio


@dataclass(frozen=True)
class DeadlineWindow:
    """One stretch of one trace and one job fraction (``C / R``).

    ``held`` covers the window's ticks; ``past`` the trace's ticks watched
    before it (the history a broker has when the job arrives; may be empty).
    """

    trace: str
    start_tick: int
    tick_s: int
    job_fraction: float
    held: BoolArray = field(repr=False, compare=False)
    past: BoolArray = field(default_factory=lambda: np.zeros(0, dtype=np.bool_), repr=False)

    @property
    def ticks(self) -> int:
        return len(self.held)

    @property
    def held_share(self) -> float:
        """Hindsight share of the window's ticks with spot (for quadrants only)."""
        return float(self.held.mean())


@dataclass(frozen=True)
class Grid:
    """The window on integer quanta: tick ``a``, changeover ``b``, work ``P``."""

    quantum_s: int
    tick_q: int
    changeover_q: int
    work_q: int
    ticks: int

    @classmethod
    def of(cls, setting: DeadlineSetting, window: DeadlineWindow) -> Grid:
        d_s = round(setting.changeover_hours * 3600)
        c_s = round(setting.compute_hours * 3600)
        q = math.gcd(math.gcd(window.tick_s, d_s), c_s)
        return cls(q, window.tick_s // q, d_s // q, c_s // q, window.ticks)

    def hours(self, quanta: int) -> float:
        return quanta * self.quantum_s / 3600.0


def job_spec(setting: DeadlineSetting, window: DeadlineWindow) -> JobSpec:
    """What the policy is told: the deadline is the window's last tick boundary."""
    tick_h = window.tick_s / 3600.0
    return JobSpec(
        compute_hours=setting.compute_hours,
        deadline_hours=window.ticks * tick_h,
        changeover_hours=setting.changeover_hours,
        tick_hours=tick_h,
        price_ratio=setting.price_ratio,
        prior=PoolHistory.from_held(window.past.tolist(), tick_h),
    )


@dataclass(frozen=True)
class DeadlineOutcome:
    """One policy over one window. Hours are wall-clock hours of the job."""

    policy: str
    cost_usd: float
    spot_usd: float
    on_demand_usd: float
    spot_hours: float
    on_demand_hours: float
    progress_hours: float
    overhead_hours: float
    lost_hours: float
    finished: bool
    finish_hours: float | None
    changeovers: int
    preemptions: int
    schedule: tuple[int, ...] = field(default=(), repr=False)

    @property
    def missed(self) -> bool:
        return not self.finished

    @property
    def held_hours(self) -> float:
        return self.spot_hours + self.on_demand_hours

    def check(self, setting: DeadlineSetting, tol: float = 1e-6) -> None:
        """Raise ``AssertionError`` if work or money is not conserved."""
        work = self.progress_hours + self.lost_hours + self.overhead_hours
        assert abs(work - self.held_hours) <= tol, (work, self.held_hours)
        money = (
            self.spot_hours * setting.spot_usd_per_hour
            + self.on_demand_hours * setting.on_demand_usd_per_hour
        )
        assert abs(money - self.cost_usd) <= tol, (money, self.cost_usd)
        assert abs(self.spot_usd + self.on_demand_usd - self.cost_usd) <= tol
        assert self.progress_hours <= setting.compute_hours + tol


class Scripted:
    """Replays a fixed per-tick schedule (the omniscient plan) as a policy."""

    def __init__(self, name: str, modes: tuple[int, ...] | list[int]) -> None:
        self.name = name
        self._modes = tuple(int(m) for m in modes)

    def start(self, job: JobSpec) -> int:
        return 0

    def decide(self, job: JobSpec, view: TickView, memory: int) -> tuple[Mode, int]:
        mode = Mode(self._modes[memory]) if memory < len(self._modes) else Mode.IDLE
        return mode, memory + 1


def simulate_deadline(
    setting: DeadlineSetting,
    window: DeadlineWindow,
    policy: DeadlinePolicy,
    *,
    record: bool = False,
) -> DeadlineOutcome:
    """Run ``policy`` over ``window`` (see the module docstring for the rules)."""
    g = Grid.of(setting, window)
    job = job_spec(setting, window)
    tick_h = window.tick_s / 3600.0
    held = window.held.tolist()
    # Each policy's own memory type: DeadlinePolicy (policies.online) is not
    # generic in it, so start/decide hand it over as Any.
    memory: Any = policy.start(job)
    mode = Mode.IDLE
    overhead_left = 0  # quanta of changeover still to pay
    progress = overhead = lost = 0
    ticks_on = {Mode.SPOT: 0, Mode.ON_DEMAND: 0}
    changeovers = preemptions = 0
    finish_q: int | None = None
    schedule: list[int] = []
    for i in range(g.ticks):
        available = held[i]
        if mode == Mode.SPOT and not available:
            mode, overhead_left = Mode.IDLE, 0
            preemptions += 1
        view = TickView(
            elapsed_hours=i * tick_h,
            progress_hours=g.hours(progress),
            mode=mode,
            spot_available=available,
            changeover_left_hours=g.hours(overhead_left),
        )
        choice, memory = policy.decide(job, view, memory)
        if choice == Mode.SPOT and not available:
            choice = Mode.IDLE  # the simulated cloud refuses the request
        if choice == Mode.IDLE:
            overhead_left = 0
        elif choice != mode:
            overhead_left = g.changeover_q
            changeovers += 1
        mode = choice
        if record:
            schedule.append(int(mode))
        if mode == Mode.IDLE:
            continue
        ticks_on[mode] += 1
        paid = min(overhead_left, g.tick_q)
        overhead_left -= paid
        useful = min(g.tick_q - paid, g.work_q - progress)
        overhead += paid
        progress += useful
        lost += g.tick_q - paid - useful
        if progress >= g.work_q:
            finish_q = i * g.tick_q + paid + useful
            break
    spot_h = ticks_on[Mode.SPOT] * tick_h
    od_h = ticks_on[Mode.ON_DEMAND] * tick_h
    spot_usd = spot_h * setting.spot_usd_per_hour
    od_usd = od_h * setting.on_demand_usd_per_hour
    return DeadlineOutcome(
        policy=policy.name,
        cost_usd=spot_usd + od_usd,
        spot_usd=spot_usd,
        on_demand_usd=od_usd,
        spot_hours=spot_h,
        on_demand_hours=od_h,
        progress_hours=g.hours(progress),
        overhead_hours=g.hours(overhead),
        lost_hours=g.hours(lost),
        finished=finish_q is not None,
        finish_hours=None if finish_q is None else g.hours(finish_q),
        changeovers=changeovers,
        preemptions=preemptions,
        schedule=tuple(schedule),
    )


def on_demand_cost(setting: DeadlineSetting, window: DeadlineWindow) -> float:
    """The all-on-demand cost of the window: ``ceil((C + d) / tick)`` ticks."""
    g = Grid.of(setting, window)
    ticks = -(-(g.work_q + g.changeover_q) // g.tick_q)
    return ticks * window.tick_s / 3600.0 * setting.on_demand_usd_per_hour


def held_array(values: list[bool] | list[int] | npt.NDArray[np.generic]) -> BoolArray:
    """A bool array from 0/1 or bool values (tests build windows this way)."""
    return np.asarray(values, dtype=np.bool_)
