"""The production daemon with a blocks file (``blocks:``) on the simulated
cloud: a held reservation's pool runs the deadline job as on-demand at $0 an
hour, inside the reservation's window; an offering the plan would buy is
logged once as a recommendation (``block_recommended``), and nothing is
bought or launched for it."""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path

import pytest

from broker.daemon.config import DaemonConfig
from broker.daemon.daemon import Daemon
from broker.daemon.metrics import DaemonMetrics
from broker.daemon.store.store import Store
from broker.daemon.wiring import default_lifecycle
from markets.clock import ManualClock
from markets.model import Tier
from markets.registry import PROVIDERS
from policies.workloads.spec import parse_workloads
from tests.fakes.tiny_market import T0, TinyMarket, pool_key

HELD, OFFERED = pool_key("a"), pool_key("b")


def _row(block_id: str, zone: str, *, held: bool, upfront: float = 0.0) -> str:
    start, end = (T0 - timedelta(hours=1)).isoformat(), (T0 + timedelta(days=3)).isoformat()
    return (f"  - {{kind: aws_odcr, provider: aws, block_id: {block_id}, "
            f"instance_type: p3.2xlarge, region: us-east-1, zone: us-east-1{zone}, count: 2, "
            f"start: '{start}', end: '{end}', upfront_usd: {upfront}, "
            f"held: {str(held).lower()}}}\n")  # fmt: skip


def test_the_daemon_runs_in_the_held_block_and_only_recommends_the_offering(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock(T0)
    blocks = tmp_path / "blocks.yaml"
    # the offering is nearly free: the plan that may buy it buys it
    blocks.write_text("blocks:\n" + _row("cr-held", "a", held=True)
                      + _row("cr-offer", "b", held=False, upfront=0.01))  # fmt: skip
    owner = "team-ml"
    workloads = parse_workloads({"workloads": [{
        "name": "sweeps", "class": "batch", "instance_types": ["p3.2xlarge"],
        "unit_hours": 150, "deadline_hours": 48, "max_units": 4, "max_spot_share": 0.0,
    }]})  # fmt: skip
    config = DaemonConfig.model_validate({
        "owner": owner, "store_url": f"sqlite:///{tmp_path / 'state.db'}", "planner": "milp",
        "metrics_port": 0, "provider": "sim", "blocks": str(blocks),
    })  # fmt: skip
    market = TinyMarket()
    provider = PROVIDERS.get("sim")(market=market, clock=clock, seed=1)
    store = Store(config.store_url)

    def sleep(seconds: float) -> None:
        clock.advance(seconds)

    daemon = Daemon(config, provider, market, store, default_lifecycle(workloads, clock, config),
                    clock, workloads=workloads, metrics=DaemonMetrics(), sleep=sleep)  # fmt: skip
    with caplog.at_level(logging.WARNING):
        daemon.start()
        clock.advance(60)
        daemon.replan()  # the offerings are weighed once
    fleet = provider.list_fleet(owner)
    held = [i for i in fleet if i.pool_key == HELD]
    assert len(held) >= 2 and all(i.tier is Tier.ON_DEMAND for i in held)
    assert not [i for i in fleet if i.pool_key == OFFERED]  # never bought, so never run in
    plan = daemon.state.plan
    assert plan is not None and [b.block_id for b in plan.blocks] == ["cr-held"]
    a = plan.allocations
    free = a[a["usd_per_instance_hour"] == 0.0]
    assert set(free["pool_key"]) == {HELD} and set(free["tier"]) == {Tier.ON_DEMAND.value}
    assert float(free.groupby("period")["instances"].sum().max()) <= 2  # the block's count
    said = [r.getMessage() for r in caplog.records if "block_recommended" in r.getMessage()]
    assert len(said) == 1 and "cr-offer" in said[0] and "2 x p3.2xlarge" in said[0]
    daemon.stop()
