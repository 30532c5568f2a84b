"""The production daemon against the local fake Compute Engine when the
project's GPU quota refuses launches: each refusal is a typed quota outcome
(``ErrorKind.QUOTA``), the daemon keeps running, launches no instance twice,
and fills the plan once the quota is raised."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.daemon.config import DaemonConfig
from broker.daemon.daemon import Daemon
from broker.daemon.metrics import DaemonMetrics
from broker.daemon.store.store import Store
from broker.daemon.wiring import default_lifecycle
from markets.clock import ManualClock
from markets.gcp.sdk import CallPolicy
from markets.registry import open_provider
from policies.workloads.spec import parse_workloads
from tests.fakes.gcp import FakeCompute
from tests.fakes.tiny_market import T0, TinyMarket

ZONES = ("us-central1-a", "us-central1-b", "us-central1-c")
KEYS = tuple(f"gcp/us-central1/{z}/a2-highgpu-1g" for z in ZONES)
IMAGE = "projects/debian-cloud/global/images/family/debian-12"
FAST = CallPolicy(retry_timeout_s=1.0, initial_s=0.01, maximum_s=0.05, request_s=5.0)
OWNER = "team-ml"
METRICS = ("NVIDIA_A100_GPUS", "PREEMPTIBLE_NVIDIA_A100_GPUS")  # a2-highgpu-1g: 1 A100


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def fake(clock: ManualClock) -> Iterator[FakeCompute]:
    with FakeCompute(now=clock.now, lifetime_s=10_000.0) as f:
        yield f


def _quota_outcomes(metrics: DaemonMetrics) -> float:
    return sum(s.value for m in metrics.actions.collect() for s in m.samples
               if s.name.endswith("_total") and s.labels.get("outcome") == "quota")  # fmt: skip


def test_daemon_survives_quota_refusals_and_fills_the_plan_when_raised(
    fake: FakeCompute, clock: ManualClock, tmp_path: Path
) -> None:
    for m in METRICS:
        fake.set_quota(m, 1, region="us-central1")
    workloads = parse_workloads({"workloads": [{
        "name": "sweeps", "class": "batch", "instance_types": ["a2-highgpu-1g"],
        "unit_hours": 1800, "deadline_hours": 500, "max_units": 4,
    }]})  # fmt: skip
    config = DaemonConfig.model_validate({
        "owner": OWNER, "store_url": f"sqlite:///{tmp_path / 'state.db'}", "planner": "fast",
        "metrics_port": 0, "provider": "gcp",
    })  # fmt: skip
    provider = open_provider(
        "gcp", project="spotfolio-test", owner=OWNER, zones=list(ZONES), source_image=IMAGE,
        endpoint=fake.url, anonymous=True, clock=clock, policy=FAST,
    )  # fmt: skip
    store = Store(config.store_url)
    metrics = DaemonMetrics()

    def sleep(seconds: float) -> None:
        clock.advance(seconds)

    daemon = Daemon(config, provider, TinyMarket(KEYS), store,
                    default_lifecycle(workloads, clock, config), clock, workloads=workloads,
                    metrics=metrics, sleep=sleep)  # fmt: skip
    daemon.start()  # the quota refuses all but one launch: no stop

    fleet = provider.list_fleet(OWNER)
    assert len(fleet) == 1
    assert _quota_outcomes(metrics) >= 1
    with store.transaction() as tx:
        failed = tx.count_actions(OWNER, "failed")
    assert failed == _quota_outcomes(metrics)  # each refused launch is recorded, none lost

    # another reconcile under the same quota: still one instance, still running
    clock.advance(60)
    daemon.reconcile()
    assert len(provider.list_fleet(OWNER)) == 1

    # the quota is raised: the plan is filled, no instance launched twice
    for m in METRICS:
        fake.set_quota(m, 8, region="us-central1")
    clock.advance(60)
    daemon.reconcile()
    after = provider.list_fleet(OWNER)
    assert len(after) == 4  # 1,800 unit-hours by a 500-hour deadline: 4 units
    assert len({i.instance_id for i in after}) == len(after)
    assert len(fake.instances) == len(after)  # every VM the fake holds is in the fleet
    assert fleet[0].instance_id in {i.instance_id for i in after}
    daemon.stop()
