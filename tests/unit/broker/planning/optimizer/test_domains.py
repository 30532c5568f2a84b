"""Failure domains in the MILP and the fast plan: one zone cap over zones that revoke together."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pytest

from broker.planning.optimizer.fast import fast_plan
from broker.planning.optimizer.problem import PlanOptions, build_problem
from broker.planning.optimizer.solve import solve
from markets.model import (
    FailureDomain,
    Hazard,
    HazardSource,
    InstanceType,
    MarketSnapshot,
    Pool,
    PoolSnapshot,
    Provider,
)
from policies.workloads.spec import parse_workloads

T0 = datetime(2026, 3, 2, tzinfo=UTC)


def _pool(zone: str, spot: float) -> PoolSnapshot:
    inst = InstanceType(
        provider=Provider.AWS, name="g1", family="g", units=1, gpus=1, vcpus=4, memory_gib=16.0
    )
    return PoolSnapshot(
        pool=Pool(provider=Provider.AWS, region="us-east-1", zone=zone, instance_type="g1"),
        instance=inst,
        on_demand_usd_per_hour=1.0,
        spot_usd_per_hour=spot,
        placement_score=10,
        hazard=Hazard(rate_per_hour=0.0, source=HazardSource.ASSUMED),
        observed_at=T0,
    )


def _zone_units(
    domains: tuple[FailureDomain, ...], planner: str = "milp"
) -> tuple[pd.Series, list[str]]:
    ws = parse_workloads(
        {
            "workloads": [
                {
                    "name": "api",
                    "class": "serving",
                    "instance_types": ["g1"],
                    "max_spot_share": 1.0,
                    "max_zone_share": 0.5,
                    "max_pool_share": 1.0,
                }
            ]
        },
        demand_supplied=True,
    )
    snap = MarketSnapshot(
        at=T0,
        pools=(_pool("us-east-1a", 0.2), _pool("us-east-1b", 0.25), _pool("us-east-1c", 0.3)),
        source="test",
        failure_domains=domains,
    )
    opts = PlanOptions(integral=True, churn_usd_per_unit=0.0, time_limit_s=120.0)
    problem = build_problem(snap, ws, {"api": np.full(2, 8.0)}, hours=2, options=opts)
    plan = solve(problem) if planner == "milp" else fast_plan(problem)
    spot = plan.allocations[plan.allocations.tier == "spot"]
    zone = spot.pool_key.str.split("/").str[2]
    units = spot.groupby(zone).units.sum() / 2  # per hour, two hours
    e = plan.explanations.get("api")
    return units, [] if e is None else list(e.lines())


def test_zones_on_their_own_fill_the_two_cheapest_up_to_the_zone_cap() -> None:
    units, _ = _zone_units(())
    assert units.get("us-east-1a", 0.0) == pytest.approx(4.0)
    assert units.get("us-east-1b", 0.0) == pytest.approx(4.0)
    assert units.get("us-east-1c", 0.0) == pytest.approx(0.0)


@pytest.mark.parametrize("planner", ["milp", "fast"])
def test_a_failure_domain_of_two_zones_takes_at_most_one_zone_share(planner: str) -> None:
    ab = FailureDomain(
        name="aws/us-east-1a",
        zones=("aws/us-east-1a", "aws/us-east-1b"),
        co_share=0.4,
        baseline=0.05,
        events=20,
        window_s=600.0,
    )
    units, _ = _zone_units((ab,), planner)
    # a and b together at most half of the 8 units: the dearer, independent c
    # takes the other half; a, the cheapest, fills the domain's half.
    assert units.get("us-east-1a", 0.0) + units.get("us-east-1b", 0.0) == pytest.approx(4.0)
    assert units.get("us-east-1a", 0.0) == pytest.approx(4.0)
    assert units.get("us-east-1c", 0.0) == pytest.approx(4.0)


def test_a_domain_of_one_zone_in_play_adds_nothing() -> None:
    lone = FailureDomain(
        name="aws/us-east-1a",
        zones=("aws/us-east-1a", "aws/us-west-2a"),
        co_share=0.4,
        baseline=0.05,
        events=20,
        window_s=600.0,
    )
    units, _ = _zone_units((lone,))
    assert units.get("us-east-1b", 0.0) == pytest.approx(4.0)
    assert units.get("us-east-1a", 0.0) == pytest.approx(4.0)


@pytest.mark.parametrize("planner", ["milp", "fast"])
def test_a_domain_holding_every_zone_in_play_does_not_forbid_spot(planner: str) -> None:
    """The daemon's own record put all three zones of its one region in one
    domain: its cap (a share of the spot held) would have taken all spot away,
    the whole fleet to on-demand (the month-long trace simulation lost 3/4 of
    its spot this way). Nothing is outside the domain to spread to, so the
    zone caps stand alone."""
    abc = FailureDomain(
        name="aws/us-east-1a",
        zones=("aws/us-east-1a", "aws/us-east-1b", "aws/us-east-1c"),
        co_share=0.4,
        baseline=0.05,
        events=20,
        window_s=600.0,
    )
    units, _ = _zone_units((abc,), planner)
    assert units.sum() == pytest.approx(8.0)
    assert units.get("us-east-1a", 0.0) == pytest.approx(4.0)
    assert units.get("us-east-1b", 0.0) == pytest.approx(4.0)
