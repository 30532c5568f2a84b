"""Out of capacity, the placement rule follows the workload's order: the
refused type elsewhere, then its other types by preference (not by cost),
then larger types of the same family when the workload allows upgrades."""

from __future__ import annotations

from typing import Any

import pytest

from broker.lifecycle import LifecycleConfig, LifecycleManager
from broker.lifecycle.fallback import is_upgrade
from markets.catalog import instance_type
from markets.clock import ManualClock
from markets.model import Hazard, HazardSource, MarketSnapshot, Pool, PoolSnapshot, Tier
from policies.workloads.spec import WorkloadSet, parse_workloads
from tests.fakes.tiny_market import T0, pool_key


def _pool(itype: str, zone: str, spot: float, od: float) -> PoolSnapshot:
    key = pool_key(zone, itype)
    return PoolSnapshot(
        pool=Pool.from_key(key),
        instance=instance_type(itype),
        on_demand_usd_per_hour=od,
        spot_usd_per_hour=spot,
        hazard=Hazard(rate_per_hour=0.01, source=HazardSource.OBSERVED),
        observed_at=T0,
    )


def _market() -> MarketSnapshot:
    # g4dn is the cheapest per unit of work; g6 the second choice of the list.
    return MarketSnapshot(
        at=T0,
        pools=(
            _pool("g5.xlarge", "a", 0.40, 1.01),
            _pool("g6.xlarge", "a", 0.35, 0.80),
            _pool("g4dn.xlarge", "a", 0.10, 0.53),
            _pool("g5.2xlarge", "a", 0.50, 1.21),
            _pool("g5.12xlarge", "a", 2.00, 5.67),
        ),
    )


def _sweeps(types: list[str], **extra: Any) -> WorkloadSet:
    return parse_workloads(
        {
            "workloads": [
                {
                    "name": "sweeps",
                    "class": "batch",
                    "instance_types": types,
                    "unit_hours": 100,
                    **extra,
                }
            ]
        }
    )


def _manager(ws: WorkloadSet) -> LifecycleManager:
    m = LifecycleManager(ws, ManualClock(T0), LifecycleConfig(horizon_start=T0))
    m.on_market(_market())
    return m


G5, G6, G4DN = (pool_key("a", t) for t in ("g5.xlarge", "g6.xlarge", "g4dn.xlarge"))
G5_2X = pool_key("a", "g5.2xlarge")


def test_out_of_capacity_tries_the_next_preferred_type_not_the_cheapest() -> None:
    m = _manager(_sweeps(["g5.xlarge", "g6.xlarge", "g4dn.xlarge"]))
    m.record_launch_failure(G5)
    assert m.instead("sweeps", G5, Tier.SPOT, 1, {G5}) == (G6, 1)
    assert m.instead("sweeps", G5, Tier.SPOT, 1, {G5, G6}) == (G4DN, 1)


def test_after_every_listed_type_a_larger_type_of_the_family_when_allowed() -> None:
    listed = ["g5.xlarge", "g6.xlarge"]
    strict = _manager(_sweeps(listed))
    assert strict.instead("sweeps", G5, Tier.SPOT, 1, {G5, G6}) is None
    m = _manager(_sweeps(listed, allow_upgrade=True))
    # g5.2xlarge: the same A10G, twice the vCPUs and memory; g5.12xlarge has 4 GPUs.
    assert m.instead("sweeps", G5, Tier.SPOT, 1, {G5, G6}) == (G5_2X, 1)
    assert m.instead("sweeps", G5, Tier.ON_DEMAND, 2, {G5, G6}) == (G5_2X, 2)
    assert m.instead("sweeps", G5, Tier.SPOT, 1, {G5, G6, G5_2X}) is None


@pytest.mark.parametrize(
    ("small", "big", "upgrade"),
    [
        pytest.param("p4d.24xlarge", "p4de.24xlarge", True, id="p4d-to-p4de-more-gpu-memory"),
        pytest.param("g5.xlarge", "g5.2xlarge", True, id="g5-more-vcpus"),
        pytest.param("a2-highgpu-1g", "a2-ultragpu-1g", True, id="a2-40gb-to-80gb"),
        pytest.param("g5.2xlarge", "g5.xlarge", False, id="smaller-is-no-upgrade"),
        pytest.param("g5.xlarge", "g5.12xlarge", False, id="more-gpus-changes-the-units"),
        pytest.param("p4d.24xlarge", "p5.48xlarge", False, id="another-chip"),
    ],
)
def test_is_upgrade(small: str, big: str, upgrade: bool) -> None:
    assert is_upgrade(instance_type(small), instance_type(big)) is upgrade


def test_replacements_and_upgrades_stay_inside_the_workloads_allow_lists() -> None:
    west = "aws/us-west-2/us-west-2a/"

    def in_west(itype: str, spot: float, od: float) -> PoolSnapshot:
        return PoolSnapshot(
            pool=Pool.from_key(west + itype),
            instance=instance_type(itype),
            on_demand_usd_per_hour=od,
            spot_usd_per_hour=spot,
            hazard=Hazard(rate_per_hour=0.01, source=HazardSource.OBSERVED),
            observed_at=T0,
        )

    # us-west-2 is cheaper for the listed type and for its upgrade
    market = MarketSnapshot(
        at=T0,
        pools=(
            *_market().pools,
            in_west("g5.xlarge", 0.05, 0.50),
            in_west("g5.2xlarge", 0.06, 0.60),
        ),
    )
    free = LifecycleManager(
        _sweeps(["g5.xlarge"], allow_upgrade=True),
        ManualClock(T0),
        LifecycleConfig(horizon_start=T0),
    )
    free.on_market(market)
    assert free.instead("sweeps", G5, Tier.SPOT, 1, {G5}) == (west + "g5.xlarge", 1)
    assert free.instead("sweeps", G5, Tier.SPOT, 1, {G5, west + "g5.xlarge"}) == (
        west + "g5.2xlarge",
        1,
    )
    ws = _sweeps(["g5.xlarge"], allow_upgrade=True, regions=["us-east-1"])
    m = LifecycleManager(ws, ManualClock(T0), LifecycleConfig(horizon_start=T0))
    m.on_market(market)
    assert m.instead("sweeps", G5, Tier.SPOT, 1, {G5}) == (G5_2X, 1)
    assert m.instead("sweeps", G5, Tier.ON_DEMAND, 1, {G5}) == (G5_2X, 1)
    assert m.instead("sweeps", G5, Tier.SPOT, 1, {G5, G5_2X}) is None
