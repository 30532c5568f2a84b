"""The portfolio optimizer: hand-computable instances, the quantile rule,
invariants every plan must satisfy, and infeasibility explained."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.planning.optimizer.problem import PlanningProblem, PlanOptions, build_problem
from broker.planning.optimizer.solve import solve
from broker.planning.plan import Plan
from broker.whatif.baselines import all_on_demand
from markets.errors import InfeasiblePlanError
from markets.model import (
    Hazard,
    HazardSource,
    InstanceType,
    MarketSnapshot,
    Pool,
    PoolSnapshot,
    Provider,
)
from policies.cost_table import CostTable
from policies.reservations import committed_count
from policies.workloads.placement import placements_used
from policies.workloads.spec import WorkloadClass, WorkloadSet, parse_workloads

T0 = datetime(2026, 3, 2, tzinfo=UTC)


def _pool(
    zone: str,
    itype: str = "g1",
    *,
    units: int = 1,
    od: float = 1.0,
    spot: float | None = 0.3,
    committed: float | None = 0.6,
    score: int = 10,
    hazard: float = 0.0,
) -> PoolSnapshot:
    inst = InstanceType(
        provider=Provider.AWS,
        name=itype,
        family="g",
        units=units,
        gpus=units,
        vcpus=4 * units,
        memory_gib=16.0 * units,
    )
    return PoolSnapshot(
        pool=Pool(provider=Provider.AWS, region="us-east-1", zone=zone, instance_type=itype),
        instance=inst,
        on_demand_usd_per_hour=od,
        spot_usd_per_hour=spot,
        committed_1y_usd_per_hour=committed,
        placement_score=score,
        hazard=Hazard(rate_per_hour=hazard, source=HazardSource.ASSUMED),
        observed_at=T0,
    )


def _market(*pools: PoolSnapshot) -> MarketSnapshot:
    return MarketSnapshot(at=T0, pools=pools, source="test")


def _serving(max_spot_share: float = 0.0, **extra: object) -> dict[str, object]:
    return {
        "name": "api",
        "class": "serving",
        "instance_types": ["g1"],
        "max_spot_share": max_spot_share,
        **extra,
    }


def test_constant_demand_is_all_committed_when_committed_is_cheaper() -> None:
    ws = parse_workloads({"workloads": [_serving()]}, demand_supplied=True)
    snap = _market(_pool("us-east-1a"))
    demand = {"api": np.full(24, 10.0)}
    plan = solve(build_problem(snap, ws, demand, hours=24, options=PlanOptions(integral=True)))
    assert plan.committed_instances() == {"aws/us-east-1/g1": 10}
    assert plan.planned_cost_usd() == pytest.approx(10 * 0.6 * 24)
    assert plan.unmet_unit_hours["api"] == pytest.approx(0.0)


@pytest.mark.parametrize(
    "discount",
    [
        pytest.param(0.4, id="40pct-discount"),
        pytest.param(0.25, id="25pct"),
        pytest.param(0.7, id="70pct"),
    ],
)
def test_without_spot_the_commitment_is_the_discount_quantile(discount: float) -> None:
    rng = np.random.default_rng(3)
    demand = rng.integers(2, 20, size=48).astype(float)
    ws = parse_workloads({"workloads": [_serving()]}, demand_supplied=True)
    snap = _market(_pool("us-east-1a", committed=1.0 - discount, spot=None))
    opts = PlanOptions(integral=True, churn_usd_per_unit=0.0, allow_spot=False)
    plan = solve(build_problem(snap, ws, {"api": demand}, hours=48, options=opts))
    rule = committed_count(demand, 1.0 - discount, 1.0)
    got = plan.committed_instances().get("aws/us-east-1/g1", 0)

    def cost(k: int) -> float:
        return k * (1.0 - discount) * 48 + float(np.maximum(demand - k, 0).sum())

    costs = {k: cost(k) for k in range(0, 21)}
    best = min(costs.values())
    optimal = {k for k, c in costs.items() if c == pytest.approx(best)}
    # The rule (the discount-quantile of demand) is optimal, and so is the MILP's
    # answer; where P(D >= k) equals the price ratio exactly, ties are optimal too.
    assert rule in optimal
    assert got in optimal
    assert abs(got - rule) <= 1


def test_spot_above_the_non_revocable_base_and_spread_over_zones() -> None:
    ws = parse_workloads(
        {"workloads": [_serving(max_spot_share=0.5, max_zone_share=0.5, max_pool_share=0.5)]},
        demand_supplied=True,
    )
    snap = _market(
        _pool("us-east-1a", committed=None),
        _pool("us-east-1b", committed=None),
        _pool("us-east-1c", committed=None, spot=0.2),
    )
    demand = {"api": np.full(4, 8.0)}
    opts = PlanOptions(integral=True, churn_usd_per_unit=0.0)
    plan = solve(build_problem(snap, ws, demand, hours=4, options=opts))
    a = plan.allocations
    for _, rows in a.groupby("hour_start"):
        spot = rows[rows.tier == "spot"]
        od = rows[rows.tier == "on_demand"]
        assert od.units.sum() == pytest.approx(4.0)  # 50 % non-revocable base
        assert spot.units.sum() == pytest.approx(4.0)
        # at most half of spot in one zone: the cheap zone c takes exactly half
        zone_c = spot[spot.pool_key.str.contains("us-east-1c")].units.sum()
        assert zone_c == pytest.approx(2.0)
    # cost: 4 OD at $1 + 2 spot at $0.2 + 2 at $0.3, for 4 hours
    assert plan.planned_cost_usd() == pytest.approx(4 * (4 * 1.0 + 2 * 0.2 + 2 * 0.3))


def test_training_gang_uses_allowed_sizes_and_meets_its_work() -> None:
    ws = parse_workloads(
        {
            "workloads": [
                {
                    "name": "train",
                    "class": "training",
                    "instance_types": ["g1"],
                    "elastic": True,
                    "min_units": 2,
                    "step_units": 2,
                    "max_units": 6,
                    "unit_hours": 40,
                    "deadline_hours": 10,
                    "min_on_non_revocable": False,
                    "max_zone_share": 1.0,
                    "max_pool_share": 1.0,
                    "min_dwell_minutes": 0,
                }
            ]
        }
    )
    snap = _market(_pool("us-east-1a", committed=None, spot=None))
    plan = solve(build_problem(snap, ws, {}, hours=12, options=PlanOptions(integral=True)))
    a = plan.allocations
    per_hour = a.groupby("hour_start").units.sum()
    assert set(per_hour.round(6)) <= {2.0, 4.0, 6.0}
    assert per_hour[per_hour.index >= 10].sum() == 0  # nothing after the deadline
    assert (a.work_per_hour * (a.hour_end - a.hour_start)).sum() >= 40 - 1e-6
    assert plan.unmet_unit_hours["train"] == pytest.approx(0.0)


@pytest.mark.parametrize("integral", [True, False])
def test_a_gang_whose_work_is_done_is_not_run(integral: bool) -> None:
    # A re-plan after the job finished: no work left, so no block of the gang
    # may run (the quick rounding forced one block on; the planning loop then
    # ran a finished 16-GPU gang on on-demand for an hour at every re-plan).
    ws = parse_workloads(
        {
            "workloads": [
                {
                    "name": "train",
                    "class": "training",
                    "instance_types": ["g1"],
                    "elastic": True,
                    "min_units": 2,
                    "step_units": 2,
                    "max_units": 6,
                    "unit_hours": 40,
                    "deadline_hours": 100,
                    "max_zone_share": 1.0,
                    "max_pool_share": 1.0,
                }
            ]
        }
    )
    snap = _market(_pool("us-east-1a", committed=None))
    for left in (0.0, 1e-9):
        problem = build_problem(
            snap,
            ws,
            {},
            hours=24,
            remaining_unit_hours={"train": left},
            options=PlanOptions(integral=integral),
        )
        plan = solve(problem)
        assert plan.allocations.empty or plan.allocations.units.sum() == 0
        assert plan.unmet_unit_hours["train"] == pytest.approx(0.0, abs=1e-6)


def test_fixed_commitments_above_the_budget_are_explained() -> None:
    ws = parse_workloads(
        {"budget_usd_per_hour": 5, "workloads": [_serving()]}, demand_supplied=True
    )
    snap = _market(_pool("us-east-1a"))
    problem = build_problem(
        snap, ws, {"api": np.full(4, 2.0)}, hours=4, committed_fixed={"aws/us-east-1/g1": 20}
    )
    with pytest.raises(InfeasiblePlanError) as err:
        solve(problem)
    assert "above the fleet budget" in str(err.value)
    assert err.value.conflicts


@pytest.fixture(scope="module")
def default_plan_inputs() -> tuple[object, ...]:
    from broker.planning.demand import DemandSet
    from markets.default.market import open_default_market
    from policies.workloads.spec import default_workloads

    market = open_default_market()
    snap = market.snapshot(None)
    ws = default_workloads()
    hours = 24
    ds = DemandSet.from_shapes(ws, snap.at, hours, seed=1)
    demand = {k: v.to_numpy() for k, v in ds.serving.items()}
    problem = build_problem(snap, ws, demand, hours=hours)
    return snap, ws, demand, problem, solve(problem)


def _check_invariants(
    problem: PlanningProblem, ws: WorkloadSet, demand: dict[str, Any], plan: Plan
) -> None:
    a = plan.allocations
    assert plan.status in ("optimal", "feasible", "greedy")
    for w in ws.workloads:
        mine = a[a.workload == w.name]
        spot = mine[mine.tier == "spot"]
        zone_caps = w.workload_class is not WorkloadClass.TRAINING or w.placement != "zone"
        for _, rows in spot.groupby("hour_start") if zone_caps else ():
            total = rows.units.sum()
            for _, z in rows.groupby(rows.pool_key.str.split("/").str[2]):
                assert z.units.sum() <= w.max_zone_share * total + 1e-6
        if w.workload_class is WorkloadClass.SERVING:
            for h in range(plan.hours):
                got = mine[(mine.hour_start <= h) & (mine.hour_end > h)]
                supplied = got.work_per_hour.sum() + 1e-6
                assert supplied >= demand[w.name][h] - plan.unmet_unit_hours[w.name]
                nonrev = got[got.tier != "spot"].work_per_hour.sum() + 1e-6
                assert nonrev >= (1 - w.max_spot_share) * demand[w.name][h] - 1e-6
        if w.workload_class is WorkloadClass.TRAINING:
            sizes = {0.0, *map(float, w.gang_sizes())}
            for _, rows in mine.groupby("hour_start"):
                assert round(rows.units.sum(), 6) in sizes
            nonrev_units = mine[mine.tier != "spot"].groupby("hour_start").units.sum()
            assert (nonrev_units >= w.min_units - 1e-6).all()
            # its placement contract: one placement, whole instances
            used = placements_used(w.placement, w.mixed_types, mine.pool_key[mine.instances > 1e-6])
            assert len(used) <= 1, used
            assert (abs(mine.instances - mine.instances.round()) <= 1e-6).all()
    # pool capacity
    caps = {p.key: float(p.spot_capacity_instances.min()) for p in problem.pools}
    spot = a[a.tier == "spot"]
    for (key, _h), rows in spot.groupby(["pool_key", "hour_start"]):
        assert rows.instances.sum() <= caps[key] + 1e-6  # type: ignore[index]


def test_every_plan_meets_the_constraints_it_was_given(
    default_plan_inputs: tuple[Any, ...],
) -> None:
    _snap, ws, demand, problem, plan = default_plan_inputs
    _check_invariants(problem, ws, demand, plan)


def test_fast_path_is_feasible_by_construction_and_near_the_milp(
    default_plan_inputs: tuple[Any, ...],
) -> None:
    import dataclasses

    from broker.planning.optimizer.fast import fast_plan

    _snap, ws, demand, problem, plan = default_plan_inputs
    same = dataclasses.replace(problem, committed_fixed=plan.committed_instances())
    fast = fast_plan(same)
    _check_invariants(same, ws, demand, fast)
    assert all(v <= 1e-6 for v in fast.unmet_unit_hours.values())
    milp = solve(same)
    # Greedy is feasible, not optimal: within a stated bound of the MILP's cost.
    assert fast.planned_cost_usd() <= 1.25 * milp.planned_cost_usd()


def test_plan_never_costs_more_than_the_on_demand_baseline(
    default_plan_inputs: tuple[Any, ...],
) -> None:
    snap, ws, demand, problem, plan = default_plan_inputs
    baseline = all_on_demand(snap, ws, demand, problem.hours, costs=problem.costs)
    assert plan.planned_cost_usd() <= baseline.planned_cost_usd() + 1e-6
    assert plan.explanations["chat-api"].lines()[0] == "chat-api:"


def test_rolling_horizon_keeps_commitments_and_covers_every_hour() -> None:
    from broker.planning.rolling import RollingState, rolling_horizon, slice_problem

    ws = parse_workloads(
        {
            "workloads": [
                _serving(max_spot_share=0.5, max_zone_share=1.0, max_pool_share=1.0),
                {
                    "name": "job",
                    "class": "batch",
                    "instance_types": ["g1"],
                    "unit_hours": 30,
                    "deadline_hours": 12,
                    "max_zone_share": 1.0,
                    "max_pool_share": 1.0,
                },
            ]
        },
        demand_supplied=True,
    )
    snap = _market(_pool("us-east-1a"), _pool("us-east-1b", committed=None))
    demand = np.tile([4.0, 4.0, 8.0, 8.0], 6)
    full = build_problem(snap, ws, {"api": demand}, hours=24, options=PlanOptions(integral=True))
    seen: list[RollingState] = []

    def window(t: int, state: RollingState) -> PlanningProblem:
        seen.append(state)
        return slice_problem(full, t, 8, state)

    result = rolling_horizon(window, 12, step_hours=3)
    assert result.solves == 4
    a = result.plan.allocations
    covered = sorted(
        {h for s, e in zip(a.hour_start, a.hour_end, strict=True) for h in range(s, e) if True}
    )
    assert covered == list(range(12))
    # commitments bought at the first step and fixed afterwards
    assert seen[0].committed is None and seen[1].committed is not None
    assert all(s.committed == seen[1].committed for s in seen[1:])
    assert [s.hour for s in seen] == [0, 3, 6, 9] and [s.generation for s in seen] == [0, 1, 2, 3]
    # the batch job's remaining work only goes down, and it is done by its deadline
    remaining = [s.remaining_unit_hours["job"] for s in seen[1:]]
    assert remaining == sorted(remaining, reverse=True) and remaining[0] < 30.0
    job = a[a.workload == "job"]
    assert (job.work_per_hour * (job.hour_end - job.hour_start)).sum() >= 30 - 1e-6
    # serving demand met every hour
    api = a[a.workload == "api"]
    for h in range(12):
        got = api[(api.hour_start <= h) & (api.hour_end > h)].work_per_hour.sum()
        assert got >= demand[h] - 1e-6


_prices = st.floats(min_value=0.5, max_value=5.0)


@settings(max_examples=15, deadline=None)
@given(
    demand=st.lists(st.integers(min_value=0, max_value=12), min_size=6, max_size=6),
    od=_prices,
    spot_discount=st.floats(min_value=0.5, max_value=0.9),
    commit_discount=st.floats(min_value=0.1, max_value=0.6),
    spot_share=st.sampled_from([0.0, 0.3, 1.0]),
)
def test_plan_never_costs_more_than_a_baseline_meeting_the_same_constraints(
    demand: list[int],
    od: float,
    spot_discount: float,
    commit_discount: float,
    spot_share: float,
) -> None:
    from broker.whatif.baselines import committed_quantile, static_mix

    ws = parse_workloads({"workloads": [_serving(max_spot_share=spot_share)]}, demand_supplied=True)
    pools = [
        _pool(
            f"us-east-1{z}",
            od=od,
            spot=od * (1 - spot_discount),
            committed=od * (1 - commit_discount),
        )
        for z in "abcd"
    ]
    snap = _market(*pools)
    d = {"api": np.asarray(demand, dtype=float)}
    opts = PlanOptions(integral=True, churn_usd_per_unit=0.0)
    costs = CostTable.compute(snap, ws)  # one table: the plan's and the baselines'
    plan = solve(build_problem(snap, ws, d, hours=6, options=opts, costs=costs))
    assert plan.unmet_unit_hours["api"] == pytest.approx(0.0, abs=1e-6)
    baselines = (
        all_on_demand(snap, ws, d, 6, costs=costs),
        committed_quantile(snap, ws, d, 6, costs=costs),
        # The static mix spreads spot over 4 zones at 25 % each, within the caps
        # (zone and pool share 0.5), and keeps the non-revocable base.
        static_mix(snap, ws, d, 6, costs=costs),
    )
    for baseline in baselines:
        # The plan buys whole instances; a baseline meeting the same
        # constraints does too: its fractional counts rounded up.
        assert plan.planned_cost_usd() <= _whole_instances_cost(baseline) + 1e-6


def _whole_instances_cost(plan: Plan) -> float:
    a = plan.allocations
    hours = (a.hour_end - a.hour_start).to_numpy(dtype=float)
    usd = np.ceil(a.instances.to_numpy(dtype=float) - 1e-9) * a.usd_per_instance_hour.to_numpy()
    return float((usd * hours).sum()) + plan.committed_usd_per_hour() * plan.hours


def test_adaptive_periods_cut_where_demand_moves_and_at_deadlines() -> None:
    ws = parse_workloads(
        {
            "workloads": [
                _serving(),
                {
                    "name": "job",
                    "class": "batch",
                    "instance_types": ["g1"],
                    "unit_hours": 10,
                    "deadline_hours": 30,
                },
            ]
        },
        demand_supplied=True,
    )
    snap = _market(_pool("us-east-1a"))
    hod = np.arange(48) % 24
    demand = np.where((hod >= 9) & (hod < 21), 20.0, 10.0) * (1 + 0.01 * (hod % 2))
    problem = build_problem(
        snap,
        ws,
        {"api": demand},
        hours=48,
        options=PlanOptions(period_hours=0, max_period_hours=12),
    )
    bounds = problem.period_bounds
    starts = [s for s, _e in bounds]
    assert starts == [0, 9, 21, 30, 33, 45]  # peaks, the deadline at 30, the 12 h cap
    assert bounds[-1][1] == 48
    # the period's demand is its maximum hour: never under-provisioned
    per = problem.serving_period_demand("api")
    for (s, e), d in zip(bounds, per, strict=True):
        assert d == pytest.approx(demand[s:e].max())


def test_a_workload_no_pool_offers_is_unmet_and_said_so_by_both_planners() -> None:
    from broker.planning.optimizer.fast import fast_plan

    ws = parse_workloads(
        {
            "workloads": [
                _serving(),
                {
                    "name": "sweeps",
                    "class": "batch",
                    "instance_types": ["p9.huge"],
                    "unit_hours": 100,
                    "deadline_hours": 24,
                },
                {"name": "web", "class": "serving", "instance_types": ["g9"]},
            ]
        },
        demand_supplied=True,
    )
    demand = {"api": np.full(24, 2.0), "web": np.full(24, 3.0)}
    problem = build_problem(_market(_pool("us-east-1a")), ws, demand, hours=24)
    for plan in (solve(problem), fast_plan(problem)):
        assert plan.unmet_unit_hours["sweeps"] == pytest.approx(100.0)
        assert plan.unmet_unit_hours["web"] == pytest.approx(72.0)
        assert plan.unmet_unit_hours["api"] == pytest.approx(0.0)
    text = solve(problem).explanations["sweeps"].binding
    assert text == ["sweeps: no pool of the market offers its instance types (p9.huge)"]
