"""The cost what-if: Spotfolio's plan beside the rules people use, billed alike.

Owns: ``run_whatif`` and its result types. Steps: take the market snapshot at
the start; split serving demand into history (before the start) and actuals
(the horizon); forecast the horizon from history (hour-of-week profile);
plan every baseline on the forecast; replay the daemon's planning loop for
Spotfolio (``broker.whatif.replay``: every step plans on what was known
then); bill every plan on the actual demand and the actual hourly spot
market (``broker.whatif.billing``: the baselines with an autoscaler's
top-up, Spotfolio's plans through the lifecycle manager's decisions,
``broker.whatif.reaction``); optionally sweep fixed
commitment levels ("raise committed capacity from 40 % to 60 % of peak?").
Under stress (``--interruption-multiplier``, ``--availability-multiplier``)
all of that runs on the stressed market (``broker.whatif.stress``), billed
on it too, and once more on the market as recorded, for the side-by-side.

Effective costs are computed here, once per ``CostOptions`` the run needs
(``CostTable``), and the same table object handed to the optimizer, the
baselines, billing and the sweep. With the default options that is one table;
the optimizer prices with the run's options, while the baselines keep the
rules people use (the listed hazard, the run's commitment term), as before.

Must not: print (the CLI does) or name a concrete market adapter.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
import numpy.typing as npt

from broker.planning.demand import DemandSet
from broker.planning.optimizer.commitments import alternative_usd_per_work_hour, obligation_hours
from broker.planning.optimizer.problem import PlanningProblem, PlanOptions, build_problem
from broker.planning.plan import Commitment, Plan
from broker.scale.pool import map_paced
from broker.whatif.baselines import all_on_demand, committed_quantile, static_mix
from broker.whatif.billing import Bill, MarketActuals, bill_plan, bill_reacted, bill_reaction
from broker.whatif.phases import PhaseClock
from broker.whatif.reaction import Reactor, lifecycle_cost_options
from broker.whatif.replay import replay
from broker.whatif.stress import X1, MarketStress, stressed
from markets.commitments import HOURS_PER_MONTH, OwnedCommitment
from markets.errors import InputError
from markets.keys import PoolKey
from markets.model import MarketSnapshot, Tier
from markets.protocols import HistorySource, PriceSource
from policies.cost_table import CostEntry, CostOptions, CostTable
from policies.reservations import breakeven_occupancy, marginal_occupancy
from policies.workloads.spec import Workload, WorkloadClass, WorkloadSet

__all__ = [
    "HISTORY_DAYS",
    "HORIZON_HOURS",
    "REPLAN_HOURS",
    "Scenario",
    "SweepPoint",
    "WhatIfInputs",
    "WhatIfResult",
    "commitment_dict",
    "owned_dict",
    "owned_use",
    "run_whatif",
    "whole_period_options",
]

FloatArray = npt.NDArray[np.float64]
HISTORY_DAYS = 28  # four weeks of history to learn the hour-of-week profile
# The replayed planning loop: re-plan every 6 h, 24 h ahead (the daemon's
# default horizon). The daemon re-plans hourly; 6-hourly steps keep a 30-day
# replay to ~120 solves, and the uniform-progress milestone keeps each step
# doing its share either way.
REPLAN_HOURS = 6
HORIZON_HOURS = 24


@dataclass(frozen=True)
class Scenario:
    name: str
    plan: Plan
    bill: Bill

    def to_dict(self, on_demand_total: float, workloads: WorkloadSet) -> dict[str, object]:
        by_class: dict[str, float] = {c.value: 0.0 for c in WorkloadClass}
        for w in workloads.workloads:
            by_class[w.workload_class.value] += self.bill.unmet_unit_hours.get(w.name, 0.0)
        saving = 0.0 if on_demand_total <= 0 else 1.0 - self.bill.total_usd / on_demand_total
        return {
            "name": self.name,
            "total_cost_usd": round(self.bill.total_usd, 2),
            "cost_by_tier_usd": {k: round(v, 2) for k, v in self.bill.by_tier_usd.items()},
            "unmet_unit_hours": round(sum(by_class.values()), 3),
            "unmet_unit_hours_by_class": {k: round(v, 3) for k, v in by_class.items()},
            "savings_vs_on_demand": round(saving, 6),
            "expected_revocations": round(self.bill.expected_revocations, 2),
            "break_glass_usd": round(self.bill.break_glass_usd, 2),
            "forecast_error_usd": round(self.bill.forecast_error_usd, 2),
            "catch_up_usd": round(self.bill.catch_up_usd, 2),
            "work_ahead_usd": round(self.bill.work_ahead_usd, 2),
            "budget_exceeded_hours": self.bill.budget_exceeded_hours,
            "committed_instances": self.plan.committed_instances(),
            "commitments": [commitment_dict(c) for c in self.plan.commitments if c.instances],
            "planned_cost_usd": round(self.plan.planned_cost_usd(), 2),
            # the optimizer's proof (None for baselines): objective vs its bound
            "plan_gap": _rounded(self.plan.meta.get("gap"), 6),
            "plan_status": self.plan.status if "gap" in self.plan.meta else None,
            "gap_met": self.plan.meta.get("gap_met") if "gap" in self.plan.meta else None,
            # budgets that left demand unmet: that part of any saving is no saving
            "budget_limited": list(self.budget_limited()),
            **self._reaction(),
        }

    def budget_limited(self) -> tuple[str, ...]:
        """The budgets that left this scenario's demand unmet (none if all was met)."""
        unmet = max(sum(self.bill.unmet_unit_hours.values()), self.plan.unmet_total())
        if unmet <= 1e-6:
            return ()
        out = list(self.plan.budget_limited)
        if self.bill.budget_cut_unit_hours > 1e-6:
            out.append("fleet budget per hour (the top-up on on-demand)")
        out.extend(b for b in self.bill.budget_limits if b not in out)
        return tuple(out)

    def _reaction(self) -> dict[str, object]:
        """What the lifecycle decided, for a scenario billed on its decisions."""
        b = self.bill
        if b.decisions is None:
            return {}
        return {
            "decided_by": b.decided_by,
            "decisions": dict(b.decisions),
            "break_glass_committed_usd": round(b.break_glass_committed_usd or 0.0, 2),
            "refused_launches": b.refused_launches,
        }


