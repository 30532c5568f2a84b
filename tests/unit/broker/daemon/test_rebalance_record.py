"""The store keeps the rebalance track record per owner and pool: outcomes
add up across transactions and restarts, other owners' rows stay apart."""

from __future__ import annotations

from broker.daemon.store.store import Store
from tests.fakes.tiny_market import T0, pool_key

A, B = pool_key("a"), pool_key("b")


def test_outcomes_add_up_per_pool_and_survive_a_new_store_object(store_url: str) -> None:
    store = Store(store_url)
    with store.transaction() as tx:
        assert tx.rebalance_record("me") == []
        tx.add_rebalance_outcomes("me", [(A, True), (A, False), (B, True)], T0)
        tx.add_rebalance_outcomes("other", [(A, True)], T0)
    with store.transaction() as tx:
        tx.add_rebalance_outcomes("me", [(A, True)], T0)
    store.close()
    again = Store(store_url)  # a restarted daemon
    with again.transaction() as tx:
        assert tx.rebalance_record("me") == [(A, 2, 3), (B, 1, 1)]
        assert tx.rebalance_record("other") == [(A, 1, 1)]
    again.close()
