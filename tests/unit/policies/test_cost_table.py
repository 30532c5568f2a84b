"""The cost table: one value per (snapshot, workloads, options), indexed.

Hand-sized markets: two on-demand prices, one pool without spot, a pool in
another region, so every lookup's answer can be read off the inputs.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from markets.errors import InputError
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
from policies.cost_table import CostOptions, CostTable, cost_entries
from policies.workloads.spec import WorkloadSet, parse_workloads

T0 = datetime(2026, 3, 2, tzinfo=UTC)


def _pool(
    zone: str,
    itype: str,
    *,
    od: float,
    spot: float | None,
    committed: float | None = None,
    units: int = 1,
) -> PoolSnapshot:
    return PoolSnapshot(
        pool=Pool(provider=Provider.AWS, region=zone[:-1], zone=zone, instance_type=itype),
        instance=InstanceType(
            provider=Provider.AWS,
            name=itype,
            family="g",
            units=units,
            gpus=units,
            vcpus=4 * units,
            memory_gib=16.0 * units,
        ),
        on_demand_usd_per_hour=od,
        spot_usd_per_hour=spot,
        committed_1y_usd_per_hour=committed,
        committed_3y_usd_per_hour=None if committed is None else committed * 0.7,
        hazard=Hazard(rate_per_hour=0.01, source=HazardSource.ASSUMED),
        observed_at=T0,
    )


def _snapshot() -> MarketSnapshot:
    return MarketSnapshot(
        at=T0,
        pools=(
            _pool("us-east-1a", "g1", od=1.0, spot=0.30, committed=0.6),
            _pool("us-east-1b", "g1", od=1.0, spot=0.25, committed=0.6),
            _pool("us-west-2a", "g1", od=0.9, spot=None, committed=0.5),
            _pool("us-east-1a", "g2", od=4.0, spot=1.0, units=4),
            _pool("us-east-1a", "cpu", od=0.1, spot=0.05),  # no workload accepts it
        ),
        source="test",
    )


def _workloads() -> WorkloadSet:
    return parse_workloads(
        {
            "workloads": [
                {
                    "name": "api",
                    "class": "serving",
                    "instance_types": ["g1", "g2"],
                    "max_spot_share": 0.5,
                },
                {
                    "name": "jobs",
                    "class": "batch",
                    "instance_types": ["g2"],
                    "unit_hours": 100,
                    "deadline_hours": 24,
                    "max_units": 8,
                },
            ]
        },
        demand_supplied=True,
    )


def test_the_table_holds_what_cost_entries_gives_for_each_workload() -> None:
    snap, ws = _snapshot(), _workloads()
    opts = CostOptions(term_years=3, interruption_multiplier=2.0, checkpoint_write_seconds=30.0)
    table = CostTable.compute(snap, ws, opts)
    for w in ws.workloads:
        expected = cost_entries(
            w, snap.pools, term_years=3, interruption_multiplier=2.0, checkpoint_write_seconds=30.0
        )
        assert list(table.entries(w.name)) == expected
    assert table.options == opts
    assert table.snapshot is snap and table.workloads is ws


def test_lookups_by_pool_by_tier_and_of_a_pools_snapshot() -> None:
    snap, ws = _snapshot(), _workloads()
    table = CostTable.compute(snap, ws)
    east_b = "aws/us-east-1/us-east-1b/g1"
    west = "aws/us-west-2/us-west-2a/g1"
    assert table.entry("api", east_b) is next(
        e for e in table.entries("api") if e.pool_key == east_b
    )
    assert table.entry("jobs", east_b) is None  # jobs does not accept g1
    assert table.entry("api", "aws/us-east-1/us-east-1a/cpu") is None
    # on-demand: us-west-2 is cheaper; committed too; spot: us-east-1b's listed 0.25
    cheapest_od = table.cheapest("api", Tier.ON_DEMAND)
    assert cheapest_od is not None and cheapest_od.pool_key == west
    assert table.cheapest_usd_per_work_hour("api", Tier.ON_DEMAND) == pytest.approx(0.9)
    cheapest_committed = table.cheapest("api", Tier.COMMITTED)
    assert cheapest_committed is not None and cheapest_committed.pool_key == west
    assert table.entries("api")[0].pool_key == east_b  # cheapest effective spot first
    # a tier no pool offers the workload
    assert table.cheapest("jobs", Tier.COMMITTED) is None
    assert table.cheapest_usd_per_work_hour("jobs", Tier.COMMITTED) == math.inf
    assert table.pool(west) is snap.by_key()[west]
    assert table.entries("api")[0].key.zone == "us-east-1b"


def test_the_term_priced_is_the_tables() -> None:
    snap, ws = _snapshot(), _workloads()
    one = CostTable.compute(snap, ws).cheapest("api", Tier.COMMITTED)
    three = CostTable.compute(snap, ws, CostOptions(term_years=3)).cheapest("api", Tier.COMMITTED)
    assert one is not None and three is not None
    assert three.usd_per_work_hour[Tier.COMMITTED] == pytest.approx(
        0.7 * (one.usd_per_work_hour[Tier.COMMITTED] or 0.0)
    )


def test_an_unknown_workload_is_named_with_the_ones_the_table_has() -> None:
    table = CostTable.compute(_snapshot(), _workloads())
    with pytest.raises(KeyError, match="api, jobs"):
        table.entries("nope")


def test_a_table_handed_to_another_snapshot_or_workload_set_is_refused() -> None:
    snap, ws = _snapshot(), _workloads()
    table = CostTable.compute(snap, ws)
    table.check(snap, ws)  # its own: fine
    table.check(_snapshot(), _workloads())  # equal values: fine too
    later = snap.model_copy(update={"at": datetime(2026, 3, 3, tzinfo=UTC)})
    with pytest.raises(InputError, match="snapshot"):
        table.check(later, ws)
    fewer = ws.model_copy(update={"workloads": ws.workloads[1:]})
    with pytest.raises(InputError, match="workloads"):
        table.check(snap, fewer)
    with pytest.raises(InputError, match="options"):
        table.check(snap, ws, CostOptions(interruption_multiplier=2.0))
