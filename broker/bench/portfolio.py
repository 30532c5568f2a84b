"""Portfolio setting of the benchmark (design/benchmarks.md section 3).

Owns: ``run``. Hourly demand for the example fleet over ``days``, real or
default market. Compared, all billed alike on the actual demand and the actual
hourly spot market (``broker.whatif.billing``), all priced from one cost table
of the starting snapshot (each rolling step plans on the snapshot of then,
with its own table): all on-demand; committed at the
quantile rule + on-demand; a static ASG-like mix; Spotfolio's rolling horizon
(plans 24 h ahead on a forecast re-made each step from the history known then
and the market snapshot of then, keeps ``step_hours``, re-plans); and the
hindsight MILP (knows the actual demand, hourly spot prices and the share of
each hour spot could be held).

Must not: assert targets (the report states them beside the figures).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import timedelta

import numpy as np

from broker.planning.demand import DemandSet
from broker.planning.optimizer.problem import (
    FloatArray,
    PlanningProblem,
    PlanOptions,
    _capacity,
    build_problem,
)
from broker.planning.plan import Plan
from broker.planning.rolling import RollingState, rolling_horizon
from broker.whatif.baselines import all_on_demand, committed_quantile, static_mix
from broker.whatif.billing import MarketActuals, bill_plan
from broker.whatif.run import HISTORY_DAYS, _actual_demand, _actuals
from markets.model import MarketSnapshot
from markets.protocols import PriceSource
from policies.cost_table import CostTable
from policies.workloads.spec import WorkloadClass, WorkloadSet, default_workloads

__all__ = ["run"]


def run(
    market: PriceSource,
    *,
    days: int = 7,
    seed: int = 0,
    step_hours: int = 6,
    horizon_hours: int = 24,
    workloads: WorkloadSet | None = None,
) -> dict[str, object]:
    """The setting's report (a JSON object: ``policies``, ``solves``, ``seconds``)."""
    from broker.planning.optimizer.solve import solve  # PuLP only when planning

    ws = workloads or default_workloads()
    t_all = time.perf_counter()
    snapshot = market.snapshot(None)
    start = snapshot.at
    hours = days * 24
    history_start = start - timedelta(days=HISTORY_DAYS)
    demand = DemandSet.from_shapes(ws, history_start, HISTORY_DAYS * 24 + hours + horizon_hours,
                                   seed)  # fmt: skip
    actual = _actual_demand(demand, ws, start, hours)
    actuals = _actuals(market, snapshot, start, hours)
    forecast0 = {n: f.point.to_numpy(dtype=float) for n, f in demand.forecast(start, hours).items()}
    costs = CostTable.compute(snapshot, ws)  # every plan here uses the default cost options

    def window(t: int, state: RollingState) -> PlanningProblem:
        at = start + timedelta(hours=t)
        snap_t = market.snapshot(at)
        fc = {n: f.point.to_numpy(dtype=float)
              for n, f in demand.forecast(at, horizon_hours).items()}  # fmt: skip
        deadlines = {w.name: (w.deadline_hours or 1e9) - t for w in ws.workloads}
        milestones = {
            name: (step_hours, left * step_hours / max(deadlines[name], step_hours))
            for name, left in state.remaining_unit_hours.items()
        }
        return build_problem(
            snap_t, ws, fc, hours=min(horizon_hours, hours - t + horizon_hours),
            options=PlanOptions(period_hours=1), deadline_hour=deadlines,
            remaining_unit_hours=dict(state.remaining_unit_hours),
            committed_fixed=state.committed,
            previous_instances=dict(state.previous_instances),
            milestones=milestones,
        )  # fmt: skip

    # Commitments are a horizon decision: buy what a whole-horizon plan on the
    # forecast buys, then roll the hourly split with them fixed.
    t = time.perf_counter()
    long_plan = solve(build_problem(snapshot, ws, forecast0, hours=hours,
                                    options=PlanOptions(period_hours=6), costs=costs))  # fmt: skip
    initial = RollingState(committed=long_plan.committed_instances())
    rolled = rolling_horizon(window, hours, step_hours=step_hours, initial=initial)
    rolling_s = time.perf_counter() - t

    t = time.perf_counter()
    hindsight = _hindsight(snapshot, ws, actual, actuals, hours, costs)
    hindsight_s = time.perf_counter() - t
    plans = {
        "on_demand": all_on_demand(snapshot, ws, forecast0, hours, costs=costs),
        "committed_quantile": committed_quantile(snapshot, ws, forecast0, hours, costs=costs),
        "static_mix": static_mix(snapshot, ws, forecast0, hours, costs=costs),
        "spotfolio_rolling": rolled.plan,
        "hindsight": hindsight,
    }
    bills = {n: bill_plan(p, ws, actual, snapshot, actuals, costs=costs) for n, p in plans.items()}
    best = bills["hindsight"].total_usd
    serving = [w.name for w in ws.of_class(WorkloadClass.SERVING)]
    return {
        "days": days,
        "step_hours": step_hours,
        "horizon_hours": horizon_hours,
        "policies": {
            n: {
                "total_cost_usd": round(b.total_usd, 2),
                "cost_vs_hindsight": round(b.total_usd / best, 4) if best > 0 else None,
                "unmet_serving_unit_hours": round(
                    sum(b.unmet_unit_hours.get(s, 0.0) for s in serving), 3),
                "break_glass_usd": round(b.break_glass_usd, 2),
                "catch_up_usd": round(b.catch_up_usd, 2),
                "budget_exceeded_hours": b.budget_exceeded_hours,
            }
            for n, b in bills.items()
        },
        "solves": rolled.solves,
        "seconds": {"rolling": round(rolling_s, 2), "hindsight": round(hindsight_s, 2),
                    "total": round(time.perf_counter() - t_all, 2)},
    }  # fmt: skip


def _hindsight(snapshot: MarketSnapshot, ws: WorkloadSet, actual: Mapping[str, FloatArray],
               actuals: MarketActuals, hours: int, costs: CostTable) -> Plan:  # fmt: skip
    """The MILP with perfect knowledge: actual demand, hourly spot prices, and
    spot capacity scaled by the share of each hour it could be held."""
    from broker.planning.optimizer.solve import solve  # PuLP only when planning

    opts = PlanOptions(period_hours=1 if hours <= 24 * 7 else 3)
    prices: dict[str, FloatArray] = {}
    caps: dict[str, FloatArray] = {}
    for p in snapshot.pools:
        key = p.pool.key
        if key in actuals.spot_usd_per_hour:
            prices[key] = np.nan_to_num(actuals.spot_usd_per_hour[key],
                                         nan=p.spot_usd_per_hour or np.nan)  # fmt: skip
        held = actuals.spot_available.get(key)
        base = _capacity(p, opts.spot_units_at_score_10)
        caps[key] = np.full(hours, base) if held is None else base * np.nan_to_num(held, nan=1.0)
    return solve(build_problem(snapshot, ws, actual, hours=hours, options=opts, costs=costs,
                               spot_prices=prices, spot_capacity_instances=caps))  # fmt: skip
