"""The work a job loses when the broker ends it on purpose (``policies.moving``)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from markets.model import Hazard, HazardSource, InstanceType, Pool, PoolSnapshot, Provider
from policies.checkpoint import daly_interval
from policies.moving import lost_work_hours
from policies.workloads.spec import Workload, parse_workloads

T0 = datetime(2026, 1, 5, tzinfo=UTC)


def _pool(hazard_per_hour: float) -> PoolSnapshot:
    inst = InstanceType(
        provider=Provider.AWS, name="p1", family="p", units=8, gpus=8, vcpus=64, memory_gib=256.0
    )
    return PoolSnapshot(
        pool=Pool(provider=Provider.AWS, region="us-east-1", zone="us-east-1a", instance_type="p1"),
        instance=inst,
        on_demand_usd_per_hour=10.0,
        hazard=Hazard(rate_per_hour=hazard_per_hour, source=HazardSource.ASSUMED),
        observed_at=T0,
    )


def _job(**fields: object) -> Workload:
    doc = {
        "name": "job",
        "class": "training",
        "instance_types": ["p1"],
        "min_units": 8,
        "max_units": 8,
        "unit_hours": 80.0,
        "deadline_hours": 20.0,
        "checkpoint_write_seconds": 180.0,
        **fields,
    }
    return parse_workloads({"workloads": [doc]}, demand_supplied=True).by_name("job")


def test_half_the_stated_interval_is_lost() -> None:
    job = _job(checkpoint_interval_minutes=90.0)
    assert lost_work_hours(job, _pool(0.05)) == pytest.approx(0.75)


def test_without_a_stated_interval_half_of_dalys_optimum_for_the_pool_is_lost() -> None:
    # 3-minute writes, one interruption per 20 h: Daly's tau ~1.38 h, half lost
    expected = daly_interval(180.0 / 3600.0, 20.0) / 2.0
    assert lost_work_hours(_job(), _pool(0.05)) == pytest.approx(expected)
    assert 0.68 < expected < 0.70


@pytest.mark.parametrize(
    ("fields", "hazard"),
    [
        pytest.param({"checkpoint_write_seconds": 0.0}, 0.05, id="no-checkpoints"),
        pytest.param({}, 0.0, id="no-hazard"),
    ],
)
def test_nothing_is_priced_without_a_checkpoint_schedule(
    fields: dict[str, object], hazard: float
) -> None:
    assert lost_work_hours(_job(**fields), _pool(hazard)) == 0.0