def owned_dict(c: OwnedCommitment, at: datetime) -> dict[str, object]:
    """An owned commitment as the what-if's JSON lists it."""
    return {
        "id": c.id,
        "kind": c.kind.value,
        "group": c.group,
        "count": c.count,
        "usd_per_hour": c.usd_per_hour,
        "end": c.end.isoformat(),
        "hours_left": round(c.hours_left(at), 1),
    }


def owned_use(
    plan: Plan,
    problem: PlanningProblem,
    owned: tuple[OwnedCommitment, ...],
    forecast: Mapping[str, FloatArray],
) -> dict[str, dict[str, object]]:
    """Each owned instance commitment in ``plan`` (the plan around what is
    owned): ``utilisation``, the share of its paid instance-hours in the
    horizon the plan ran on committed capacity of its group (owned first,
    several in a group pro rata to their counts); ``coverage``, the share of
    the forecast demand that can use it (instances of its group) it covered;
    and at its expiry in the horizon, what the plan re-decided (it may buy
    the group again or not). A savings plan's use is not split per plan here
    (``None``)."""
    hours = plan.hours
    a = plan.hourly_instances()
    rows = a[a["tier"] == Tier.COMMITTED.value]
    groups = [str(PoolKey.parse(str(k)).group) for k in rows["pool_key"]]
    at = [problem.start + timedelta(hours=h) for h in range(hours)]
    bought = {c.group: c.instances for c in plan.commitments if c.instances > 0}
    out: dict[str, dict[str, object]] = {}
    for c in owned:
        g = c.group
        if g is None or c.count <= 0:
            out[c.id] = {"utilisation": None, "coverage": None, "at_expiry": None}
            continue
        mask = np.asarray([x == g for x in groups], dtype=bool)
        used = np.bincount(rows["hour"].to_numpy(dtype=int)[mask],
                           weights=rows["instances"].to_numpy(dtype=float)[mask],
                           minlength=hours)[:hours]  # fmt: skip
        mine = np.asarray([c.count if c.active_at(t) else 0 for t in at], dtype=float)
        all_owned = np.asarray([sum(o.count for o in owned if o.group == g and o.active_at(t))
                                for t in at], dtype=float)  # fmt: skip
        share = np.divide(mine, all_owned, out=np.zeros(hours), where=all_owned > 0)
        on_mine = np.minimum(used, all_owned) * share
        paid = float(mine.sum())
        eligible = np.zeros(hours)
        for w in problem.workloads.of_class(WorkloadClass.SERVING):
            e = next((e for e in problem.entries(w) if str(e.key.group) == g
                      and e.usd_per_work_hour[Tier.COMMITTED] is not None), None)  # fmt: skip
            if e is not None and w.name in forecast and e.work_per_instance_hour > 0:
                eligible += np.asarray(forecast[w.name], dtype=float)[:hours] / (
                    e.work_per_instance_hour
                )
        end_h = (c.end - problem.start).total_seconds() / 3600.0
        expiry: str | None = None
        if 0 <= end_h < hours:
            n = bought.get(g, 0)
            then = f"the plan buys {n} of {g}" if n else "the plan buys none (on-demand, spot)"
            expiry = f"expires {c.end.isoformat()} (hour {end_h:.0f}); re-decided: {then}"
        out[c.id] = {
            "utilisation": round(float(on_mine.sum()) / paid, 6) if paid > 0 else None,
            "coverage": round(float(on_mine.sum()) / float(eligible.sum()), 6)
            if eligible.sum() > 0
            else None,
            "at_expiry": expiry,
        }
    return out


