"""End to end through moto's HTTP server: the production daemon, store and
lifecycle manager with the AWS provider. An EC2 spot interruption warning put
on EventBridge reaches the SQS queue (moto[events] really delivers), the
daemon polls it, decides within the 2-minute window, records the decision,
launches the replacement through RunInstances with a fresh idempotency key,
and only then deletes the message."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest

from broker.daemon.config import DaemonConfig
from broker.daemon.daemon import Daemon
from broker.daemon.metrics import DaemonMetrics
from broker.daemon.store.store import Store
from broker.daemon.wiring import default_lifecycle
from markets.aws.provider import open_aws_provider
from markets.clock import ManualClock
from markets.cloud_fleet import NoticeKind
from markets.model import Tier
from policies.workloads.spec import parse_workloads
from tests.fakes.eventbridge import FULL_EVENT
from tests.fakes.tiny_market import T0, TinyMarket

REGION = "us-east-1"
AMI = "ami-03cf127a"  # one of moto's built-in us-east-1 images
CREDS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
INTERRUPTION = "EC2 Spot Instance Interruption Warning"


@pytest.fixture(autouse=True)
def _no_real_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


@pytest.fixture
def queue(moto_server: str) -> Iterator[tuple[Any, Any, str]]:
    kw: dict[str, Any] = {"region_name": REGION, "endpoint_url": moto_server, **CREDS}
    events, sqs = boto3.client("events", **kw), boto3.client("sqs", **kw)
    suffix = uuid.uuid4().hex[:10]
    url = sqs.create_queue(QueueName=f"e2e-{suffix}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    rule = f"spotfolio-e2e-{suffix}"
    pattern = {
        "source": ["aws.ec2"],
        "detail-type": [
            INTERRUPTION,
            "EC2 Instance Rebalance Recommendation",
            "EC2 Instance State-change Notification",
        ],
    }
    events.put_rule(Name=rule, EventPattern=json.dumps(pattern), State="ENABLED")
    # FULL_EVENT: moto's default delivery drops the event's account (see there).
    target = {"Id": "notices", "Arn": arn, "InputTransformer": FULL_EVENT}
    events.put_targets(Rule=rule, Targets=[target])
    yield events, sqs, url
    events.remove_targets(Rule=rule, Ids=["notices"])
    events.delete_rule(Name=rule)
    sqs.delete_queue(QueueUrl=url)


def test_interruption_on_eventbridge_is_replaced_in_another_pool_within_the_window(
    moto_server: str, queue: tuple[Any, Any, str], tmp_path: Path
) -> None:
    events, sqs, url = queue
    owner = f"e2e-{uuid.uuid4().hex[:10]}"
    clock = ManualClock(T0)
    market = TinyMarket()  # three us-east-1 zones of p3.2xlarge
    workloads = parse_workloads(
        {
            "workloads": [
                {
                    "name": "sweeps",
                    "class": "batch",
                    "instance_types": ["p3.2xlarge"],
                    "unit_hours": 1000,
                    "deadline_hours": 500,
                    "max_units": 4,
                    "max_zone_share": 0.5,
                    "max_pool_share": 0.5,
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
            "provider": "aws",
        }
    )
    provider = open_aws_provider(
        owner=owner,
        launch={REGION: {"image_id": AMI}},
        queue_url=url,
        queue_region=REGION,
        endpoint_url=moto_server,
        notice_wait_s=0,
    )
    store = Store(config.store_url)
    daemon = Daemon(config, provider, market, store, default_lifecycle(workloads, clock, config),
                    clock, workloads=workloads, metrics=DaemonMetrics(),
                    sleep=clock.advance)  # type: ignore[arg-type]  # fmt: skip
    daemon.start()
    fleet = provider.list_fleet(owner)
    spot = [i for i in fleet if i.tier is Tier.SPOT]
    assert spot, f"the plan should hold some spot: {fleet}"
    victim = spot[0]

    clock.advance(30)
    sent_at = clock.now()
    reply = events.put_events(
        Entries=[
            {
                "Source": "aws.ec2",
                "DetailType": INTERRUPTION,
                "Detail": json.dumps(
                    {"instance-id": victim.instance_id, "instance-action": "terminate"}
                ),
                "Resources": [f"arn:aws:ec2:{REGION}:123456789012:instance/{victim.instance_id}"],
                "Time": sent_at,
            }
        ]
    )
    assert reply["FailedEntryCount"] == 0
    event_id = reply["Entries"][0]["EventId"]

    clock.advance(2)
    assert daemon.poll_notices() >= 1
    with store.transaction() as tx:
        decisions = tx.decisions(owner, notice_id=event_id)
    assert len(decisions) == 1
    decision = decisions[0]
    assert decision.kind == "replace", decision.reason
    # decided inside the 120 s notice window (simulated time: the daemon's clock)
    assert decision.created_at.replace(tzinfo=sent_at.tzinfo) <= sent_at + timedelta(seconds=120)
    after = {i.instance_id: i for i in provider.list_fleet(owner)}
    if decision.kind == "replace":
        new = [i for i in after.values() if i.instance_id not in {f.instance_id for f in fleet}]
        assert new, "a replacement was launched"
        assert all(i.pool_key != victim.pool_key for i in new)
    # the message was deleted only after the decision was durable: nothing left
    left = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0, VisibilityTimeout=0)
    assert "Messages" not in left
    # the same notice again (EventBridge delivers at least once): no new decision
    victim_arn = f"arn:aws:ec2:{REGION}:123456789012:instance/{victim.instance_id}"
    sqs.send_message(
        QueueUrl=url,
        MessageBody=json.dumps(
            {
                "version": "0",
                "id": event_id,
                "detail-type": INTERRUPTION,
                "source": "aws.ec2",
                "account": "123456789012",
                "time": T0.isoformat().replace("+00:00", "Z"),
                "region": REGION,
                "resources": [victim_arn],
                "detail": {"instance-id": victim.instance_id, "instance-action": "terminate"},
            }
        ),
    )
    before = sum(1 for _ in after)
    daemon.poll_notices()
    with store.transaction() as tx:
        assert len(tx.decisions(owner, notice_id=event_id)) == 1
    assert len(provider.list_fleet(owner)) == before
    assert NoticeKind.INTERRUPTION.value == "interruption"
