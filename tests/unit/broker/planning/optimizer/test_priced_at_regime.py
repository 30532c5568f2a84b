"""A pool whose spot price jumped is planned at its new regime plus a margin
from its volatility (``markets.price_analytics``), so it stops being chosen
where a steady pool is cheaper at that price; a bill still uses the price in
force."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from broker.planning.optimizer.problem import PlanOptions, build_problem
from broker.planning.optimizer.solve import solve
from markets.model import (
    Hazard,
    HazardSource,
    InstanceType,
    MarketSnapshot,
    Pool,
    PoolSnapshot,
    Provider,
    SpotPriceRisk,
    Tier,
)
from markets.price_analytics import price_risk
from policies.cost_table import CostOptions, CostTable
from policies.workloads.spec import parse_workloads

T0 = datetime(2026, 3, 2, tzinfo=UTC)
AT = int(T0.timestamp()) * 1_000_000_000
HOUR_NS = 3_600_000_000_000


def _risk(*points: tuple[float, float]) -> SpotPriceRisk:
    t = np.array([AT - int(h * HOUR_NS) for h, _ in points], dtype=np.int64)
    risk = price_risk(t, np.array([v for _, v in points]), AT)
    assert risk is not None
    return risk


def _pool(zone: str, spot: float, risk: SpotPriceRisk | None) -> PoolSnapshot:
    return PoolSnapshot(
        pool=Pool(provider=Provider.AWS, region="us-east-1", zone=zone, instance_type="g1"),
        instance=InstanceType(
            provider=Provider.AWS, name="g1", family="g", units=1, gpus=1, vcpus=4, memory_gib=16.0
        ),
        on_demand_usd_per_hour=1.0,
        spot_usd_per_hour=spot,
        placement_score=10,
        hazard=Hazard(rate_per_hour=0.0, source=HazardSource.ASSUMED),
        observed_at=T0,
        spot_risk=risk,
    )


def _market(with_risk: bool) -> MarketSnapshot:
    # a: 0.20 for weeks, +40 % to 0.28 three days ago; b: 0.30 all along
    jumped = _risk((1000.0, 0.20), (72.0, 0.28))
    steady = _risk((1000.0, 0.30))
    pools = (
        _pool("us-east-1a", 0.28, jumped if with_risk else None),
        _pool("us-east-1b", 0.30, steady if with_risk else None),
    )
    return MarketSnapshot(at=T0, pools=pools, source="test")


WORKLOADS = parse_workloads(
    {
        "workloads": [
            {
                "name": "api",
                "class": "serving",
                "instance_types": ["g1"],
                "max_spot_share": 0.5,
                "max_zone_share": 1.0,
                "max_pool_share": 1.0,
            }
        ]
    },
    demand_supplied=True,
)


def _spot_pools(snap: MarketSnapshot) -> set[str]:
    opts = PlanOptions(integral=True, churn_usd_per_unit=0.0, time_limit_s=60)
    plan = solve(build_problem(snap, WORKLOADS, {"api": np.full(4, 8.0)}, hours=4, options=opts))
    spot = plan.allocations[plan.allocations.tier == "spot"]
    assert spot.units.sum() == pytest.approx(4 * 4.0)  # half of 8, every hour
    return set(spot.pool_key)


def test_a_pool_whose_price_jumped_is_no_longer_chosen() -> None:
    assert _spot_pools(_market(with_risk=False)) == {"aws/us-east-1/us-east-1a/g1"}
    # at its new regime, 0.28, plus one weekly sd (ln 1.4 jump: 16.8 %): 0.331 > 0.30
    assert _spot_pools(_market(with_risk=True)) == {"aws/us-east-1/us-east-1b/g1"}


def test_the_cost_table_ranks_at_the_planning_price_and_the_listed_price_stays() -> None:
    snap = _market(with_risk=True)
    table = CostTable.compute(snap, WORKLOADS, CostOptions())
    best = table.cheapest("api", Tier.SPOT)
    assert best is not None and best.pool_key == "aws/us-east-1/us-east-1b/g1"
    jumped = table.pool("aws/us-east-1/us-east-1a/g1")
    assert jumped.spot_usd_per_hour == 0.28  # what a bill uses
    assert jumped.planning_spot_usd_per_hour == pytest.approx(0.28 * np.exp(0.168), abs=1e-3)
    steady = table.pool("aws/us-east-1/us-east-1b/g1")
    assert steady.spot_usd_per_hour == 0.30
    assert steady.planning_spot_usd_per_hour == pytest.approx(0.30)  # no move, no margin
