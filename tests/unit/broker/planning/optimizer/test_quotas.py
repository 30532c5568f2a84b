"""Account quotas that hold: no plan of the MILP or the fast path runs more
than a quota it was given; what a quota refuses moves to the next cheapest
pool (another region, on-demand instead of spot) or is unmet, and the plan
says which quota bound."""

from __future__ import annotations

import numpy as np
import pytest

from broker.planning.optimizer.fast import fast_plan
from broker.planning.optimizer.problem import PlanOptions, build_problem
from broker.planning.optimizer.quotas import exceeded
from broker.planning.optimizer.solve import solve
from broker.planning.plan import Plan
from markets import catalog
from markets.model import (
    Hazard,
    MarketSnapshot,
    Pool,
    PoolSnapshot,
    Provider,
    Quota,
    QuotaUnit,
    Tier,
)
from policies.workloads.spec import parse_workloads
from tests.unit.broker.planning.optimizer.test_solve import T0

INTEGRAL = PlanOptions(integral=True, time_limit_s=120.0, churn_usd_per_unit=0.0)
PLANNERS = [pytest.param(solve, id="milp"), pytest.param(fast_plan, id="fast")]


def _pool(region: str, zone: str, itype: str, od: float, spot: float | None) -> PoolSnapshot:
    provider = Provider.GCP if itype.startswith(("a2", "a3", "g2")) else Provider.AWS
    return PoolSnapshot(
        pool=Pool(provider=provider, region=region, zone=zone, instance_type=itype),
        instance=catalog.instance_type(itype),
        on_demand_usd_per_hour=od,
        spot_usd_per_hour=spot,
        placement_score=10,
        hazard=Hazard(rate_per_hour=0.0),
        observed_at=T0,
    )


def _p(region: str, limit: float, tier: Tier = Tier.ON_DEMAND) -> Quota:
    code = "L-7212CCBC" if tier is Tier.SPOT else "L-417A185B"
    return Quota(
        provider=Provider.AWS,
        region=region,
        group="P",
        tier=tier,
        limit=limit,
        unit=QuotaUnit.VCPUS,
        code=code,
    )


def _serving(spot_share: float = 0.0) -> object:
    return parse_workloads(
        {
            "workloads": [
                {
                    "name": "api",
                    "class": "serving",
                    "instance_types": ["p3.2xlarge"],
                    "max_spot_share": spot_share,
                    "max_zone_share": 1.0,
                    "max_pool_share": 1.0,
                }
            ]
        },
        demand_supplied=True,
    )


def _two_regions(*quotas: Quota, spot: float | None = None) -> MarketSnapshot:
    return MarketSnapshot(
        at=T0,
        source="test",
        quotas=quotas,
        pools=(
            _pool("us-east-1", "us-east-1a", "p3.2xlarge", 3.0, spot),
            _pool("us-west-2", "us-west-2a", "p3.2xlarge", 4.0, None),
        ),
    )


def _on(plan: Plan, tier: str, region: str) -> float:
    a = plan.allocations
    rows = a[(a["tier"] == tier) & a["pool_key"].str.contains(f"/{region}/")]
    return float(rows.groupby("period")["instances"].sum().max()) if len(rows) else 0.0


@pytest.mark.parametrize("planner", PLANNERS)
def test_on_demand_past_a_regional_p_quota_moves_to_the_next_region(planner: object) -> None:
    # 10 x p3.2xlarge (8 vCPUs) wanted; us-east-1 ($3/h) may run 48 P vCPUs:
    # 6 there, 4 in us-west-2 ($4/h): $34/h instead of $30/h without it.
    assert callable(planner)
    problem = build_problem(
        _two_regions(_p("us-east-1", 48)),
        _serving(),  # type: ignore[arg-type]
        {"api": np.full(4, 10.0)},
        hours=4,
        options=INTEGRAL,
    )
    plan = planner(problem)
    assert isinstance(plan, Plan)
    assert exceeded(problem, plan.allocations) == []
    assert _on(plan, "on_demand", "us-east-1") == pytest.approx(6.0)
    assert _on(plan, "on_demand", "us-west-2") == pytest.approx(4.0)
    assert plan.planned_cost_usd() == pytest.approx(4 * 34.0)
    assert plan.unmet_unit_hours["api"] == pytest.approx(0.0, abs=1e-6)
    if planner is solve:
        lines = plan.explanations["api"].binding
        assert "48 of 48 P vCPUs in us-east-1 (quota L-417A185B)" in lines
        assert "bound: 48 of 48 P vCPUs in us-east-1 (quota L-417A185B)" in plan.explain()


