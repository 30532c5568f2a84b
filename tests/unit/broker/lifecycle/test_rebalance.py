"""Rebalance recommendations that count: a pool borrows the fleet's record
until it has its own, the record survives a restart (the daemon stores the
outcomes the manager hands out), and a replacement avoids the at-risk pool
and its zone."""

from __future__ import annotations

from datetime import timedelta

from broker.lifecycle import DecisionKind
from markets.cloud_fleet import NoticeKind
from markets.keys import PoolKey
from tests.unit.broker.lifecycle.test_manager import inst, key, manager, market, revoke

P4D_A, P4D_B = key("us-east-1a", "p4d.24xlarge"), key("us-east-1b", "p4d.24xlarge")
P3_B = key("us-east-1b", "p3.2xlarge")


def test_a_pool_with_no_record_of_its_own_acts_on_the_fleets() -> None:
    m, clock = manager()
    m.seed_rebalance_history(P4D_B, hits=8, resolved=10)  # another pool predicts
    i = inst("rigid", P4D_A, 8)
    fleet = (i, inst("rigid", P4D_B, 8))
    d = m.handle(revoke(i, clock.now(), kind=NoticeKind.REBALANCE), fleet, market())
    assert d.kind is DecisionKind.REPLACE and d.launch_before_terminate
    assert "confidence 75%" in d.reason  # (0 + 5 x 9/12) / (0 + 5): the fleet's rate


def test_a_pools_own_poor_record_outweighs_the_fleets() -> None:
    m, clock = manager()
    m.seed_rebalance_history(P4D_B, hits=10, resolved=10)
    m.seed_rebalance_history(P4D_A, hits=0, resolved=10)
    i = inst("rigid", P4D_A, 8)
    d = m.handle(revoke(i, clock.now(), kind=NoticeKind.REBALANCE), (i,), market())
    assert d.kind is DecisionKind.IGNORE and "ignored" in d.reason


def test_the_replacement_avoids_the_at_risk_pool_and_its_zone() -> None:
    m, clock = manager()
    m.seed_rebalance_history(P3_B, hits=10, resolved=10)
    # 1b/p3 is the cheapest pool for sweeps: a plain replacement would go back there.
    i = inst("sweeps", P3_B, 1)
    d = m.handle(revoke(i, clock.now(), kind=NoticeKind.REBALANCE), (i,), market())
    assert d.kind is DecisionKind.REPLACE
    zones = {PoolKey.parse(x.pool_key).zone for x in d.launches}
    assert zones and "us-east-1b" not in zones


def test_resolved_outcomes_are_handed_out_once_for_the_store() -> None:
    m, clock = manager()
    hit, miss = inst("rigid", P4D_A, 8), inst("rigid", P4D_B, 8)
    fleet = (hit, miss)
    for i in fleet:
        m.handle(revoke(i, clock.now(), kind=NoticeKind.REBALANCE), fleet, market())
    clock.advance(300)
    m.handle(revoke(hit, clock.now()), fleet, market())
    assert m.rebalance_outcomes() == [(P4D_A, True)]
    m.tick(clock.now() + timedelta(hours=2), fleet, market())  # the other's window passes
    assert m.rebalance_outcomes() == [(P4D_B, False)]
    assert m.rebalance_outcomes() == []
    # A new manager seeded with them knows what this one knew.
    m2, _ = manager()
    m2.seed_rebalance_history(P4D_A, 1, 1)
    m2.seed_rebalance_history(P4D_B, 0, 1)
    assert [m2.rebalance_counts(p) for p in (P4D_A, P4D_B)] == [(1, 1), (0, 1)]
