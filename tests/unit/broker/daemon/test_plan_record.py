"""The plan in force as the store keeps it (``broker.daemon.plan_job``)."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd

from broker.daemon.plan_job import plan_from_record, plan_record
from broker.planning.plan import ALLOCATION_COLUMNS, Plan
from broker.planning.reconcile import desired_now
from policies.workloads.spec import default_workloads

T0 = datetime(2026, 2, 1, tzinfo=UTC)
P1 = "aws/us-east-1/us-east-1a/g5.xlarge"
WS = default_workloads()


def _plan() -> Plan:
    row = [0, 0, 1, "chat-api", "spot", P1, 4.0001, 4.0001, 4.0, 1.0]
    frame = pd.DataFrame([row], columns=ALLOCATION_COLUMNS)
    return Plan(T0, 1, 1, (), frame, 0.0, "feasible", "fast", 0.0, False)


def test_a_restored_plan_keeps_what_reconcile_rounds_by() -> None:
    restored = plan_from_record(plan_record(_plan(), "d"), "d")
    assert restored is not None
    # The work column survives: the hazard overhead is not a whole replica.
    assert desired_now(restored, T0, WS) == {("chat-api", P1, "spot"): 4}


def test_a_record_from_before_the_work_columns_restores_rounded_up() -> None:
    rec = plan_record(_plan(), "d")
    rec["rows"] = [r[:6] for r in rec["rows"]]
    restored = plan_from_record(rec, "d")
    assert restored is not None
    assert desired_now(restored, T0, WS) == {("chat-api", P1, "spot"): 5}
