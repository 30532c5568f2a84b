"""Billing a plan against what happened (``broker.whatif.billing``)."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from broker.planning.optimizer.problem import PlanOptions, build_problem
from broker.planning.optimizer.solve import solve
from broker.planning.plan import Plan
from broker.whatif.billing import MarketActuals, bill_plan
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
from policies.workloads.spec import WorkloadSet, parse_workloads

T0 = datetime(2026, 3, 2, tzinfo=UTC)
KEY = "aws/us-east-1/us-east-1a/g1"


def _snapshot(share: float) -> MarketSnapshot:
    inst = InstanceType(provider=Provider.AWS, name="g1", family="g", units=1, gpus=1,
                        vcpus=4, memory_gib=16.0)  # fmt: skip
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
    ws = parse_workloads({"workloads": [
        {"name": "sweeps", "class": "batch", "instance_types": ["g1"], "unit_hours": 48,
         "deadline_hours": 24, "max_units": 100, "max_zone_share": 1.0, "max_pool_share": 1.0},
    ]})  # fmt: skip
    snap = _snapshot(share)
    opts = PlanOptions(allow_committed=False, spot_units_at_score_10=1000.0)
    plan = solve(build_problem(snap, ws, {}, hours=24, options=opts))
    return plan, ws, snap


@pytest.mark.parametrize("share", [0.5, 0.8, 1.0])
def test_spot_held_as_expected_delivers_the_planned_work(share: float) -> None:
    """The plan's spot work already counts the expected held share: held at
    that share, nothing is missing (it used to be taken off twice)."""
    plan, ws, snap = _batch_plan(share)
    a = plan.hourly_instances()
    spot = a[a["tier"] == "spot"]
    assert len(spot) > 0  # spot is 5x cheaper: the plan uses it
    held = np.full(24, share)
    bill = bill_plan(plan, ws, {}, snap,
                     MarketActuals({KEY: np.full(24, 0.2)}, {KEY: held}),
                     costs=CostTable.compute(snap, ws))  # fmt: skip
    assert bill.catch_up_usd == pytest.approx(0.0, abs=1e-6)
    # paid only while held
    paid = float((spot["instances"] * 0.2).sum()) * share
    assert bill.by_tier_usd["spot"] == pytest.approx(paid)


def test_spot_held_less_than_expected_is_caught_up_on_demand() -> None:
    plan, ws, snap = _batch_plan(0.8)
    a = plan.hourly_instances()
    spot_work = float(a[a["tier"] == "spot"]["work_per_hour"].sum())
    bill = bill_plan(plan, ws, {}, snap,
                     MarketActuals({KEY: np.full(24, 0.2)}, {KEY: np.full(24, 0.4)}),
                     costs=CostTable.compute(snap, ws))  # fmt: skip
    # half the expected share held: half the spot work is missing, at $1/unit-hour
    assert bill.catch_up_unit_hours["sweeps"] == pytest.approx(spot_work / 2)
    assert bill.catch_up_usd == pytest.approx(spot_work / 2 * 1.0)
