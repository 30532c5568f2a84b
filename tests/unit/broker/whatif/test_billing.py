"""Billing a plan against what happened (``broker.whatif.billing``)."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from broker.planning.optimizer.problem import PlanOptions, build_problem
from broker.planning.optimizer.solve import solve
from broker.planning.plan import Plan
from broker.whatif.billing import Bill, MarketActuals, bill_plan, bill_reacted
from markets.model import (
    Hazard,
    HazardSource,
    InstanceType,
    MarketSnapshot,
    Pool,
    PoolSnapshot,
    Provider,
    Tier,
)
from policies.cost_table import CostTable
from policies.workloads.spec import WorkloadSet, parse_workloads

T0 = datetime(2026, 3, 2, tzinfo=UTC)
KEY = "aws/us-east-1/us-east-1a/g1"


def _snapshot(share: float) -> MarketSnapshot:
    inst = InstanceType(
        provider=Provider.AWS, name="g1", family="g", units=1, gpus=1, vcpus=4, memory_gib=16.0
    )
    pool = PoolSnapshot(
        pool=Pool(provider=Provider.AWS, region="us-east-1", zone="us-east-1a", instance_type="g1"),
        instance=inst,
        on_demand_usd_per_hour=1.0,
        spot_usd_per_hour=0.2,
        committed_1y_usd_per_hour=None,
        placement_score=None,
        hazard=Hazard(rate_per_hour=0.0, source=HazardSource.ASSUMED),
        available_share=share,
        observed_at=T0,
    )
    return MarketSnapshot(at=T0, pools=(pool,), source="test")


def _batch_plan(share: float) -> tuple[Plan, WorkloadSet, MarketSnapshot]:
    ws = parse_workloads(
        {
            "workloads": [
                {
                    "name": "sweeps",
                    "class": "batch",
                    "instance_types": ["g1"],
                    "unit_hours": 48,
                    "deadline_hours": 24,
                    "max_units": 100,
                    "max_zone_share": 1.0,
                    "max_pool_share": 1.0,
                },
            ]
        }
    )
    snap = _snapshot(share)
    opts = PlanOptions(allow_committed=False, spot_units_at_score_10=1000.0)
    plan = solve(build_problem(snap, ws, {}, hours=24, options=opts))
    return plan, ws, snap


@pytest.mark.parametrize("share", [0.5, 0.8, 1.0])
def test_spot_held_part_of_each_hour_works_and_is_paid_that_part(share: float) -> None:
    """A plan's spot work is what a held instance does (the pool's expected
    share does not scale it): held ``share`` of each hour, spot does and is
    paid ``share`` of it, and the rest is caught up on on-demand."""
    plan, ws, snap = _batch_plan(share)
    a = plan.hourly_instances()
    spot = a[a["tier"] == "spot"]
    assert len(spot) > 0  # spot is 5x cheaper: the plan uses it
    spot_work = float(spot["work_per_hour"].sum())
    bill = bill_plan(
        plan,
        ws,
        {},
        snap,
        MarketActuals({KEY: np.full(24, 0.2)}, {KEY: np.full(24, share)}),
        costs=CostTable.compute(snap, ws),
    )
    missing = bill.catch_up_unit_hours.get("sweeps", 0.0)
    assert missing == pytest.approx(spot_work * (1 - share), abs=1e-6)
    paid = float((spot["instances"] * 0.2).sum()) * share
    assert bill.by_tier_usd["spot"] == pytest.approx(paid)
    assert bill.catch_up_usd == pytest.approx(missing * 1.0)  # at $1/unit-hour on-demand


def test_work_ahead_of_the_period_share_is_carried_at_what_it_cost() -> None:
    bill = Bill()
    bill.add(Tier.SPOT, "job", 30.0)
    bill.add(Tier.ON_DEMAND, "job", 10.0)
    bill.add(Tier.COMMITTED, "job", 50.0)  # paid every hour either way: never carried
    bill.carry_ahead("job", done=40.0, required=30.0)
    assert bill.work_ahead_unit_hours == {"job": 10.0}
    assert bill.work_ahead_usd == pytest.approx(40.0 * 10.0 / 40.0)
    assert bill.total_usd == pytest.approx(90.0 - 10.0)
    assert bill.by_workload_usd["job"] == pytest.approx(80.0)
    behind = Bill()
    behind.add(Tier.SPOT, "job", 30.0)
    behind.carry_ahead("job", done=20.0, required=30.0)  # behind: the catch-up's business
    assert behind.work_ahead_usd == 0.0 and behind.total_usd == 30.0


@pytest.mark.parametrize("reacted", [False, True])
def test_a_budgeted_deadline_job_is_never_caught_up_past_its_budget(reacted: bool) -> None:
    """Spot held nothing: the 48 unit-hours left at the deadline would cost
    $48 on on-demand; the workload's $10 budget buys $10 of them, the rest is
    unmet and the budget is named."""
    ws = parse_workloads(
        {
            "workloads": [
                {
                    "name": "sweeps",
                    "class": "batch",
                    "instance_types": ["g1"],
                    "unit_hours": 48,
                    "deadline_hours": 24,
                    "max_units": 100,
                    "max_zone_share": 1.0,
                    "max_pool_share": 1.0,
                    "budget_usd": 10,
                },
            ]
        }
    )
    snap = _snapshot(1.0)
    opts = PlanOptions(allow_committed=False, spot_units_at_score_10=1000.0)
    plan = solve(build_problem(snap, ws, {}, hours=24, options=opts))
    assert plan.unmet_total() == pytest.approx(0.0, abs=1e-6)  # spot fits the budget
    actuals = MarketActuals({KEY: np.full(24, 0.2)}, {KEY: np.zeros(24)})
    costs = CostTable.compute(snap, ws)
    if reacted:
        bill = bill_reacted(plan, ws, {}, snap, actuals, costs=costs)
    else:
        bill = bill_plan(plan, ws, {}, snap, actuals, costs=costs)
    spent = bill.by_workload_usd["sweeps"]
    assert spent <= 10.0 + 1e-6
    assert bill.total_usd <= 10.0 + 1e-6
    # whatever was bought, the rest of the 48 unit-hours is unmet
    done = bill.catch_up_unit_hours.get("sweeps", 0.0)
    assert bill.unmet_unit_hours["sweeps"] > 30.0
    assert bill.unmet_unit_hours["sweeps"] + done <= 48.0 + 1e-6
    assert bill.budget_limits == ["sweeps: budget $10.00"]
