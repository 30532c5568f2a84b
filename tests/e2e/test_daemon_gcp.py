"""The production daemon with ``provider: gcp`` against the local fake Compute
Engine: it launches Spot VMs to the plan, a preemption (a zone operation
``compute.instances.preempted``) becomes a notice with a 30 s deadline, and
the daemon decides inside that window and replaces the capacity."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from broker.daemon.config import DaemonConfig
from broker.daemon.daemon import Daemon
from broker.daemon.metrics import DaemonMetrics
from broker.daemon.store.store import Store
from broker.daemon.wiring import default_lifecycle
from markets.clock import ManualClock
from markets.gcp.sdk import CallPolicy
from markets.model import Tier
from markets.registry import open_provider
from policies.workloads.spec import parse_workloads
from tests.fakes.gcp import FakeCompute
from tests.fakes.tiny_market import T0, TinyMarket

ZONES = ("us-central1-a", "us-central1-b", "us-central1-c")
KEYS = tuple(f"gcp/us-central1/{z}/a2-highgpu-1g" for z in ZONES)
IMAGE = "projects/debian-cloud/global/images/family/debian-12"
FAST = CallPolicy(retry_timeout_s=1.0, initial_s=0.01, maximum_s=0.05, request_s=5.0)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def fake(clock: ManualClock) -> Iterator[FakeCompute]:
    with FakeCompute(now=clock.now, lifetime_s=120.0) as f:
        yield f


def test_gcp_preemption_is_decided_inside_the_30_s_window(
    fake: FakeCompute, clock: ManualClock, tmp_path: Path
) -> None:
    owner = "team-ml"
    workloads = parse_workloads(
        {
            "workloads": [
                {
                    "name": "sweeps",
                    "class": "batch",
                    "instance_types": ["a2-highgpu-1g"],
                    "unit_hours": 600,
                    "deadline_hours": 500,
                    "max_units": 4,
                }
            ]
        }
    )
    config = DaemonConfig.model_validate(
        {
            "owner": owner,
            "store_url": f"sqlite:///{tmp_path / 'state.db'}",
            "planner": "fast",
            "metrics_port": 0,
            "provider": "gcp",
        }
    )
    assert config.launch_providers == ("gcp",)
    provider = open_provider(
        "gcp",
        project="spotfolio-test",
        owner=owner,
        zones=list(ZONES),
        source_image=IMAGE,
        endpoint=fake.url,
        anonymous=True,
        clock=clock,
        policy=FAST,
    )
    store = Store(config.store_url)
    daemon = Daemon(config, provider, TinyMarket(KEYS), store,
                    default_lifecycle(workloads, clock, config), clock, workloads=workloads,
                    metrics=DaemonMetrics(), sleep=clock.advance)  # type: ignore[arg-type]  # fmt: skip
    daemon.start()
    fleet = provider.list_fleet(owner)
    spot = [i for i in fleet if i.tier is Tier.SPOT]
    assert spot and all(i.pool_key in KEYS for i in fleet)

    victim = spot[0]
    zone, name = victim.instance_id.split("/")
    clock.advance(5)
    preempted_at = clock.now()
    fake.preempt(zone, name, at=preempted_at)
    clock.advance(3)
    assert daemon.poll_notices() >= 1
    with store.transaction() as tx:
        decisions = [d for d in tx.decisions(owner) if d.kind != "ignore"]
    assert len(decisions) == 1
    decision = decisions[0]
    assert decision.kind in ("replace", "break_glass"), decision.reason
    assert decision.created_at.replace(tzinfo=preempted_at.tzinfo) <= preempted_at + timedelta(
        seconds=30
    )
    after = provider.list_fleet(owner)
    assert victim.instance_id not in {i.instance_id for i in after} or any(
        i.instance_id not in {f.instance_id for f in fleet} for i in after
    )
    # a replacement was launched, in GCP, not where the preemption just happened
    new = [i for i in after if i.instance_id not in {f.instance_id for f in fleet}]
    assert new and all(i.pool_key.startswith("gcp/") for i in new)
    if decision.kind == "replace":
        assert all(i.pool_key != victim.pool_key for i in new)
