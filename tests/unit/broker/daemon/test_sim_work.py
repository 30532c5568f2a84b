"""The simulation's per-job work: what was counted done, when it was done
against the deadline, and the dollars per unit-hour delivered."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from broker.daemon.accelerated import _note_finished, _work
from broker.daemon.plan_job import Progress
from policies.workloads.spec import parse_workloads

T0 = datetime(2026, 1, 5, tzinfo=UTC)


def test_a_job_is_done_when_its_counted_work_first_reaches_its_unit_hours() -> None:
    ws = parse_workloads({"workloads": [
        {"name": "job", "class": "batch", "instance_types": ["p3.2xlarge"],
         "unit_hours": 100.0, "deadline_hours": 48.0},
        {"name": "api", "class": "serving", "instance_types": ["g5.xlarge"],
         "demand": {"base_units": 1, "peak_units": 1, "peak_start_hour": 9,
                    "peak_end_hour": 21}}]})  # fmt: skip
    finished: dict[str, datetime] = {}
    _note_finished(Progress({"job": 60.0}, T0 + timedelta(hours=10)), ws, finished)
    assert finished == {}
    late = Progress({"job": 100.0}, T0 + timedelta(hours=20), {"job": 250.0})
    _note_finished(late, ws, finished)
    _note_finished(Progress({"job": 100.0}, T0 + timedelta(hours=30)), ws, finished)
    assert finished == {"job": T0 + timedelta(hours=20)}
    out = _work(late, ws, finished, T0)
    assert set(out) == {"job"}  # serving has no unit-hours
    assert out["job"] == {"unit_hours": 100.0, "done_unit_hours": 100.0, "left_unit_hours": 0.0,
                          "done_at_hour": 20.0, "deadline_hours": 48.0, "usd": 250.0,
                          "usd_per_unit_hour": 2.5}  # fmt: skip
