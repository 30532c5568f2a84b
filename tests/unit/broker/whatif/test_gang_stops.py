"""The what-if bill charges a plan's own stops of a training gang like a
revocation: a pause, shrink or move costs the whole gang's restart and the
work since its last checkpoint; the gang's end costs nothing."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd
import pytest

from broker.whatif.billing import gang_stops
from markets.model import InstanceType, Pool, PoolSnapshot, Provider, Tier
from policies.workloads.spec import Workload, parse_workloads

T0 = datetime(2026, 1, 5, tzinfo=UTC)

_A = "gcp/us-central1/us-central1-a/gcp-h"
_B = "gcp/us-central1/us-central1-b/gcp-h"


def _gang() -> Workload:
    spec = {"name": "gang", "class": "training", "instance_types": ["gcp-h"], "elastic": True,
            "min_units": 16, "step_units": 8, "max_units": 32, "unit_hours": 500.0,
            "deadline_hours": 48.0, "restart_minutes": 30.0, "checkpoint_write_seconds": 60.0,
            "checkpoint_interval_minutes": 120.0}  # fmt: skip
    return parse_workloads({"workloads": [spec]}, demand_supplied=True).by_name("gang")


def _rows(*hours: tuple[int, str, str, float]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "hour": h,
                "workload": "gang",
                "pool_key": k,
                "tier": t,
                "instances": n,
                "usd_per_instance_hour": 10.0 if t == "on_demand" else 3.0,
            }
            for h, k, t, n in hours
        ]
    )


def _pool() -> dict[str, PoolSnapshot]:
    inst = InstanceType(provider=Provider.GCP, name="gcp-h", family="h", units=8, gpus=8,
                        vcpus=64, memory_gib=256.0)  # fmt: skip
    pool = Pool(provider=Provider.GCP, region="us-central1", zone="us-central1-a",
                instance_type="gcp-h")  # fmt: skip
    return {_A: PoolSnapshot(pool=pool, instance=inst, on_demand_usd_per_hour=10.0,
                             observed_at=T0)}  # fmt: skip


def test_a_pause_the_plan_resumes_is_charged_the_restart_and_the_lost_work() -> None:
    od = Tier.ON_DEMAND.value
    rows = _rows((0, _A, od, 2), (1, _A, od, 2), (3, _A, od, 2))  # stopped in hour 2
    (stop,) = gang_stops(rows, _gang(), _pool(), hours=6)
    # two $10 nodes: 0.5 h restart + 1 h of work since the checkpoint
    # (half the 120-minute interval)
    assert stop[0] == 2
    assert stop[1] == {Tier.ON_DEMAND: pytest.approx(2 * 10.0 * 1.5)}


def test_the_gangs_end_is_no_stop_and_a_move_or_shrink_is_one() -> None:
    od, spot = Tier.ON_DEMAND.value, Tier.SPOT.value
    end = _rows((0, _A, od, 2), (1, _A, od, 2))
    assert gang_stops(end, _gang(), {}, hours=6) == []
    moved = _rows((0, _A, spot, 2), (1, _B, spot, 2), (2, _B, spot, 1), (3, _B, spot, 1))
    got = gang_stops(moved, _gang(), {}, hours=6)
    assert [h for h, _usd in got] == [1, 2]
    assert got[0][1] == {Tier.SPOT: pytest.approx(2 * 3.0 * 0.5)}
    assert got[1][1] == {Tier.SPOT: pytest.approx(2 * 3.0 * 0.5)}
