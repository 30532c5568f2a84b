"""Learning from the account: a pool that keeps revoking in the simulated
account is priced up by the hazard learned from the daemon's own record, and
avoided within a day; the evidence is kept in the store across restarts."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from broker.daemon.accelerated import simulate_daemon
from broker.daemon.config import DaemonConfig, Intervals
from broker.daemon.store.instances import FleetRow
from broker.daemon.store.store import Store
from markets.cloud_fleet import InstanceState
from markets.hazard.learning import with_experience
from markets.hazard.posterior import Exposure
from markets.model import Tier
from policies.workloads.spec import parse_workloads
from tests.fakes.tiny_market import T0, TinyMarket, pool_key

A, B, C = pool_key("a"), pool_key("b"), pool_key("c")


def _workloads():
    return parse_workloads(
        {
            "workloads": [
                {
                    "name": "sweeps",
                    "class": "batch",
                    "instance_types": ["p3.2xlarge"],
                    "throughput": {"p3.2xlarge": 1.0},
                    "unit_hours": 4000,
                    "deadline_hours": 1000,
                    "max_units": 4,
                    "max_zone_share": 1.0,
                    "max_pool_share": 1.0,
                    # a revocation costs a half-hour restart: the hazard matters
                    "restart_minutes": 30,
                    "checkpoint_write_seconds": 300,
                }
            ]
        }
    )


# B is the cheapest spot (15 % under A and C, past the stick margin) and revokes every 40 minutes; A
# and C never do. The market says every pool revokes 0.01 times an hour.
EVENTS = {B: [T0 + timedelta(minutes=40 * i + 7) for i in range(1, 36)]}


def _run(tmp_path: Path, *, learn: bool) -> tuple[list[FleetRow], dict[str, tuple[int, float]]]:
    market = TinyMarket(events=EVENTS, spot_usd={A: 1.0, B: 0.85, C: 1.0})
    url = f"sqlite:///{tmp_path / f'state-{learn}.db'}"
    cfg = DaemonConfig.model_validate(
        {
            "owner": "me",
            "store_url": url,
            "planner": "fast",
            "metrics_port": 0,
            "intervals": Intervals(refresh_market_s=3600, replan_s=3600, reconcile_s=600),
        }
    )
    out = simulate_daemon(
        cfg, market, hours=24, workloads=_workloads(), store_url=url, learn_from_account=learn
    ).to_dict()
    assert out["revocations"] > 0
    store = Store(url)
    try:
        with store.transaction() as tx:
            return tx.fleet("me", alive_only=False), tx.experience("me")
    finally:
        store.close()


def _spot_in_b(rows: list[FleetRow]) -> list[FleetRow]:
    return [r for r in rows if r.pool_key == B and r.tier == Tier.SPOT.value]


def test_without_learning_the_plan_keeps_going_back_to_the_revoking_pool(tmp_path: Path) -> None:
    rows, _ = _run(tmp_path, learn=False)
    late = [r for r in _spot_in_b(rows) if r.launched_at >= T0 + timedelta(hours=12)]
    assert late  # the market's 0.01/h makes B the cheapest all day


def test_a_pool_that_keeps_revoking_is_priced_up_and_avoided_within_a_day(tmp_path: Path) -> None:
    market = TinyMarket(events=EVENTS, spot_usd={A: 1.0, B: 0.85, C: 1.0})
    rows, learned = _run(tmp_path, learn=True)
    spot_b = _spot_in_b(rows)
    assert spot_b and min(r.launched_at for r in spot_b) < T0 + timedelta(hours=2)  # cheapest first
    # ... and none launched in the last twelve hours; none running at the end
    assert all(r.launched_at < T0 + timedelta(hours=12) for r in spot_b)
    assert not [r for r in spot_b if r.state != InstanceState.TERMINATED.value]
    running = [r for r in rows if r.state != InstanceState.TERMINATED.value]
    assert any(r.tier == Tier.SPOT.value for r in running)  # spot elsewhere, not given up
    n_b, hours_b = learned[B]
    assert n_b >= 3 and hours_b > 0
    # the learned hazard is what priced B up: far above the market's 0.01/h
    snap = with_experience(
        market.snapshot(T0), {k: Exposure(n, h) for k, (n, h) in learned.items()}
    )
    assert snap.get(B).hazard.rate_per_hour > 10 * snap.get(A).hazard.rate_per_hour
