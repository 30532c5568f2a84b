"""The store's pool experience: hours held and revocations counted once,
across counts and across a restart (a new Store on the same database)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from broker.daemon.store.store import Store
from markets.cloud_fleet import Instance, InstanceState, NoticeKind
from markets.model import Tier

T0 = datetime(2026, 3, 1, tzinfo=UTC)
A = "aws/us-east-1/us-east-1a/p3.2xlarge"
B = "aws/us-east-1/us-east-1b/p3.2xlarge"
KINDS = (NoticeKind.INTERRUPTION.value, NoticeKind.PREEMPTED.value)


def _inst(iid: str, pool: str, tier: Tier = Tier.SPOT) -> Instance:
    return Instance(
        instance_id=iid,
        pool_key=pool,
        tier=tier,
        workload="w",
        state=InstanceState.RUNNING,
        units=1,
        launched_at=T0,
    )


def test_hours_and_revocations_are_counted_once_across_counts_and_restarts(store_url: str) -> None:
    store = Store(store_url)
    with store.transaction() as tx:
        tx.upsert_instances(
            "me", [_inst("i-a", A), _inst("i-b", B), _inst("i-od", A, Tier.ON_DEMAND)], T0
        )
        assert tx.count_experience("me", T0 + timedelta(hours=2), KINDS) == {
            A: (0, pytest.approx(2.0)),
            B: (0, pytest.approx(2.0)),
        }
        at = T0 + timedelta(hours=3)
        tx.record_notice("n1", NoticeKind.INTERRUPTION.value, "i-b", at, at)
        tx.record_notice("n2", NoticeKind.REBALANCE.value, "i-a", at, at)  # a warning, not a loss
        tx.mark_instances(["i-b"], InstanceState.TERMINATED, at + timedelta(minutes=2))
    store.close()
    again = Store(store_url)  # a restart
    try:
        with again.transaction() as tx:
            got = tx.count_experience("me", T0 + timedelta(hours=4), KINDS)
            # the same moment again adds nothing
            assert tx.count_experience("me", T0 + timedelta(hours=4), KINDS) == got
            assert tx.experience("me") == got
        assert got[A] == (0, pytest.approx(4.0))
        assert got[B][0] == 1 and got[B][1] == pytest.approx(3.0 + 2 / 60)
        with again.transaction() as tx:
            times, span_s = tx.revocation_times("me", KINDS)
        # the one revocation, on B's spot instance; four hours of record
        assert times == {B: [(T0 + timedelta(hours=3)).timestamp()]}
        assert span_s == pytest.approx(4 * 3600.0)
    finally:
        again.close()