def commitment_dict(c: Commitment) -> dict[str, object]:
    """A commitment with its term figures (``Commitment``'s docs)."""
    return {
        "group": c.group,
        "kind": "savings_plan" if c.is_savings_plan else "instances",
        "instances": c.instances,
        "usd_per_hour": round(c.usd_per_hour, 6),
        "term_years": c.term_years,
        "payment": c.payment,
        "usd_per_instance_hour": round(c.usd_per_instance_hour, 6),
        "obligation_usd": _rounded(c.obligation_usd, 2),
        "monthly_saving_usd": _rounded(c.monthly_saving_usd, 2),
        "utilisation": _rounded(c.utilisation, 6),
        "breakeven_utilisation": _rounded(c.breakeven_utilisation, 6),
    }


def _rounded(x: object, digits: int) -> float | None:
    return None if not isinstance(x, int | float) else round(float(x), digits)


@dataclass(frozen=True)
class SweepPoint:
    """One committed level, billed. ``delta_usd``: its total less the previous
    level's (``None`` for the first); the verdict is read from the totals,
    never from occupancy alone (``pays``). ``obligation_usd``: the level's
    commitment over its whole term."""

    share_of_peak: float
    committed_units: float
    group: str
    instances: int
    scenario: Scenario
    marginal_occupancy: float | None  # occupancy of the units added since the previous level
    delta_usd: float | None = None
    obligation_usd: float = 0.0

    @property
    def pays(self) -> bool | None:
        """Whether moving here from the previous level lowers the billed total."""
        return None if self.delta_usd is None else self.delta_usd < 0

    def monthly_delta_usd(self, hours: int) -> float | None:
        """``delta_usd`` per average month (730 h) of the billed horizon."""
        return None if self.delta_usd is None else self.delta_usd * HOURS_PER_MONTH / hours


