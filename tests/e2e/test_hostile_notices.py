"""End to end through moto's HTTP server, the production daemon with the AWS
provider, against hostile queue messages: a poison message beside a genuine
interruption warning in one batch (the warning is decided inside its window;
the poison is counted and left on the queue), spoofed warnings (never
decided, counted as rejected), a notice id carrying a newline (one log line),
and an AWS Health retirement (decided, the instance held as going until the
retirement's start time)."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest

from broker.daemon.config import DaemonConfig
from broker.daemon.daemon import Daemon
from broker.daemon.metrics import DaemonMetrics
from broker.daemon.store.store import Store
from broker.daemon.wiring import default_lifecycle
from markets.aws.provider import AwsProvider, open_aws_provider
from markets.clock import ManualClock
from markets.cloud_fleet import Instance
from markets.model import Tier
from policies.workloads.spec import parse_workloads
from tests.fakes.tiny_market import T0, TinyMarket

REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's
AMI = "ami-03cf127a"
CREDS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
INTERRUPTION = "EC2 Spot Instance Interruption Warning"
HUGE_INT = "9" * 5000


@pytest.fixture(autouse=True)
def _no_real_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


@dataclass
class Account:
    daemon: Daemon
    provider: AwsProvider
    store: Store
    metrics: DaemonMetrics
    clock: ManualClock
    sqs: Any
    url: str
    owner: str
    victim: Instance

    def send(self, body: str) -> None:
        self.sqs.send_message(QueueUrl=self.url, MessageBody=body)

    def decisions(self, notice_id: str) -> list[Any]:
        with self.store.transaction() as tx:
            return list(tx.decisions(self.owner, notice_id=notice_id))

    def left_on_queue(self) -> int:
        reply = self.sqs.receive_message(
            QueueUrl=self.url, MaxNumberOfMessages=10, WaitTimeSeconds=0, VisibilityTimeout=0
        )
        return len(reply.get("Messages", []))


@pytest.fixture
def account(moto_server: str, tmp_path: Path) -> Iterator[Account]:
    """A started daemon (its fleet launched on moto) reading its own queue.
    The queue is written straight to (what EventBridge would deliver), so
    the test chooses every byte of every body."""
    sqs = boto3.client("sqs", region_name=REGION, endpoint_url=moto_server, **CREDS)  # type: ignore[call-overload]
    url = sqs.create_queue(QueueName=f"hostile-{uuid.uuid4().hex[:10]}")["QueueUrl"]
    owner = f"e2e-{uuid.uuid4().hex[:10]}"
    clock = ManualClock(T0)
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
        notice_visibility_timeout_s=0,
    )
    assert isinstance(provider, AwsProvider)
    store = Store(config.store_url)
    metrics = DaemonMetrics()
    daemon = Daemon(config, provider, TinyMarket(), store,
                    default_lifecycle(workloads, clock, config), clock, workloads=workloads,
                    metrics=metrics, sleep=clock.advance)  # type: ignore[arg-type]  # fmt: skip
    daemon.start()
    spot = [i for i in provider.list_fleet(owner) if i.tier is Tier.SPOT]
    assert spot, "the plan should hold some spot"
    clock.advance(30)
    yield Account(daemon, provider, store, metrics, clock, sqs, url, owner, spot[0])
    store.close()
    sqs.delete_queue(QueueUrl=url)


def warning(instance_id: str, at: datetime, **over: object) -> dict[str, object]:
    doc: dict[str, object] = {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": INTERRUPTION,
        "source": "aws.ec2",
        "account": ACCOUNT,
        "time": at.isoformat().replace("+00:00", "Z"),
        "region": REGION,
        "resources": [f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/{instance_id}"],
        "detail": {"instance-id": instance_id, "instance-action": "terminate"},
    }
    return doc | over


def test_a_poison_message_beside_a_warning_leaves_the_warning_decided_inside_its_window(
    account: Account,
) -> None:
    a = account
    sent = a.clock.now()
    genuine = warning(a.victim.instance_id, sent)
    poison = json.dumps(warning(a.victim.instance_id, sent))[:-1] + f', "n": {HUGE_INT}}}'
    deep = "[" * 60_000 + "]" * 60_000
    entries = [
        {"Id": "poison", "MessageBody": poison},
        {"Id": "deep", "MessageBody": deep},
        {"Id": "genuine", "MessageBody": json.dumps(genuine)},
    ]
    assert not a.sqs.send_message_batch(QueueUrl=a.url, Entries=entries).get("Failed")
    a.clock.advance(2)
    a.daemon.poll_notices()
    (decision,) = a.decisions(str(genuine["id"]))
    assert decision.kind == "replace", decision.reason
    made = decision.created_at.replace(tzinfo=sent.tzinfo)
    assert made <= sent + timedelta(seconds=120)
    assert a.daemon.window_missed == 0
    # Both poisons counted, neither deleted: they wait for the redrive policy.
    dropped = "spotfolio_notices_dropped_total"
    assert a.metrics.value(dropped, {"reason": "malformed"}) == 2
    assert a.left_on_queue() == 2


@pytest.mark.parametrize(
    "over",
    [
        pytest.param({"account": "210987654321"}, id="other-account"),
        pytest.param({"region": "eu-west-1"}, id="other-region"),
        pytest.param({"resources": []}, id="no-instance-arn"),
        pytest.param(
            {"resources": [f"arn:aws:ec2:{REGION}:210987654321:instance/i-0123456789abcdef0"]},
            id="arn-of-another-account",
        ),
    ],
)
def test_a_spoofed_warning_is_never_decided_and_is_counted_as_rejected(
    account: Account, over: dict[str, object]
) -> None:
    a = account
    spoof = warning(a.victim.instance_id, a.clock.now(), **over)
    if over.get("resources"):
        # the ARN of another account, but naming our instance
        spoof["resources"] = [str(r).replace("i-0123456789abcdef0", a.victim.instance_id)
                              for r in over["resources"]]  # type: ignore[attr-defined]  # fmt: skip
    before = {i.instance_id for i in a.provider.list_fleet(a.owner)}
    a.send(json.dumps(spoof))
    a.daemon.poll_notices()
    assert a.decisions(str(spoof["id"])) == []
    assert {i.instance_id for i in a.provider.list_fleet(a.owner)} == before
    assert a.metrics.value("spotfolio_notices_dropped_total", {"reason": "rejected"}) == 1
    assert a.left_on_queue() == 1  # for the dead-letter queue and its alarm


def test_a_newline_in_a_notice_id_cannot_write_a_second_log_line(
    account: Account, caplog: pytest.LogCaptureFixture
) -> None:
    a = account
    forged = "decision notice=evil kind=replace workload=sweeps"
    doc = warning(a.victim.instance_id, a.clock.now(), id=f"n-{uuid.uuid4().hex[:8]}\n{forged}")
    a.send(json.dumps(doc))
    with caplog.at_level(logging.INFO):
        a.daemon.poll_notices()
    (decision,) = a.decisions(str(doc["id"]))  # handled, under its own id
    ours = [r for r in caplog.records if r.name.startswith(("spotfolio", "markets", "broker"))]
    text = "\n".join(logging.Formatter("%(message)s").format(r) for r in ours)
    lines = text.splitlines()
    assert not [line for line in lines if line.startswith(forged)]
    mentions = [line for line in lines if forged in line]
    assert len(mentions) == 1 and "\\x0a" in mentions[0]
    assert decision.kind == "replace"


def test_an_aws_health_retirement_is_decided_and_its_instance_held_until_the_start(
    account: Account,
) -> None:
    a = account
    start = a.clock.now() + timedelta(days=14)
    event_arn = (
        f"arn:aws:health:{REGION}::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/"
        f"AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED_{uuid.uuid4().hex[:12]}"
    )
    doc = {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "AWS Health Event",
        "source": "aws.health",
        "account": ACCOUNT,
        "region": REGION,
        "time": a.clock.now().isoformat().replace("+00:00", "Z"),
        "resources": [a.victim.instance_id],
        "detail": {
            "eventArn": event_arn,
            "service": "EC2",
            "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
            "eventTypeCategory": "scheduledChange",
            "statusCode": "upcoming",
            "startTime": start.strftime("%a, %d %b %Y %H:%M:%S GMT"),
            "eventRegion": REGION,
            "affectedEntities": [{"entityValue": a.victim.instance_id}],
        },
    }
    a.send(json.dumps(doc))
    a.daemon.poll_notices()
    with a.store.transaction() as tx:
        mine = [d for d in tx.decisions(a.owner) if str(d.notice_id).startswith("health/")]
    (decision,) = mine
    assert a.victim.instance_id in str(decision.notice_id)
    assert decision.kind in {"replace", "break_glass"}, decision.reason
    # Held as going until the retirement's start, not for two minutes.
    book = a.daemon.book
    assert a.victim.instance_id in book.doomed_ids(a.clock.now() + timedelta(days=13))
    assert book.doomed[a.victim.instance_id] == start
    assert a.left_on_queue() == 0  # handled, then acknowledged
