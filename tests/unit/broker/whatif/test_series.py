"""The plans' dollars over time and spot by zone (``broker.whatif.series``),
on a plan small enough to add up by hand."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pandas as pd
import pytest

from broker.jsondoc import number
from broker.planning.plan import Plan
from broker.whatif.series import spot_by_zone, timeline_dict


@dataclass(frozen=True)
class _Commit:  # the two fields Plan.committed_usd_per_hour reads
    instances: int
    usd_per_instance_hour: float


def _plan(hours: int) -> Plan:
    rows = [  # tier, pool, instances, $/instance-hour, hours [start, end)
        ("spot", "aws/us-east-1/us-east-1a/g5.xlarge", 2.0, 0.5, 0, 50),
        ("spot", "aws/us-east-1/us-east-1b/g5.xlarge", 1.0, 1.0, 0, 10),
        ("on_demand", "aws/us-east-1/us-east-1a/g5.xlarge", 1.0, 2.0, 20, 30),
    ]
    a = pd.DataFrame(
        rows,
        columns=[
            "tier",
            "pool_key",
            "instances",
            "usd_per_instance_hour",
            "hour_start",
            "hour_end",
        ],
    )
    a["workload"] = "chat"
    return Plan(
        start=datetime(2026, 1, 1, tzinfo=UTC),
        hours=hours,
        period_hours=1,
        commitments=(_Commit(1, 0.25),),  # type: ignore[arg-type]
        allocations=a,
        objective_usd=0.0,
        status="optimal",
        solver="test",
        solve_time_s=0.0,
        integral=False,
    )


def test_a_day_a_step_with_the_last_step_short() -> None:
    tl = timeline_dict([("spotfolio", _plan(50))], 50)
    assert tl["basis"] == "planned" and tl["step_hours"] == 24
    got = tl["scenarios"]["spotfolio"]  # type: ignore[index]
    # spot: 2 x $0.5 x 24 h + 1 x $1 x 10 h; then 24 h; then hours 48-49
    assert got["spot"] == [34.0, 24.0, 2.0]
    assert got["on_demand"] == [8.0, 12.0, 0.0]  # hours 20-23, then 24-29, at $2
    assert got["committed"] == [6.0, 6.0, 0.5]  # $0.25 every hour, used or not
    total = sum(sum(v) for v in got.values())
    assert total == pytest.approx(_plan(50).planned_cost_usd())


def test_beyond_120_days_a_week_a_step() -> None:
    hours = 121 * 24
    assert timeline_dict([("x", _plan(hours))], hours)["step_hours"] == 168


def test_spot_by_zone_adds_instance_hours_per_zone_largest_first() -> None:
    got = spot_by_zone([("spotfolio", _plan(50))], 50)
    assert [(z["zone"], z["instance_hours"], z["planned_usd"]) for z in got] == [
        ("aws/us-east-1a", 100.0, 50.0),
        ("aws/us-east-1b", 10.0, 10.0),
    ]
    assert sum(number(z["share"], "share") for z in got) == pytest.approx(1.0)


def test_a_plan_without_spot_has_no_zone_rows() -> None:
    plan = _plan(50)
    od = Plan(
        **{
            **plan.__dict__,
            "allocations": plan.allocations[plan.allocations["tier"] == "on_demand"],
        }
    )
    assert spot_by_zone([("on_demand", od)], 50) == []