@dataclass(frozen=True)
class WhatIfInputs:
    """What a run planned and billed on, kept for the advice and the risk band
    (``broker.whatif.advice``, ``broker.whatif.risk``): the snapshot, the
    market's actual hours, the demand (its history and forecast), the actual
    serving demand billed, the cost tables the bills and the lifecycle read,
    and the whole-period plan (whose commitments the loop holds)."""

    snapshot: MarketSnapshot
    workloads: WorkloadSet
    demand: DemandSet
    actual_demand: Mapping[str, FloatArray]
    forecast: Mapping[str, FloatArray]
    actuals: MarketActuals
    costs: CostTable
    lifecycle_costs: CostTable
    period_plan: Plan


@dataclass
class WhatIfResult:
    start: datetime
    hours: int
    market: str
    stale: bool
    scenarios: list[Scenario]
    sweep: list[SweepPoint] = field(default_factory=list)
    # A committed unit's break-even occupancy against the best alternative
    # (the spot/on-demand mix the workload would run), and against on-demand
    # alone (the textbook figure, above it where spot is cheaper).
    breakeven_occupancy: float | None = None
    breakeven_occupancy_on_demand: float | None = None
    # With owned commitments: what they are, and what the optimizer buys on
    # top of them over the period (the "what to buy next" answer).
    owned: tuple[OwnedCommitment, ...] = ()
    next_buy: tuple[Commitment, ...] = ()
    # Per owned commitment id: its use in the plan around it (``owned_use``).
    owned_use: dict[str, dict[str, object]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    # CPU, wall and peak memory per phase (``--timings``, the bench's machinery)
    timings: PhaseClock = field(default_factory=PhaseClock)
    # Under stress (``broker.whatif.stress``): the stress, and the same what-if
    # on the market as recorded, shown beside it.
    stress: MarketStress = X1
    unstressed: WhatIfResult | None = None
    inputs: WhatIfInputs | None = None

    def scenario(self, name: str) -> Scenario:
        return next(s for s in self.scenarios if s.name == name)


def _actuals(
    market: PriceSource, snapshot: MarketSnapshot, start: datetime, hours: int
) -> MarketActuals:
    if not isinstance(market, HistorySource):  # a live market: no actuals to bill on
        return MarketActuals({}, {})
    # A recorded market knows nothing past its span: bill the rest at the
    # planned prices, spot held (the best one can say without data).
    first, last = market.span()
    if start < first:
        return MarketActuals({}, {})
    hours = min(hours, int((last - start).total_seconds() // 3600))
    if hours <= 0:
        return MarketActuals({}, {})
    frame = market.hourly(start, hours)
    if frame.empty:
        return MarketActuals({}, {})
    t0 = frame["hour"].min()
    idx = ((frame["hour"] - t0).dt.total_seconds() // 3600).to_numpy(dtype=int)
    prices: dict[str, FloatArray] = {}
    held: dict[str, FloatArray] = {}
    hours = max(hours, int(idx.max(initial=0)) + 1)
    keys = frame["pool_key"].to_numpy()
    sp = frame["spot_usd_per_hour"].to_numpy(dtype=float)
    av = frame["spot_available"].to_numpy(dtype=float)
    order = np.argsort(keys, kind="stable")
    keys_sorted = keys[order]
    bounds = np.flatnonzero(np.r_[True, keys_sorted[1:] != keys_sorted[:-1], True])
    for a, b in itertools.pairwise(bounds):
        rows = order[a:b]
        p = np.full(hours, np.nan)
        h = np.full(hours, np.nan)
        ok = idx[rows] < hours
        p[idx[rows][ok]] = sp[rows][ok]
        h[idx[rows][ok]] = av[rows][ok]
        prices[str(keys_sorted[a])] = p
        held[str(keys_sorted[a])] = h
    return MarketActuals(prices, held)


def whole_period_options(hours: int) -> PlanOptions:
    """The whole-period plan's options, the plan whose commitments the
    replayed loop holds: adaptive periods beyond a week (hourly below).
    A period plans serving at its peak hour, so a period longer than the
    demand's steps counts a peak over hours it does not fill: on the 30-day
    portfolio bench, 6-hour periods bought 43 commitments where hourly
    resolution (and the hindsight) buys 29."""
    return PlanOptions(period_hours=0 if hours > 24 * 7 else 1)


def run_whatif(
    market: PriceSource,
    workloads: WorkloadSet,
    *,
    start: datetime | None = None,
    days: int = 30,
    demand: DemandSet | None = None,
    options: PlanOptions | None = None,
    committed_levels: tuple[float, ...] = (),
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    replan_hours: int = REPLAN_HOURS,
    horizon_hours: int = HORIZON_HOURS,
    availability_multiplier: float = 1.0,
    owned: tuple[OwnedCommitment, ...] = (),
    workers: int | None = None,
    clock: PhaseClock | None = None,
) -> WhatIfResult:
    """Plan and bill every scenario over ``days`` from ``start``. The
    ``spotfolio`` scenario is the daemon's planning loop replayed
    (``broker.whatif.replay``: re-planned every ``replan_hours``,
    ``horizon_hours`` ahead, on what was known at each step) with the
    commitments the whole-period plan buys; that plan stays the sweep's
    reference. ``owned``: commitments already bought; the whole-period plan
    is solved once more around them and ``next_buy`` says what it buys on top
    (the scenarios stay those of a fleet owning nothing, billed alike).
    ``workers``: processes for the committed sweep's levels
    (``broker.scale.pool.map_paced``; ``None``: the machine's cores).

    Stress: ``options.interruption_multiplier`` and ``availability_multiplier``
    make a stressed market (``broker.whatif.stress``) that every scenario is
    planned on *and billed on*; the same what-if on the market as recorded
    (x1) is run beside it (``WhatIfResult.unstressed``).

    ``clock``: the phases are timed on it (``broker.whatif.phases``; both
    runs of a stressed what-if add to the same phases)."""
    opts = options or whole_period_options(days * 24)
    clock = clock if clock is not None else PhaseClock()
    stress = MarketStress(opts.interruption_multiplier, availability_multiplier)
    if stress.is_x1:
        return _run(market, workloads, start=start, days=days, demand=demand, options=opts,
                    committed_levels=committed_levels, seed=seed, progress=progress,
                    replan_hours=replan_hours, horizon_hours=horizon_hours,
                    owned=owned, workers=workers, clock=clock)  # fmt: skip
    say = progress or (lambda _msg: None)
    # The stressed market carries the hazard: the plan's cost table is not
    # told again (that would count the multiplier twice).
    x1_opts = dataclasses.replace(opts, interruption_multiplier=1.0)
    say("the stressed market")
    result = _run(stressed(market, stress), workloads, start=start, days=days, demand=demand,
                  options=x1_opts, committed_levels=committed_levels, seed=seed,
                  progress=progress, replan_hours=replan_hours,
                  horizon_hours=horizon_hours, owned=owned, workers=workers,
                  clock=clock)  # fmt: skip
    say("the market as recorded (x1)")
    result.unstressed = _run(market, workloads, start=start, days=days, demand=demand,
                             options=x1_opts, seed=seed, progress=progress,
                             replan_hours=replan_hours, horizon_hours=horizon_hours,
                             clock=clock)  # fmt: skip
    result.stress = stress
    return result


def _run(
    market: PriceSource,
    workloads: WorkloadSet,
    *,
    start: datetime | None,
    days: int,
    demand: DemandSet | None,
    options: PlanOptions,
    committed_levels: tuple[float, ...] = (),
    seed: int,
    progress: Callable[[str], None] | None,
    replan_hours: int,
    horizon_hours: int,
    owned: tuple[OwnedCommitment, ...] = (),
    workers: int | None = None,
    clock: PhaseClock,
) -> WhatIfResult:
    """One what-if on ``market`` as given (``run_whatif``)."""
    from broker.planning.optimizer.solve import solve  # PuLP only when planning

    say = progress or (lambda _msg: None)
    seconds: dict[str, float] = {}
    t = time.perf_counter()
    with clock.phase("market"):
        snapshot = market.snapshot(start)
        # Plans run on whole hours; a recorded market's latest time rarely is one.
        start = snapshot.at.replace(minute=0, second=0, microsecond=0)
        hours = days * 24
        actuals = _actuals(market, snapshot, start, hours)
    with clock.phase("forecast"):
        if demand is None:
            history_start = start - timedelta(days=HISTORY_DAYS)
            demand = DemandSet.from_shapes(
                workloads, history_start, HISTORY_DAYS * 24 + hours, seed
            )
        actual = _actual_demand(demand, workloads, start, hours)
        forecast = {
            n: f.point.to_numpy(dtype=float) for n, f in demand.forecast(start, hours).items()
        }
        for n, arr in actual.items():  # no history at all: plan on the actuals
            if n not in forecast or not np.all(np.isfinite(forecast[n])):
                forecast[n] = arr
    seconds["inputs_s"] = time.perf_counter() - t

    opts = options
    say("planning with the optimizer")
    t = time.perf_counter()
    with clock.phase("commitments plan"):
        tables = _CostTables(snapshot, workloads)
        costs = tables.get(opts.cost_options)
        problem = build_problem(
            snapshot, workloads, forecast, hours=hours, options=opts, costs=costs
        )
        plan = solve(problem)
    seconds["optimizer_s"] = time.perf_counter() - t

    say("replaying the daemon's planning loop")
    t = time.perf_counter()
    step_opts = dataclasses.replace(opts, period_hours=1)
    with clock.phase("replay planning"):
        # Each step's lost spot goes through the lifecycle manager as the step
        # is taken (the daemon's plan job and manager), and the loop carries
        # what its decisions did; the manager's time is the "reaction" phase.
        lifecycle_costs = tables.get(lifecycle_cost_options(snapshot))
        reactor = Reactor(start, workloads, snapshot, actuals, costs=costs,
                          lifecycle_costs=lifecycle_costs, timings=clock)  # fmt: skip
        rolled = replay(
            market,
            workloads,
            demand,
            start,
            hours,
            actuals,
            committed=plan.committed_instances(),
            step_hours=replan_hours,
            horizon_hours=horizon_hours,
            options=step_opts,
            fallback_demand=forecast,
            progress=say,
            first=(snapshot, costs),
            reactor=reactor,
        )
    seconds["replay_s"] = time.perf_counter() - t

    say("billing scenarios")
    t = time.perf_counter()
    with clock.phase("baselines"):
        listed = tables.get(CostOptions())  # the baselines' rules: the hazard as listed
        plans = [
            all_on_demand(snapshot, workloads, forecast, hours, costs=listed),
            committed_quantile(
                snapshot,
                workloads,
                forecast,
                hours,
                costs=tables.get(CostOptions(term_years=opts.term_years)),
            ),
            static_mix(snapshot, workloads, forecast, hours, costs=listed),
        ]
    names = ["on_demand", "committed_quantile", "static_mix"]
    with clock.phase("billing"):
        # The baselines keep their published reaction (an ASG tops up on
        # on-demand); Spotfolio's lost spot goes through the lifecycle manager.
        scenarios = [
            Scenario(n, p, bill_plan(p, workloads, actual, snapshot, actuals, costs=costs))
            for n, p in zip(names, plans, strict=True)
        ]
        ours = bill_reaction(rolled.plan, reactor.result(), workloads, actual, snapshot,
                             actuals, costs=costs)  # fmt: skip
    scenarios.append(Scenario("spotfolio", rolled.plan, ours))
    seconds["baselines_s"] = time.perf_counter() - t
    result = WhatIfResult(start, hours, market.name, snapshot.stale, scenarios, seconds=seconds)
    result.timings = clock
    result.inputs = WhatIfInputs(snapshot, workloads, demand, actual, forecast, actuals, costs,
                                 lifecycle_costs, plan)  # fmt: skip
    if owned:
        say("planning around the commitments owned")
        t = time.perf_counter()
        with clock.phase("owned plan"):
            around = solve(dataclasses.replace(problem, owned=owned))
        result.owned = owned
        result.next_buy = tuple(c for c in around.commitments if c.instances > 0)
        result.owned_use = owned_use(around, problem, owned, forecast)
        seconds["owned_s"] = time.perf_counter() - t
    if committed_levels:
        t = time.perf_counter()
        with clock.phase("committed sweep"):
            _sweep(
                result,
                problem,
                plan,
                workloads,
                actual,
                snapshot,
                actuals,
                forecast,
                committed_levels,
                say,
                workers,
            )
        seconds["sweep_s"] = time.perf_counter() - t
    return result


class _CostTables:
    """One ``CostTable`` per ``CostOptions`` of one run, each computed once."""

    def __init__(self, snapshot: MarketSnapshot, workloads: WorkloadSet) -> None:
        self._snapshot = snapshot
        self._workloads = workloads
        self._tables: dict[CostOptions, CostTable] = {}

    def get(self, options: CostOptions) -> CostTable:
        table = self._tables.get(options)
        if table is None:
            table = CostTable.compute(self._snapshot, self._workloads, options)
            self._tables[options] = table
        return table


def _actual_demand(
    demand: DemandSet, workloads: WorkloadSet, start: datetime, hours: int
) -> dict[str, FloatArray]:
    window = demand.window(start, hours)
    out: dict[str, FloatArray] = {}
    for w in workloads.of_class(WorkloadClass.SERVING):
        s = window.serving.get(w.name)
        arr = np.zeros(hours) if s is None else s.to_numpy(dtype=float)
        if len(arr) < hours or not np.all(np.isfinite(arr)):
            raise InputError(
                demand.source or "demand",
                w.name,
                f"{hours} hourly values from {start.isoformat()}",
                got=len(arr),
            )
        out[w.name] = arr[:hours]
    return out


@dataclass(frozen=True)
class _SweepInputs:
    """What every level of the committed sweep shares."""

    problem: PlanningProblem
    group: str
    workloads: WorkloadSet
    actual: Mapping[str, FloatArray]
    snapshot: MarketSnapshot
    actuals: MarketActuals


def _sweep_level(shared: _SweepInputs, level: tuple[float, int]) -> Scenario:
    """One level: ``n`` instances of the group fixed, the period re-planned
    and billed through the lifecycle's reaction."""
    from broker.planning.optimizer.solve import solve  # PuLP only when planning

    share, n = level
    problem = shared.problem
    fixed = {g: 0 for g in problem.committed_fixed or {}}
    fixed[shared.group] = n
    p = solve(dataclasses.replace(problem, committed_fixed=fixed))
    bill = bill_reacted(p, shared.workloads, shared.actual, shared.snapshot, shared.actuals,
                        costs=problem.costs)  # fmt: skip
    return Scenario(f"committed_{round(share * 100)}pct", p, bill)


def _sweep(
    result: WhatIfResult,
    problem: PlanningProblem,
    plan: Plan,
    workloads: WorkloadSet,
    actual: Mapping[str, FloatArray],
    snapshot: MarketSnapshot,
    actuals: MarketActuals,
    forecast: Mapping[str, FloatArray],
    levels: tuple[float, ...],
    say: Callable[[str], None],
    workers: int | None = None,
) -> None:
    """Fix total commitment at each share of peak serving demand, in the
    group the optimizer liked best (else the serving workload's cheapest).
    Every level re-solves a variant of ``problem`` (its cost table with it);
    the levels are independent, so they may run on ``workers`` processes
    (``broker.scale.pool.map_paced``), the same plans either way."""
    serving = workloads.of_class(WorkloadClass.SERVING)
    if not serving:
        return
    total = np.sum([forecast[w.name] for w in serving], axis=0)
    peak = float(np.max(total))
    group, work_per_instance, c_price, alt_price = _sweep_group(problem, plan, serving[0])
    base_usd, top_usd = alternative_usd_per_work_hour(problem, serving[0])
    sigma = serving[0].max_spot_share
    mix_usd = (1.0 - sigma) * base_usd + sigma * top_usd
    result.breakeven_occupancy = breakeven_occupancy(c_price, mix_usd)
    result.breakeven_occupancy_on_demand = breakeven_occupancy(c_price, alt_price)
    term_h = obligation_hours(problem)
    counts = [math.ceil(share * peak / work_per_instance - 1e-9) for share in levels]
    # A level's instances are occupied only by the demand that can run on
    # them: the serving workloads with a committed price in the group, in
    # the group's instances (the levels themselves stay shares of all serving).
    usable = [w for w in serving if _can_use(problem, w, group)]
    eligible = np.sum([forecast[w.name] for w in usable], axis=0) if usable else np.zeros(1)
    eligible_instances = np.ceil(np.asarray(eligible, dtype=float) / work_per_instance - 1e-9)

    def said(done: int, total_levels: int) -> None:
        if done < total_levels:
            say(f"committed sweep: {levels[done]:.0%} of peak ({done + 1} of {total_levels})")

    said(0, len(levels))
    shared = _SweepInputs(problem, group, workloads, actual, snapshot, actuals)
    scenarios, _used = map_paced(_sweep_level, shared, list(zip(levels, counts, strict=True)),
                                 workers=workers, on_done=said)  # fmt: skip
    prev_units: float | None = None
    prev_n: int | None = None
    prev_total: float | None = None
    for share, n, sc in zip(levels, counts, scenarios, strict=True):
        units = share * peak
        occ = None
        if prev_units is not None and prev_n is not None and n > prev_n:
            occ = marginal_occupancy(eligible_instances, prev_n, n)
        billed = sc.bill.total_usd
        delta = None if prev_total is None else billed - prev_total
        # the plan's own price (paid the way the options say) over the term
        obligation = sc.plan.committed_usd_per_hour() * term_h
        result.sweep.append(SweepPoint(share, units, group, n, sc, occ, delta, obligation))
        prev_units = units
        prev_n = n
        prev_total = billed


def _can_use(problem: PlanningProblem, w: Workload, group: str) -> bool:
    """Whether ``w`` may run on committed capacity of ``group``."""
    return any(
        str(e.key.group) == group and e.usd_per_work_hour[Tier.COMMITTED] is not None
        for e in problem.entries(w)
    )


def _sweep_group(
    problem: PlanningProblem, plan: Plan, w: Workload
) -> tuple[str, float, float, float]:
    """(group, work per instance-hour, committed and on-demand dollars per
    work-hour) of the group the sweep buys."""
    entries = problem.entries(w)
    best = max(plan.commitments, key=lambda c: c.instances, default=None)
    by_group: dict[str, CostEntry] = {}
    for e in entries:
        if e.usd_per_work_hour[Tier.COMMITTED] is not None:
            by_group.setdefault(str(e.key.group), e)
    if best is not None and best.instances > 0 and best.group in by_group:
        e = by_group[best.group]
    else:
        e = min(by_group.values(), key=lambda x: x.usd_per_work_hour[Tier.COMMITTED] or math.inf)
    od = min(x.usd_per_work_hour[Tier.ON_DEMAND] or math.inf for x in entries)
    return (
        str(e.key.group),
        e.work_per_instance_hour,
        e.usd_per_work_hour[Tier.COMMITTED] or 0.0,
        od,
    )
