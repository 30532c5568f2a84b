"""One daemon acting in two clouds from one plan: AWS through moto's HTTP
server (EventBridge -> SQS notices) and GCP through the local fake Compute
Engine (preemption operations). The plan launches in both; a revocation in
each is decided and replaced in its own cloud; the daemon is killed after a
replacement reached the cloud and before the store recorded it, and a new
one takes over. Then neither cloud holds a duplicate launch or an instance
the store does not know."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from broker.daemon.config import DaemonConfig
from broker.daemon.daemon import Daemon
from broker.daemon.metrics import DaemonMetrics
from broker.daemon.store.schema import actions_t
from broker.daemon.store.store import Store
from broker.daemon.wiring import default_lifecycle, open_cloud
from markets.aws.launch import LAUNCH_KEY_TAG
from markets.clock import ManualClock
from markets.cloud_fleet import ActionResult, Instance, LaunchRequest, Notice, TerminateRequest
from markets.clouds import Clouds
from markets.gcp.sdk import CallPolicy
from markets.model import Tier
from markets.protocols import Provider
from policies.workloads.spec import parse_workloads
from tests.e2e.test_daemon_aws import AMI, INTERRUPTION, REGION, _no_real_aws, queue
from tests.fakes.gcp import FakeCompute
from tests.fakes.tiny_market import T0, TinyMarket

__all__ = ["_no_real_aws", "queue"]  # the AWS e2e fixtures, used here as they are

GCP_ZONES = ("us-central1-a", "us-central1-b", "us-central1-c")
AWS_KEYS = tuple(f"aws/{REGION}/{REGION}{z}/p3.2xlarge" for z in "abc")
GCP_KEYS = tuple(f"gcp/us-central1/{z}/a2-highgpu-1g" for z in GCP_ZONES)
IMAGE = "projects/debian-cloud/global/images/family/debian-12"
FAST = CallPolicy(retry_timeout_s=1.0, initial_s=0.01, maximum_s=0.05, request_s=5.0)
VISIBILITY_S = 1  # an unacknowledged SQS message is back after this (wall clock)


class Crash(BaseException):
    """The process dies here (BaseException: no job boundary catches it)."""


class DiesAfterLaunch:
    """A provider that dies once the ``at``-th launch was carried out by the
    cloud, before its answer reaches the daemon (nor its store)."""

    def __init__(self, inner: Provider, at: int) -> None:
        self.inner, self.at, self.launches = inner, at, 0
        self.name = inner.name

    def launch(self, request: LaunchRequest) -> ActionResult:
        result = self.inner.launch(request)
        self.launches += 1
        if self.launches == self.at:
            raise Crash
        return result

    def terminate(self, request: TerminateRequest) -> ActionResult:
        return self.inner.terminate(request)

    def list_fleet(self, owner: str) -> Sequence[Instance]:
        return self.inner.list_fleet(owner)

    def poll_notices(self, max_notices: int = 10) -> Sequence[Notice]:
        return self.inner.poll_notices(max_notices)

    def ack_notice(self, notice: Notice) -> None:
        self.inner.ack_notice(notice)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def fake(clock: ManualClock) -> Iterator[FakeCompute]:
    with FakeCompute(now=clock.now, lifetime_s=300.0) as f:
        yield f


def _config(tmp_path: Path, owner: str, moto: str, url: str, fake: FakeCompute,
            clock: ManualClock) -> DaemonConfig:  # fmt: skip
    aws = {"lease_scope": "123456789012", "options": {
        "launch": {REGION: {"image_id": AMI}}, "queue_url": url, "queue_region": REGION,
        "endpoint_url": moto, "notice_wait_s": 0, "notice_visibility_timeout_s": VISIBILITY_S,
    }}  # fmt: skip
    gcp = {"lease_scope": "spotfolio-test", "options": {
        "project": "spotfolio-test", "zones": list(GCP_ZONES), "source_image": IMAGE,
        "endpoint": fake.url, "anonymous": True, "clock": clock, "policy": FAST,
    }}  # fmt: skip
    return DaemonConfig.model_validate({
        "owner": owner, "store_url": f"sqlite:///{tmp_path / 'state.db'}", "planner": "fast",
        "metrics_port": 0, "clouds": {"aws": aws, "gcp": gcp},
    })  # fmt: skip


def _clouds(config: DaemonConfig) -> Clouds:
    """Both clouds opened as the production wiring opens them."""
    return Clouds({n: open_cloud(n, c, config.owner) for n, c in config.cloud_settings.items()})


def test_one_daemon_keeps_an_aws_and_gcp_plan_through_revocations_and_a_kill(
    moto_server: str, queue: tuple[Any, Any, str], fake: FakeCompute, clock: ManualClock,
    tmp_path: Path,
) -> None:  # fmt: skip
    events, _sqs, url = queue
    owner = f"e2e-{uuid.uuid4().hex[:10]}"
    config = _config(tmp_path, owner, moto_server, url, fake, clock)
    assert config.launch_providers == ("aws", "gcp")
    assert config.lease_names[1:] == ("aws/123456789012", "gcp/spotfolio-test")
    market = TinyMarket(AWS_KEYS + GCP_KEYS)
    workloads = parse_workloads({"workloads": [
        {"name": "sweeps-aws", "class": "batch", "instance_types": ["p3.2xlarge"],
         "unit_hours": 1000, "deadline_hours": 500, "max_units": 4,
         "max_zone_share": 0.5, "max_pool_share": 0.5},
        {"name": "sweeps-gcp", "class": "batch", "instance_types": ["a2-highgpu-1g"],
         "unit_hours": 1000, "deadline_hours": 500, "max_units": 4,
         "max_zone_share": 0.5, "max_pool_share": 0.5},
    ]})  # fmt: skip
    store = Store(config.store_url)

    def sleep(seconds: float) -> None:
        clock.advance(seconds)

    def daemon(provider: Provider) -> Daemon:
        return Daemon(config, provider, market, store,
                      default_lifecycle(workloads, clock, config), clock, workloads=workloads,
                      metrics=DaemonMetrics(), sleep=sleep)  # fmt: skip

    first_clouds = _clouds(config)
    probe = DiesAfterLaunch(first_clouds, at=10**6)  # armed after start-up
    first = daemon(probe)
    first.start()
    fleet = first_clouds.list_fleet(owner)
    clouds = Counter(i.pool_key.split("/")[0] for i in fleet)
    assert clouds["aws"] > 0 and clouds["gcp"] > 0, fleet
    aws_victim = next(i for i in fleet if i.pool_key.startswith("aws/") and i.tier is Tier.SPOT)
    gcp_victim = next(i for i in fleet if i.pool_key.startswith("gcp/") and i.tier is Tier.SPOT)

    # A revocation in each cloud, through each cloud's own notice path.
    clock.advance(10)
    reply = events.put_events(Entries=[{
        "Source": "aws.ec2", "DetailType": INTERRUPTION,
        "Detail": json.dumps({"instance-id": aws_victim.instance_id,
                              "instance-action": "terminate"}),
        "Resources": [f"arn:aws:ec2:{REGION}:123456789012:instance/{aws_victim.instance_id}"],
        "Time": clock.now(),
    }])  # fmt: skip
    assert reply["FailedEntryCount"] == 0
    zone, name = gcp_victim.instance_id.split("/")
    fake.preempt(zone, name, at=clock.now())
    clock.advance(2)

    # Killed after the first replacement reached its cloud, before it was recorded.
    probe.at = probe.launches + 1
    with pytest.raises(Crash):
        while not first.poll_notices():
            clock.advance(1)
    assert probe.launches == probe.at

    # A new process: the killed one's leases run out; it finds the AWS message
    # back on the queue and the GCP operation still in the zone's log.
    clock.advance(config.lease_ttl_s + 1)
    time.sleep(VISIBILITY_S + 0.5)
    second_clouds = _clouds(config)
    second = daemon(second_clouds)
    second.start()
    for _ in range(5):
        second.poll_notices()
        clock.advance(5)
        time.sleep(0.2)
    second.reconcile()

    with store.transaction() as tx:
        decided = {d.notice_id: d for d in tx.decisions(owner) if d.notice_id}
        assert tx.count_actions(owner, "pending") == 0
        actions = tx.conn.execute(select(actions_t).where(actions_t.c.owner == owner)).all()
    # Each revocation decided once (the store keys decisions by notice),
    # and replaced in its own cloud.
    acted = [d for d in decided.values() if d.kind != "ignore"]
    lost = sorted(str(d.payload["lost_slot"][1]) for d in acted)
    assert lost == sorted([aws_victim.pool_key, gcp_victim.pool_key]), acted
    for d in acted:
        lost_cloud = str(d.payload["lost_slot"][1]).split("/")[0]
        launches = d.payload["launches"]
        assert isinstance(launches, list) and launches, d.reason
        assert {str(x["pool_key"]).split("/")[0] for x in launches} == {lost_cloud}

    # 0 duplicate launches and 0 orphans, in both clouds.
    now_fleet = second_clouds.list_fleet(owner)
    assert {i.pool_key.split("/")[0] for i in now_fleet} == {"aws", "gcp"}
    launched = [iid for a in actions if a.kind == "launch" and a.status == "done"
                for iid in (a.result or {}).get("instance_ids") or []]  # fmt: skip
    assert len(launched) == len(set(launched)), "one instance recorded under two launches"
    counts = {
        a.idempotency_key: int(a.payload["request"]["count"]) for a in actions if a.kind == "launch"
    }
    per_key = Counter(i.tags.get(LAUNCH_KEY_TAG) for i in now_fleet)
    assert None not in per_key  # every instance carries its launch's key, in both clouds
    # The launch the kill cut off was sent again under its key and answered
    # with the instances the cloud had made (replayed), not new ones.
    assert any((a.result or {}).get("replayed") for a in actions if a.kind == "launch")
    for key, n in per_key.items():
        assert key in counts and n <= counts[key], (key, n)
    orphans = [i.instance_id for i in now_fleet if i.instance_id not in set(launched)]
    assert orphans == [], orphans
    second.stop()
