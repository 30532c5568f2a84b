"""The store keeps the rebalance track record per owner and pool: outcomes
add up across transactions and restarts, other owners' rows stay apart."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from broker.daemon.accelerated import simulate_daemon
from broker.daemon.config import DaemonConfig, SimSettings
from broker.daemon.lifecycle import Lifecycle
from broker.daemon.store.store import Store
from broker.lifecycle import LifecycleConfig, LifecycleManager
from markets.clock import Clock
from policies.workloads.spec import WorkloadSet, parse_workloads
from tests.fakes.tiny_market import T0, TinyMarket, pool_key

A, B, C = pool_key("a"), pool_key("b"), pool_key("c")


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


def test_a_simulated_account_records_outcomes_and_a_restart_starts_from_them(
    tmp_path: Path,
) -> None:
    events = {p: [T0 + timedelta(hours=h, minutes=17) for h in range(1, 24)] for p in (A, B, C)}
    market = TinyMarket(events=events)
    cfg = DaemonConfig.model_validate(
        {
            "owner": "me",
            "planner": "fast",
            "metrics_port": 0,
            "intervals": {"reconcile_s": 600},
            "sim": {"rebalance_coverage": 1.0, "rebalance_precision": 0.5, "seed": 2},
        }
    )
    url = f"sqlite:///{tmp_path / 'state.db'}"
    simulate_daemon(cfg, market, hours=24, workloads=_workloads(), store_url=url)
    store = Store(url)
    with store.transaction() as tx:
        rows = tx.rebalance_record("me")
    store.close()
    assert sum(r for _, _, r in rows) > 0 and sum(h for _, h, _ in rows) > 0

    seen: list[LifecycleManager] = []

    def keep(ws: WorkloadSet, clock: Clock, config: DaemonConfig) -> Lifecycle:
        m = LifecycleManager(ws, clock, LifecycleConfig())
        seen.append(m)
        return m

    quiet = cfg.model_copy(update={"sim": SimSettings()})
    later = T0 + timedelta(days=2)  # the first run's lease has run out
    simulate_daemon(
        quiet, market, hours=1, start=later, workloads=_workloads(), store_url=url, lifecycle=keep
    )
    for pool, hits, resolved in rows:
        got_hits, got_resolved = seen[0].rebalance_counts(pool)
        assert got_hits >= hits and got_resolved >= resolved


def _workloads() -> WorkloadSet:
    return parse_workloads(
        {
            "workloads": [
                {
                    "name": "sweeps",
                    "class": "batch",
                    "instance_types": ["p3.2xlarge"],
                    "unit_hours": 2000,
                    "deadline_hours": 500,
                    "max_units": 6,
                }
            ]
        }
    )
