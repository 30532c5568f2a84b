"""What the portfolio optimizer is asked: workloads, demand and market, per period.

Owns: ``PlanOptions`` (knobs with their defaults), ``PoolSeries`` (one pool's
static facts and per-period spot price and capacity), ``PlanningProblem`` and
``build_problem`` (from a ``MarketSnapshot`` and optional hourly arrays). The
problem carries the snapshot's ``CostTable`` (``policies.cost_table``): handed
in by a caller that has one, else computed once by ``build_problem``; every
solve of the problem and of its variants (``dataclasses.replace``: a committed
sweep, a rolling window) reads that one table.

Time: the horizon of ``hours`` hours is cut into periods of ``period_hours``
(the last may be shorter), or, with ``period_hours = 0``, into adaptive
periods that merge consecutive hours no input separates. Serving demand in a
period is the *maximum* of its hours (it must be met every hour); spot
capacity the minimum; spot price the mean.

Must not: solve anything or touch PuLP (``model``/``solve`` do).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import numpy.typing as npt

from broker.planning.optimizer.regions import check_allow_lists
from markets.blocks import CapacityBlock
from markets.commitments import OwnedCommitment
from markets.errors import InputError
from markets.model import MarketSnapshot, PoolSnapshot, Quota
from policies.cost_table import CostEntry, CostOptions, CostTable
from policies.workloads.spec import Workload, WorkloadClass, WorkloadSet

__all__ = [
    "SPOT_UNITS_AT_SCORE_10",
    "PlanOptions",
    "PlanningProblem",
    "PoolSeries",
    "build_problem",
]

FloatArray = npt.NDArray[np.float64]

# Market depth assumed for one spot pool when a request of this many capacity
# units gets placement score 10 (AWS GetSpotPlacementScores is asked for a
# target capacity; a score of 10 means "very likely to be fulfilled"). Our
# assumption, configurable: lower scores scale it down linearly.
SPOT_UNITS_AT_SCORE_10 = 256.0


@dataclass(frozen=True)
class PlanOptions:
    """Knobs of one optimization.

    ``churn_usd_per_unit``: the cost of launching one capacity unit (cold start,
    image pull, warm-up) charged on every increase of an allocation between
    periods; it keeps plans from flapping and pins running allocations in a
    rolling horizon. ``integral``: integer instance counts (``None`` = integer
    when the model is small enough to solve exactly fast, else the LP
    relaxation, read as average instances over the period). ``gang_blocks``:
    a training gang's size is decided once per block, at most this many blocks
    over the horizon, and never shorter than its minimum dwell: few integer
    decisions, and no resize sooner than the dwell. ``max_spot_pools``: per
    workload, only this many cheapest spot pools by effective cost are offered
    to the solver (plus enough zones to satisfy the diversification caps).
    ``aggregate``: drop dominated on-demand options and commitment groups
    (exact, ``broker.planning.optimizer.aggregate``; off only for the benchmark's naive
    formulation). ``gap``: the relative gap to a proven lower bound a MILP
    solve stops at. ``polish_s``: 0 (default) solves large models by quick
    relax-and-fix and reports its gap to the LP bound as is (1-3 % on the
    benchmark, mostly the plan's: gangs rounded to whole blocks); above 0, a
    thorough relax-and-fix (``broker.planning.optimizer.search``) and then up to this
    many seconds of warm-started MILP until ``gap`` is proven.
    ``time_limit_s``: the MILP's limit; relax-and-fix's search, completion
    and proof share it, counted from the start of the solve.
    """

    term_years: int = 1
    # How commitments bought here are paid (markets.commitments.PaymentOption):
    # the price is the market's for its quoted option times the catalog's
    # ratio for this one (markets.catalog.payment_ratio).
    payment: str = "no_upfront"
    period_hours: int = 1  # 0: adaptive periods (see PlanningProblem._adaptive_bounds)
    period_tolerance: float = 0.05
    max_period_hours: int = 12
    churn_usd_per_unit: float = 0.25
    allow_spot: bool = True
    allow_committed: bool = True
    interruption_multiplier: float = 1.0
    checkpoint_write_seconds: float | None = None
    spot_units_at_score_10: float = SPOT_UNITS_AT_SCORE_10
    integral: bool | None = None
    integral_max_vars: int = 300
    max_spot_pools: int = 8
    aggregate: bool = True
    gang_blocks: int = 24
    solver: str = "cbc"
    gap: float = 0.005
    time_limit_s: float = 60.0
    polish_s: float = 0.0

    @property
    def cost_options(self) -> CostOptions:
        """The knobs the effective costs depend on (the ``CostTable``'s)."""
        return CostOptions(
            term_years=self.term_years,
            interruption_multiplier=self.interruption_multiplier,
            checkpoint_write_seconds=self.checkpoint_write_seconds,
        )


@dataclass(frozen=True)
class PoolSeries:
    """One pool: its snapshot (static facts, on-demand and committed prices)
    and per-period spot price and spot capacity (in instances)."""

    snap: PoolSnapshot
    spot_usd_per_hour: FloatArray  # NaN where spot is not offered
    spot_capacity_instances: FloatArray

    @property
    def key(self) -> str:
        return self.snap.pool.key


@dataclass(frozen=True)
class PlanningProblem:
    """Everything one solve needs. ``remaining_unit_hours`` and
    ``deadline_hour`` (relative to ``start``) let a rolling horizon re-plan a
    job part-way through; by default they come from the workload specs.
    ``committed_fixed`` pins commitment counts (group key -> instances), as a
    committed sweep or a baseline does; ``previous_instances`` (workload, pool
    key, tier) -> instances running before the first period, charged churn on
    change. ``costs`` is the effective-cost table of the snapshot the pools
    come from, priced with ``options.cost_options`` (checked)."""

    start: datetime
    hours: int
    workloads: WorkloadSet
    pools: tuple[PoolSeries, ...]
    serving_demand: Mapping[str, FloatArray]  # per hour, reference units
    costs: CostTable
    options: PlanOptions = field(default_factory=PlanOptions)
    remaining_unit_hours: Mapping[str, float] = field(default_factory=dict)
    deadline_hour: Mapping[str, float] = field(default_factory=dict)
    # workload -> hours into this horizon before which its work is not
    # available (left out: the spec's ``release_hours``).
    release_hour: Mapping[str, float] = field(default_factory=dict)
    committed_fixed: Mapping[str, int] | None = None
    previous_instances: Mapping[tuple[str, str, str], float] = field(default_factory=dict)
    # workload -> (hour, unit-hours): work due by that hour of this horizon (a
    # rolling horizon's uniform-progress milestone, so re-plans cannot keep
    # pushing work past the step they commit).
    milestones: Mapping[str, tuple[int, float]] = field(default_factory=dict)
    # workload -> unit-hours due inside this horizon (a rolling horizon's
    # pacing line, ``broker.planning.rolling``); left out: the pro-rata share
    # of the time left (``required_unit_hours``).
    due_unit_hours: Mapping[str, float] = field(default_factory=dict)
    # workload -> dollars a unit-hour done beyond what is due here is worth
    # (what it is expected to cost later): work ahead is bought while it is
    # cheaper than that, up to the work left.
    ahead_usd_per_unit_hour: Mapping[str, float] = field(default_factory=dict)
    # Dollars already spent against the horizon budgets (``budget_usd``) by
    # earlier steps of a rolling horizon: per workload name, and for the
    # fleet under "" (``broker.planning.rolling.FLEET``). The budget left is
    # the budget less this.
    spent_usd: Mapping[str, float] = field(default_factory=dict)
    # Commitments already bought (``markets.commitments``): sunk, usable in
    # their group while active; what the problem buys comes on top of them
    # (``broker.planning.optimizer.commitments``).
    owned: tuple[OwnedCommitment, ...] = ()
    # The account's limits on what runs at once (the snapshot's): every
    # period keeps to each (``broker.planning.optimizer.quotas``).
    quotas: tuple[Quota, ...] = ()
    # Reserved-ahead blocks: offerings the plan may buy and blocks held
    # (``broker.planning.optimizer.blocks``).
    blocks: tuple[CapacityBlock, ...] = ()

    def __post_init__(self) -> None:
        # Also on dataclasses.replace: a variant with other cost knobs needs
        # another table (build_problem), not this one re-read at other prices.
        if self.costs.options != self.options.cost_options:
            raise InputError(
                "costs",
                "options",
                f"a cost table priced with the problem's {self.options.cost_options}",
                got=self.costs.options,
            )
        if self.costs.workloads is not self.workloads and self.costs.workloads != self.workloads:
            raise InputError(
                "costs", "workloads", "the cost table of the problem's workloads", got=None
            )

    # --- periods ---------------------------------------------------------------

    @property
    def period_bounds(self) -> list[tuple[int, int]]:
        """(first hour, end hour) of each period (cached)."""
        cached: list[tuple[int, int]] | None = self.__dict__.get("_bounds")
        if cached is None:
            if self.options.period_hours > 0:
                step = self.options.period_hours
                cached = [(h, min(h + step, self.hours)) for h in range(0, self.hours, step)]
            else:
                cached = self._adaptive_bounds()
            object.__setattr__(self, "_bounds", cached)
        return cached

    def _adaptive_bounds(self) -> list[tuple[int, int]]:
        """Merge consecutive hours no input separates: a period ends where any
        serving demand moves more than ``period_tolerance`` from the period's
        first hour, where a pool's spot price or capacity moves as much, at a
        job's deadline, or at ``max_period_hours``. Within a period serving
        demand is planned at its maximum, so merging never under-provisions."""
        tol = self.options.period_tolerance
        rows = [np.asarray(v[: self.hours], dtype=float) for v in self.serving_demand.values()]
        for p in self.pools:
            rows.append(np.nan_to_num(p.spot_usd_per_hour[: self.hours], nan=-1.0))
            rows.append(np.asarray(p.spot_capacity_instances[: self.hours], dtype=float))
        signal = np.vstack(rows) if rows else np.zeros((0, self.hours))
        cuts = {
            math.ceil(d)
            for w in self.workloads.workloads
            for d in [self.deadline_hour.get(w.name, w.deadline_hours or math.inf)]
            if 0 < d < self.hours
        }
        cuts |= {
            math.ceil(r)
            for w in self.workloads.workloads
            for r in [self.first_hour(w)]
            if 0 < r < self.hours
        }
        cuts |= {h for h, _amount in self.milestones.values() if 0 < h < self.hours}
        for b in self.blocks:  # a period is wholly in or out of a block's window
            for edge in (b.start, b.end):
                h = (edge - self.start).total_seconds() / 3600.0
                if 0 < h < self.hours:
                    cuts.add(int(h))
        bounds: list[tuple[int, int]] = []
        start = 0
        for h in range(1, self.hours + 1):
            if h == self.hours:
                bounds.append((start, h))
                break
            ref = signal[:, start]
            moved = bool(np.any(np.abs(signal[:, h] - ref) > tol * np.maximum(np.abs(ref), 1e-9)))
            if moved or h in cuts or h - start >= self.options.max_period_hours:
                bounds.append((start, h))
                start = h
        return bounds

    @property
    def period_lengths(self) -> FloatArray:
        return np.array([float(e - s) for s, e in self.period_bounds])

    def _reduce(self, hourly: FloatArray, how: str) -> FloatArray:
        """Per-period max/mean/min of an hourly array, vectorised."""
        arr = np.asarray(hourly[: self.hours], dtype=float)
        starts = np.array([s for s, _e in self.period_bounds], dtype=int)
        if how == "max":
            return np.asarray(np.maximum.reduceat(arr, starts), dtype=float)
        if how == "min":
            return np.asarray(np.minimum.reduceat(arr, starts), dtype=float)
        ok = ~np.isnan(arr)
        sums = np.add.reduceat(np.where(ok, arr, 0.0), starts)
        counts = np.add.reduceat(ok.astype(float), starts)
        with np.errstate(all="ignore"):
            return np.where(counts > 0, sums / np.maximum(counts, 1.0), np.nan)

    def serving_period_demand(self, name: str) -> FloatArray:
        return self._reduce(self.serving_demand[name], "max")

    def period_mean(self, hourly: FloatArray) -> FloatArray:
        return self._reduce(hourly, "mean")

    def period_min(self, hourly: FloatArray) -> FloatArray:
        return self._reduce(hourly, "min")

    # --- per-workload facts ------------------------------------------------------

    def required_unit_hours(self, w: Workload) -> float:
        """Work a training/batch job must finish inside this horizon: all of
        what remains if the deadline falls inside, else the pro-rata share of
        the time left (uniform progress toward the deadline), or what
        ``due_unit_hours`` says is due."""
        remaining = self.remaining_unit_hours.get(w.name, w.unit_hours or 0.0)
        deadline = self.deadline_hour.get(w.name, w.deadline_hours or math.inf)
        release = self.first_hour(w)
        if remaining <= 0 or release >= self.hours:
            return 0.0
        if deadline <= self.hours:
            return remaining
        due = self.due_unit_hours.get(w.name)
        if due is not None:
            return min(remaining, max(0.0, due))
        return remaining * (self.hours - release) / (deadline - release)

    def remaining(self, w: Workload) -> float:
        """Work the job still has to do (unit-hours)."""
        return max(0.0, self.remaining_unit_hours.get(w.name, w.unit_hours or 0.0))

    def first_hour(self, w: Workload) -> float:
        """Hours into the horizon before which the job may not run (its release)."""
        if w.workload_class is WorkloadClass.SERVING:
            return 0.0
        return max(0.0, self.release_hour.get(w.name, w.release_hours))

    def runs_in(self, w: Workload, h0: int) -> bool:
        """Whether the job may run in the period starting at hour ``h0``:
        serving always; a job from its release to its deadline."""
        if w.workload_class is WorkloadClass.SERVING:
            return True
        return self.first_hour(w) <= h0 + 1e-9 and h0 < self.last_hour(w)

    def last_hour(self, w: Workload) -> float:
        """Hours into the horizon after which the job may not run."""
        return min(float(self.hours), self.deadline_hour.get(w.name, w.deadline_hours or math.inf))

    def entries(self, w: Workload) -> tuple[CostEntry, ...]:
        """``w``'s effective costs, cheapest effective spot first (the table's)."""
        return self.costs.entries(w.name)

    def pool(self, key: str) -> PoolSeries:
        return self._pool_index[key]

    @property
    def _pool_index(self) -> dict[str, PoolSeries]:
        cached: dict[str, PoolSeries] | None = self.__dict__.get("_pools_by_key")
        if cached is None:
            cached = {p.key: p for p in self.pools}
            object.__setattr__(self, "_pools_by_key", cached)
        return cached


def _capacity(snap: PoolSnapshot, units_at_10: float) -> float:
    """Spot capacity in instances from placement score, else held share."""
    if not snap.spot_available or snap.spot_usd_per_hour is None:
        return 0.0
    if snap.placement_score is not None:
        units = units_at_10 * snap.placement_score / 10.0
    elif snap.available_share is not None:
        units = units_at_10 * snap.available_share
    else:
        units = units_at_10 * 0.5
    return math.floor(units / snap.instance.units)


def build_problem(
    snapshot: MarketSnapshot,
    workloads: WorkloadSet,
    serving_demand: Mapping[str, FloatArray],
    *,
    hours: int,
    options: PlanOptions | None = None,
    spot_prices: Mapping[str, FloatArray] | None = None,
    spot_capacity_instances: Mapping[str, FloatArray] | None = None,
    costs: CostTable | None = None,
    remaining_unit_hours: Mapping[str, float] | None = None,
    deadline_hour: Mapping[str, float] | None = None,
    committed_fixed: Mapping[str, int] | None = None,
    previous_instances: Mapping[tuple[str, str, str], float] | None = None,
    release_hour: Mapping[str, float] | None = None,
    milestones: Mapping[str, tuple[int, float]] | None = None,
    due_unit_hours: Mapping[str, float] | None = None,
    ahead_usd_per_unit_hour: Mapping[str, float] | None = None,
    spent_usd: Mapping[str, float] | None = None,
    owned: tuple[OwnedCommitment, ...] = (),
    blocks: tuple[CapacityBlock, ...] = (),
) -> PlanningProblem:
    """A problem over ``hours`` from ``snapshot``: prices flat at the snapshot's
    unless hourly ``spot_prices`` / ``spot_capacity_instances`` (pool key ->
    array of ``hours``) are given (hindsight, or a forecast). ``costs``: the
    snapshot's cost table if the caller has one (it must be of ``snapshot``,
    ``workloads`` and ``options.cost_options``), else computed here. The rest
    are ``PlanningProblem``'s fields of the same names (``None``: its default;
    ``committed_fixed=None`` leaves commitments free)."""
    options = options or PlanOptions()
    if hours <= 0:
        raise InputError("--hours", None, "a horizon of at least 1 hour", got=hours)
    for w in workloads.of_class(WorkloadClass.SERVING):
        d = serving_demand.get(w.name)
        if d is None or len(d) < hours:
            raise InputError(
                "demand",
                w.name,
                f"{hours} hourly values for serving workload {w.name!r}",
                got=None if d is None else len(d),
            )
    wanted = set(workloads.instance_types())
    series: list[PoolSeries] = []
    # A pool no workload may use (its type, or its allow-lists: ``regions``)
    # is left out here: it cuts no adaptive period and sizes nothing.
    for snap in snapshot.pools:
        if snap.pool.instance_type not in wanted or not any(
            snap.pool.instance_type in w.instance_types
            and w.allows(snap.pool.provider.value, snap.pool.region)
            for w in workloads.workloads
        ):
            continue
        key = snap.pool.key
        price = snap.planning_spot_usd_per_hour  # regime + volatility margin, as the cost table
        spot = np.full(hours, np.nan if price is None else price)
        if spot_prices is not None and key in spot_prices:
            spot = np.asarray(spot_prices[key][:hours], dtype=float)
        cap = np.full(hours, _capacity(snap, options.spot_units_at_score_10))
        if spot_capacity_instances is not None and key in spot_capacity_instances:
            cap = np.asarray(spot_capacity_instances[key][:hours], dtype=float)
        if not options.allow_spot:
            cap = np.zeros(hours)
        series.append(PoolSeries(snap, spot, cap))
    if not series:
        raise InputError(
            "market",
            None,
            "at least one pool offering an instance type some workload accepts "
            f"({', '.join(sorted(wanted))}) where its providers and regions allow",
        )
    demand = {k: np.asarray(v[:hours], dtype=float) for k, v in serving_demand.items()}
    if costs is None:
        costs = CostTable.compute(snapshot, workloads, options.cost_options)
    else:
        costs.check(snapshot, workloads, options.cost_options)
    check_allow_lists(costs)  # a workload its providers/regions leave no pool: exit 2
    return PlanningProblem(
        start=snapshot.at,
        hours=hours,
        workloads=workloads,
        pools=tuple(series),
        serving_demand=demand,
        costs=costs,
        options=options,
        remaining_unit_hours={} if remaining_unit_hours is None else remaining_unit_hours,
        deadline_hour={} if deadline_hour is None else deadline_hour,
        release_hour={} if release_hour is None else release_hour,
        committed_fixed=committed_fixed,
        previous_instances={} if previous_instances is None else previous_instances,
        milestones={} if milestones is None else milestones,
        due_unit_hours={} if due_unit_hours is None else due_unit_hours,
        ahead_usd_per_unit_hour={} if ahead_usd_per_unit_hour is None else ahead_usd_per_unit_hour,
        spent_usd={} if spent_usd is None else spent_usd,
        owned=owned,
        quotas=snapshot.quotas,
        blocks=blocks,
    )
