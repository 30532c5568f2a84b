"""A running gang's pause is priced like a revocation: the fast plan keeps
it running through the horizon unless stopping saves more than the whole
gang's restart and the work since its last checkpoint."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd

from broker.planning.optimizer.fast import fast_plan
from broker.planning.optimizer.problem import PlanOptions, build_problem
from broker.planning.plan import Plan
from markets.model import InstanceType, MarketSnapshot, Pool, PoolSnapshot, Provider
from policies.workloads.spec import parse_workloads

T0 = datetime(2026, 1, 5, tzinfo=UTC)
_KEY = "gcp/us-central1/us-central1-a/gcp-h"


def _market() -> MarketSnapshot:
    """One 8-GPU type, on-demand only, at $10 a node-hour every hour."""
    inst = InstanceType(provider=Provider.GCP, name="gcp-h", family="h", units=8, gpus=8,
                        vcpus=64, memory_gib=256.0)  # fmt: skip
    pool = PoolSnapshot(pool=Pool(provider=Provider.GCP, region="us-central1",
                                  zone="us-central1-a", instance_type="gcp-h"),
                        instance=inst, on_demand_usd_per_hour=10.0, observed_at=T0)  # fmt: skip
    return MarketSnapshot(at=T0, pools=(pool,), source="synthetic")


def _fast(running: float) -> Plan:
    """A 16-GPU gang with 200 unit-hours left, due in 48 h: a 6-hour window's
    share is 25 unit-hours, two of its hours at 16 units."""
    gang = {"name": "gang", "class": "training", "instance_types": ["gcp-h"],
            "min_units": 16, "step_units": 8, "max_units": 16, "unit_hours": 200.0,
            "deadline_hours": 48.0, "restart_minutes": 30.0, "checkpoint_write_seconds": 60.0,
            "checkpoint_interval_minutes": 120.0, "value_of_time_usd_per_hour": 0.0}  # fmt: skip
    ws = parse_workloads({"workloads": [gang]}, demand_supplied=True)
    options = PlanOptions(allow_spot=False, allow_committed=False)
    previous = {("gang", _KEY, "on_demand"): running} if running else {}
    problem = build_problem(_market(), ws, {}, hours=6, options=options,
                            previous_instances=previous)  # fmt: skip
    return fast_plan(problem)


def _hours(plan: Plan) -> list[int]:
    a: pd.DataFrame = plan.allocations
    rows = a[(a.workload == "gang") & (a.instances > 1e-6)]
    return sorted(int(h) for h in rows.hour_start)


def test_a_gang_not_running_runs_only_its_share() -> None:
    assert _hours(_fast(0.0)) == [0, 1]


def test_a_running_gang_is_not_paused_when_the_pause_saves_nothing() -> None:
    # Flat prices: pausing after two hours saves $0 and costs the restart
    # and an hour of lost work of two $10 nodes ($30): it keeps running.
    assert _hours(_fast(2.0)) == list(range(6))