def test_without_a_quota_the_same_problem_stays_in_the_cheapest_region() -> None:
    problem = build_problem(
        _two_regions(),
        _serving(),  # type: ignore[arg-type]
        {"api": np.full(4, 10.0)},
        hours=4,
        options=INTEGRAL,
    )
    plan = solve(problem)
    assert _on(plan, "on_demand", "us-east-1") == pytest.approx(10.0)
    assert plan.planned_cost_usd() == pytest.approx(4 * 30.0)


@pytest.mark.parametrize("planner", PLANNERS)
def test_spot_past_its_quota_runs_on_demand(planner: object) -> None:
    # Spot at $1/h in us-east-1; the spot P quota is 16 vCPUs: 2 spot, and
    # the other 8 on us-east-1 on-demand (no on-demand quota given).
    assert callable(planner)
    snap = _two_regions(_p("us-east-1", 16, Tier.SPOT), spot=1.0)
    problem = build_problem(
        snap,
        _serving(spot_share=1.0),  # type: ignore[arg-type]
        {"api": np.full(4, 10.0)},
        hours=4,
        options=INTEGRAL,
    )
    plan = planner(problem)
    assert isinstance(plan, Plan)
    assert exceeded(problem, plan.allocations) == []
    assert _on(plan, "spot", "us-east-1") == pytest.approx(2.0)
    assert _on(plan, "on_demand", "us-east-1") == pytest.approx(8.0)
    assert plan.planned_cost_usd() == pytest.approx(4 * (2 * 1.0 + 8 * 3.0))


@pytest.mark.parametrize("planner", PLANNERS)
def test_demand_no_region_has_quota_for_is_unmet_and_named(planner: object) -> None:
    # 48 P vCPUs in each region: 12 instances at most; 2 of the 14 unmet.
    assert callable(planner)
    snap = _two_regions(_p("us-east-1", 48), _p("us-west-2", 48))
    problem = build_problem(
        snap,
        _serving(),  # type: ignore[arg-type]
        {"api": np.full(4, 14.0)},
        hours=4,
        options=INTEGRAL,
    )
    plan = planner(problem)
    assert isinstance(plan, Plan)
    assert exceeded(problem, plan.allocations) == []
    assert plan.unmet_unit_hours["api"] == pytest.approx(4 * 2.0)
    assert _on(plan, "on_demand", "us-west-2") == pytest.approx(6.0)


@pytest.mark.parametrize("planner", PLANNERS)
def test_a_gcp_global_gpu_quota_caps_every_region_together(planner: object) -> None:
    # a2-highgpu-1g (1 A100) in two regions; each region may run 8 GPUs,
    # the project 12 in all: 12 of the 16 wanted, 8 in the cheaper region.
    assert callable(planner)
    gq = [
        Quota(
            provider=Provider.GCP,
            region=r,
            group="NVIDIA_A100_GPUS",
            tier=Tier.ON_DEMAND,
            limit=8,
            unit=QuotaUnit.GPUS,
        )
        for r in ("us-central1", "europe-west4")
    ]
    gq.append(Quota(provider=Provider.GCP, group="GPUS_ALL_REGIONS", limit=12, unit=QuotaUnit.GPUS))
    snap = MarketSnapshot(
        at=T0,
        source="test",
        quotas=tuple(gq),
        pools=(
            _pool("us-central1", "us-central1-a", "a2-highgpu-1g", 3.0, None),
            _pool("europe-west4", "europe-west4-a", "a2-highgpu-1g", 3.5, None),
        ),
    )
    ws = parse_workloads(
        {
            "workloads": [
                {
                    "name": "api",
                    "class": "serving",
                    "instance_types": ["a2-highgpu-1g"],
                    "max_spot_share": 0.0,
                }
            ]
        },
        demand_supplied=True,
    )
    problem = build_problem(snap, ws, {"api": np.full(2, 16.0)}, hours=2, options=INTEGRAL)
    plan = planner(problem)
    assert isinstance(plan, Plan)
    assert exceeded(problem, plan.allocations) == []
    assert _on(plan, "on_demand", "us-central1") == pytest.approx(8.0)
    assert _on(plan, "on_demand", "europe-west4") == pytest.approx(4.0)
    assert plan.unmet_unit_hours["api"] == pytest.approx(2 * 4.0)
