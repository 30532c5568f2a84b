"""The dry run's cost diff: launches add at their pool's price, terminations
take an instance away once (an id not in the fleet, or named twice, once at
most), and the table's horizon column is the $/h delta held that long."""

from __future__ import annotations

from datetime import UTC, datetime

from broker.daemon.drycost import cost_diff, render
from markets.cloud_fleet import Instance, InstanceState, LaunchRequest, TerminateRequest
from markets.model import Tier

T0 = datetime(2026, 3, 1, tzinfo=UTC)
A, B = "aws/us-east-1/us-east-1a/g5.xlarge", "aws/us-east-1/us-east-1b/p4d.24xlarge"
PRICES = {(A, Tier.SPOT): 0.5, (A, Tier.ON_DEMAND): 1.25, (B, Tier.SPOT): 10.0}


def _inst(iid: str, pool: str, tier: Tier, workload: str) -> Instance:
    return Instance(
        instance_id=iid,
        pool_key=pool,
        tier=tier,
        workload=workload,
        state=InstanceState.RUNNING,
        units=1,
        launched_at=T0,
    )


def test_launches_add_and_terminations_take_away_once() -> None:
    fleet = [
        _inst("i-1", A, Tier.SPOT, "api"),
        _inst("i-2", A, Tier.SPOT, "api"),
        _inst("i-3", B, Tier.SPOT, "train"),
    ]
    requests: list[LaunchRequest | TerminateRequest] = [
        LaunchRequest(
            idempotency_key="k-launch-1",
            pool_key=A,
            tier=Tier.ON_DEMAND,
            workload="api",
            count=3,
            plan_generation=1,
            owner="me",
        ),
        TerminateRequest(idempotency_key="k-term-01", instance_ids=("i-1", "i-9"), owner="me"),
        TerminateRequest(idempotency_key="k-term-02", instance_ids=("i-1", "i-3"), owner="me"),
    ]
    lines = cost_diff(fleet, requests, lambda p, t: PRICES[(p, t)])
    got = {(x.workload, x.tier): (x.now_usd_per_hour, x.plan_usd_per_hour) for x in lines}
    assert got == {
        ("api", "on_demand"): (0.0, 3.75),
        ("api", "spot"): (1.0, 0.5),
        ("train", "spot"): (10.0, 0.0),
    }
    text = render(lines, 24)
    total = text.splitlines()[-1].split()
    # now 11.00, plan 4.25: -6.75 $/h, -162.00 over 24 h
    assert total == ["total", "$11.00", "$4.25", "-$6.75", "-$162.00"]
    assert "api       on_demand" in text and "+$90.00" in text  # 3.75 x 24
