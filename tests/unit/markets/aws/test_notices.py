"""EC2 notices: parsing the documented event shapes, and EventBridge -> SQS
end to end through moto's HTTP server (moto[events] really delivers a
``put_events`` entry to the SQS target of a matching rule).

Event bodies below follow the examples in the EC2 User Guide ("Spot Instance
interruption notices", "EC2 instance rebalance recommendations", "State
change events for Amazon EC2 instances").
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypedDict

import boto3
import pytest
from botocore.stub import Stubber

from markets.aws.notices import (
    DETAIL_TYPES,
    MalformedMessage,
    NoticeOrigin,
    SqsNotices,
    parse_message,
)
from markets.aws.provider import AwsProvider, open_aws_provider
from markets.cloud_fleet import OWNER_TAG, InstanceState, LaunchRequest, Notice, NoticeKind
from markets.errors import InputError, ThrottledError
from markets.model import Tier
from tests.fakes.eventbridge import FULL_EVENT

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

REGION = "us-east-1"


class _Creds(TypedDict):
    aws_access_key_id: str
    aws_secret_access_key: str


CREDS: _Creds = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
AMI = "ami-03cf127a"


def event(detail_type: str, detail: dict[str, str], **over: object) -> dict[str, object]:
    """An EventBridge event as EC2 emits it (the documented envelope)."""
    base: dict[str, object] = {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": detail_type,
        "source": "aws.ec2",
        "account": "123456789012",
        "time": "2026-03-02T12:00:00Z",
        "region": REGION,
        "resources": [f"arn:aws:ec2:{REGION}:123456789012:instance/{detail['instance-id']}"],
        "detail": detail,
    }
    return base | over


ACCOUNT = "123456789012"  # moto's default account, and the events' here
ORIGIN = NoticeOrigin(ACCOUNT, frozenset({REGION}))


def parse_event(body: str, receipt: str | None = None) -> Notice | None:
    """The one notice of an EC2 event body (``None``: not ours), checked
    against ``ORIGIN``."""
    notices = parse_message(body, receipt, ORIGIN)
    assert len(notices) <= 1
    return notices[0] if notices else None


INTERRUPTION = "EC2 Spot Instance Interruption Warning"
REBALANCE = "EC2 Instance Rebalance Recommendation"
STATE = "EC2 Instance State-change Notification"


@pytest.fixture(autouse=True)
def _no_real_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """Never reach real AWS from a test, whatever the environment holds."""
    for var in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


# -- parsing -------------------------------------------------------------------


def test_interruption_warning_deadline_is_two_minutes_after_the_event() -> None:
    e = event(INTERRUPTION, {"instance-id": "i-1", "instance-action": "terminate"})
    n = parse_event(json.dumps(e), "rh-1")
    assert n is not None
    assert (n.notice_id, n.kind, n.instance_id, n.receipt) == (
        e["id"],
        NoticeKind.INTERRUPTION,
        "i-1",
        "rh-1",
    )
    assert n.at == T0 and n.deadline == T0 + timedelta(seconds=120)


def test_hibernation_has_no_two_minute_window() -> None:
    e = event(INTERRUPTION, {"instance-id": "i-1", "instance-action": "hibernate"})
    n = parse_event(json.dumps(e))
    assert n is not None and n.deadline == n.at == T0


def test_rebalance_recommendation_has_no_deadline() -> None:
    n = parse_event(json.dumps(event(REBALANCE, {"instance-id": "i-2"})))
    assert n is not None and n.kind is NoticeKind.REBALANCE and n.deadline is None


@pytest.mark.parametrize(
    ("ec2_state", "ours"),
    [
        pytest.param("pending", InstanceState.PENDING, id="pending"),
        pytest.param("running", InstanceState.RUNNING, id="running"),
        pytest.param("stopping", InstanceState.STOPPING, id="stopping"),
        pytest.param("stopped", InstanceState.STOPPING, id="stopped"),
        pytest.param("shutting-down", InstanceState.TERMINATED, id="shutting-down"),
        pytest.param("terminated", InstanceState.TERMINATED, id="terminated"),
    ],
)
def test_state_change_carries_the_state(ec2_state: str, ours: InstanceState) -> None:
    n = parse_event(json.dumps(event(STATE, {"instance-id": "i-3", "state": ec2_state})))
    assert n is not None and n.kind is NoticeKind.STATE_CHANGE and n.state is ours


def test_an_event_relayed_through_sns_is_unwrapped() -> None:
    inner = event(REBALANCE, {"instance-id": "i-4"})
    envelope = {"Type": "Notification", "MessageId": "m", "Message": json.dumps(inner)}
    n = parse_event(json.dumps(envelope))
    assert n is not None and n.notice_id == inner["id"]


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(
            json.dumps(event(INTERRUPTION, {"instance-id": "i-1"}, source="aws.s3")),
            id="other-source",
        ),
        pytest.param(
            json.dumps(event("EC2 Instance Launch Successful", {"instance-id": "i-1"})),
            id="other-detail-type",
        ),
    ],
)
def test_events_that_are_certainly_not_ours_parse_to_none(body: str) -> None:
    assert parse_event(body) is None


@pytest.mark.parametrize(
    "body",
    [
        pytest.param("not json", id="not-json"),
        pytest.param("[1, 2]", id="not-an-object"),
        pytest.param('{"hello": "world"}', id="not-an-event"),
        pytest.param(json.dumps(event(REBALANCE, {"instance-id": ""})), id="empty-instance-id"),
        pytest.param(
            json.dumps(event(REBALANCE, {"instance-id": "i-1"}, time="yesterday")), id="bad-time"
        ),
        pytest.param(json.dumps(event(REBALANCE, {"instance-id": "i-1"}, id=None)), id="no-id"),
        pytest.param(
            json.dumps(event(STATE, {"instance-id": "i-1", "state": "exploded"})),
            id="unknown-state",
        ),
        pytest.param(
            json.dumps({**event(REBALANCE, {"instance-id": "i-1"}), "detail": "i-1"}),
            id="detail-not-object",
        ),
    ],
)
def test_malformed_messages_raise_malformed(body: str) -> None:
    with pytest.raises(MalformedMessage):
        parse_event(body)


# -- EventBridge -> SQS through moto ------------------------------------------


@dataclass
class Wiring:
    # Any: only boto3-stubs[ec2,pricing,sqs] are installed, so boto3-stubs
    # type an EventBridge client as Any.
    events: Any
    sqs: SQSClient
    queue_url: str


@pytest.fixture
def wiring(moto_server: str) -> Iterator[Wiring]:
    """The rule the Terraform module creates: source aws.ec2, the three
    detail-types, target = the notice queue. Removed afterwards (rules on the
    default bus are shared by the session)."""
    events = boto3.client("events", region_name=REGION, endpoint_url=moto_server, **CREDS)
    sqs = boto3.client("sqs", region_name=REGION, endpoint_url=moto_server, **CREDS)
    suffix = uuid.uuid4().hex[:10]
    url = sqs.create_queue(QueueName=f"notices-{suffix}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    rule = f"spotfolio-ec2-{suffix}"
    pattern = {"source": ["aws.ec2"], "detail-type": sorted(DETAIL_TYPES)}
    events.put_rule(Name=rule, EventPattern=json.dumps(pattern), State="ENABLED")
    # FULL_EVENT: moto's default delivery drops the event's account (see there).
    target = {"Id": "notices", "Arn": arn, "InputTransformer": FULL_EVENT}
    events.put_targets(Rule=rule, Targets=[target])
    yield Wiring(events, sqs, url)
    events.remove_targets(Rule=rule, Ids=["notices"])
    events.delete_rule(Name=rule)
    sqs.delete_queue(QueueUrl=url)


def put(w: Wiring, *events: tuple[str, dict[str, str]]) -> list[str]:
    """Emit EC2 events (detail-type, detail) on the default bus the way EC2
    would, at T0; their event ids. moto takes ~0.5 s per entry here (it
    builds JSONPath parsers per target), so only the tests about delivery
    itself go through EventBridge; the rest write the same bodies to SQS."""
    entries = [
        {
            "Source": "aws.ec2",
            "DetailType": detail_type,
            "Detail": json.dumps(detail),
            "Resources": [f"arn:aws:ec2:{REGION}:123456789012:instance/{detail['instance-id']}"],
            "Time": T0,
        }
        for detail_type, detail in events
    ]
    reply = w.events.put_events(Entries=entries)
    assert reply["FailedEntryCount"] == 0
    return [str(e["EventId"]) for e in reply["Entries"]]


def send(w: Wiring, *bodies: str) -> None:
    """Write message bodies straight to the queue (what EventBridge would)."""
    for body in bodies:
        w.sqs.send_message(QueueUrl=w.queue_url, MessageBody=body)


def reader(w: Wiring, visibility_timeout_s: int = 30) -> SqsNotices:
    return SqsNotices(
        w.sqs,
        w.queue_url,
        origin=ORIGIN,
        wait_time_s=0,
        visibility_timeout_s=visibility_timeout_s,
    )


def test_interruption_put_on_eventbridge_reaches_the_poller_and_ack_deletes_it(
    wiring: Wiring,
) -> None:
    (event_id,) = put(
        wiring, (INTERRUPTION, {"instance-id": "i-0abc", "instance-action": "terminate"})
    )
    notices = reader(wiring, visibility_timeout_s=0)
    (n,) = notices.poll()
    assert n.notice_id == event_id and n.kind is NoticeKind.INTERRUPTION
    assert n.instance_id == "i-0abc"
    assert n.at == T0 and n.deadline == T0 + timedelta(seconds=120)
    # Not acked, visibility 0: it comes straight back, same id.
    (again,) = notices.poll()
    assert again.notice_id == event_id
    notices.ack(again)
    assert notices.poll() == []
    assert notices.stats.acked == 1 and notices.stats.notices == 2


def test_all_three_detail_types_arrive_as_their_kinds(wiring: Wiring) -> None:
    put(
        wiring,
        (INTERRUPTION, {"instance-id": "i-1", "instance-action": "stop"}),
        (REBALANCE, {"instance-id": "i-2"}),
        (STATE, {"instance-id": "i-3", "state": "shutting-down"}),
    )
    got = {n.instance_id: n for n in reader(wiring).poll(10)}
    assert {i: n.kind for i, n in got.items()} == {
        "i-1": NoticeKind.INTERRUPTION,
        "i-2": NoticeKind.REBALANCE,
        "i-3": NoticeKind.STATE_CHANGE,
    }
    assert got["i-3"].state is InstanceState.TERMINATED


def test_a_duplicate_message_gives_the_same_notice_id(wiring: Wiring) -> None:
    body = json.dumps(event(INTERRUPTION, {"instance-id": "i-9", "instance-action": "terminate"}))
    send(wiring, body, body)
    notices = reader(wiring).poll(10)
    assert len(notices) == 2
    assert notices[0].notice_id == notices[1].notice_id
    assert notices[0].receipt != notices[1].receipt  # each copy is acked on its own


def test_a_malformed_message_is_counted_left_for_redrive_and_the_rest_still_arrive(
    wiring: Wiring,
) -> None:
    send(wiring, "{truncated", json.dumps(event(REBALANCE, {"instance-id": "i-5"})))
    notices = reader(wiring, visibility_timeout_s=0)
    (n,) = notices.poll(10)
    assert n.instance_id == "i-5"
    assert notices.stats.malformed == 1
    notices.ack(n)
    # Not deleted: it is received again (the queue's redrive policy retires it).
    assert notices.poll(10) == [] and notices.stats.malformed == 2


def test_a_foreign_event_is_deleted_at_once(wiring: Wiring) -> None:
    foreign = event("AWS API Call via CloudTrail", {"instance-id": "i-1"}, source="aws.ec2")
    send(wiring, json.dumps(foreign))
    notices = reader(wiring, visibility_timeout_s=0)
    assert notices.poll(10) == [] and notices.stats.foreign == 1
    assert notices.poll(10) == [] and notices.stats.received == 1  # gone from the queue


def test_a_poll_for_more_than_ten_drains_in_several_receives(wiring: Wiring) -> None:
    send(wiring, *(json.dumps(event(REBALANCE, {"instance-id": f"i-{i}"})) for i in range(23)))
    notices = reader(wiring)
    got = notices.poll(50)
    assert sorted(n.instance_id for n in got) == sorted(f"i-{i}" for i in range(23))
    assert len({n.notice_id for n in got}) == 23


# -- faults, with Stubber ------------------------------------------------------


def stubbed() -> tuple[SqsNotices, Stubber]:
    client = boto3.client("sqs", region_name=REGION, **CREDS)
    stub = Stubber(client)
    stub.activate()
    url = "https://sqs.us-east-1.amazonaws.com/123456789012/q"
    return SqsNotices(client, url, origin=ORIGIN), stub


def test_ack_with_an_expired_receipt_is_logged_not_raised() -> None:
    notices, stub = stubbed()
    stub.add_client_error("delete_message", service_error_code="ReceiptHandleIsInvalid")
    n = parse_event(json.dumps(event(REBALANCE, {"instance-id": "i-1"})), "old-receipt")
    assert n is not None
    notices.ack(n)
    assert notices.stats.stale_receipts == 1 and notices.stats.acked == 0


def test_ack_on_a_missing_queue_is_an_input_error() -> None:
    notices, stub = stubbed()
    stub.add_client_error(
        "delete_message", service_error_code="QueueDoesNotExist", http_status_code=400
    )
    n = parse_event(json.dumps(event(REBALANCE, {"instance-id": "i-1"})), "r")
    assert n is not None
    with pytest.raises(InputError):
        notices.ack(n)


def test_throttled_receive_raises_throttled() -> None:
    notices, stub = stubbed()
    stub.add_client_error("receive_message", service_error_code="RequestThrottled")
    with pytest.raises(ThrottledError):
        notices.poll()


def test_bad_poller_settings_are_refused() -> None:
    client = boto3.client("sqs", region_name=REGION, **CREDS)
    with pytest.raises(ValueError, match="wait_time_s"):
        SqsNotices(client, "https://q", origin=ORIGIN, wait_time_s=21)
    with pytest.raises(ValueError, match="visibility_timeout_s"):
        SqsNotices(client, "https://q", origin=ORIGIN, visibility_timeout_s=-1)


# -- through the provider: pool keys, and notices about others' instances ------


def test_provider_fills_pool_keys_and_drops_notices_about_instances_not_ours(
    wiring: Wiring, moto_server: str
) -> None:
    owner = f"test-{uuid.uuid4().hex[:12]}"
    provider = open_aws_provider(
        owner=owner,
        endpoint_url=moto_server,
        launch={REGION: {"image_id": AMI}},
        queue_url=wiring.queue_url,
        notice_wait_s=0,
        notice_visibility_timeout_s=0,
    )
    assert isinstance(provider, AwsProvider)
    pool = f"aws/{REGION}/us-east-1a/g5.xlarge"
    (ours,) = provider.launch(
        LaunchRequest(
            idempotency_key=f"k-{uuid.uuid4().hex[:12]}",
            pool_key=pool,
            tier=Tier.SPOT,
            workload="w",
            count=1,
            owner=owner,
            plan_generation=1,
        )
    ).instance_ids
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=moto_server, **CREDS)
    theirs = ec2.run_instances(
        ImageId=AMI,
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": OWNER_TAG, "Value": "someone-else"}]}
        ],
    )["Instances"][0]["InstanceId"]
    detail = {"instance-action": "terminate"}
    send(
        wiring,
        *(
            json.dumps(event(INTERRUPTION, detail | {"instance-id": i}))
            for i in (ours, theirs, "i-00000000000000000")
        ),
    )
    got = {n.instance_id: n for n in provider.poll_notices(10)}
    assert set(got) == {ours, "i-00000000000000000"}
    assert got[ours].pool_key == pool
    assert got["i-00000000000000000"].pool_key is None  # unknown: the broker decides
    assert provider.foreign_notices == 1
    # The foreign one was acked: with visibility 0 only the other two return.
    assert {n.instance_id for n in provider.poll_notices(10)} == set(got)
