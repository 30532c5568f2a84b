"""AWS Health scheduled changes for EC2, from golden events written after the
documented schema (AWS Health User Guide, "AWS Health events Amazon
EventBridge schema"): one notice per affected instance of ours, its deadline
the change's start time; other services, categories and closed events are
not notices; the origin checks apply. Then the module's rule pattern on
moto's EventBridge really routes such an event to the queue."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import boto3
import pytest

from markets.aws.health import HEALTH_EVENT_PATTERN
from markets.aws.notices import MalformedMessage, RejectedNotice, SqsNotices, parse_message
from markets.cloud_fleet import NoticeKind
from tests.fakes.eventbridge import FULL_EVENT
from tests.unit.markets.aws.test_notices import ACCOUNT, CREDS, ORIGIN, REGION

SENT = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
START = datetime(2026, 3, 16, 5, 0, tzinfo=UTC)  # two weeks on, as for maintenance
A, B = "i-0123456789abcdef0", "i-0fedcba9876543210"
RETIREMENT_ARN = (
    "arn:aws:health:us-east-1::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/"
    "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED_ABC123-DEF456"
)


def health(
    code: str = "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
    instances: tuple[str, ...] = (A,),
    *,
    detail: dict[str, object] | None = None,
    **over: object,
) -> dict[str, object]:
    """An AWS Health event as EventBridge delivers it (the documented envelope)."""
    base: dict[str, object] = {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "AWS Health Event",
        "source": "aws.health",
        "account": ACCOUNT,
        "time": "2026-03-02T12:00:00Z",
        "region": REGION,
        "resources": list(instances),
        "detail": {
            "eventArn": RETIREMENT_ARN.replace("AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED", code),
            "service": "EC2",
            "eventTypeCode": code,
            "eventTypeCategory": "scheduledChange",
            "eventScopeCode": "ACCOUNT_SPECIFIC",
            "communicationId": "1234abc01232a4012345678-1",
            "startTime": "Mon, 16 Mar 2026 05:00:00 GMT",
            "endTime": "Mon, 16 Mar 2026 07:00:00 GMT",
            "lastUpdatedTime": "Mon, 02 Mar 2026 12:00:00 GMT",
            "statusCode": "upcoming",
            "eventRegion": REGION,
            "eventDescription": [
                {"language": "en_US", "latestDescription": "EC2 has detected degradation ..."}
            ],
            "affectedEntities": [{"entityValue": i} for i in instances],
        }
        | (detail or {}),
    }
    return base | over


def parse(doc: dict[str, object]) -> tuple[object, ...]:
    return parse_message(json.dumps(doc), "rh", ORIGIN)


def test_an_instance_retirement_is_a_notice_whose_deadline_is_the_start_time() -> None:
    (n,) = parse_message(json.dumps(health()), "rh", ORIGIN)
    assert (n.kind, n.instance_id, n.receipt) == (NoticeKind.SCHEDULED, A, "rh")
    assert n.at == SENT and n.deadline == START
    assert n.deadline - n.at == timedelta(days=13, hours=17)  # not two minutes


@pytest.mark.parametrize(
    "code",
    [
        "AWS_EC2_INSTANCE_STOP_SCHEDULED",
        "AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED",
        "AWS_EC2_SYSTEM_REBOOT_MAINTENANCE_SCHEDULED",
        "AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED",
    ],
)
def test_maintenance_and_stops_are_notices_too(code: str) -> None:
    (n,) = parse_message(json.dumps(health(code)), None, ORIGIN)
    assert n.kind is NoticeKind.SCHEDULED and n.deadline == START


def test_one_event_for_two_instances_is_two_notices_with_their_own_ids() -> None:
    notices = parse_message(json.dumps(health(instances=(A, B))), "rh", ORIGIN)
    assert [n.instance_id for n in notices] == [A, B]
    assert len({n.notice_id for n in notices}) == 2
    assert all(n.receipt == "rh" and n.deadline == START for n in notices)


def test_an_update_of_the_same_scheduled_change_keeps_the_notice_id() -> None:
    """AWS Health sends a new EventBridge event (new id) for each update;
    the instance is handled once per scheduled change."""
    (first,) = parse_message(json.dumps(health()), None, ORIGIN)
    (update,) = parse_message(json.dumps(health(detail={"statusCode": "open"})), None, ORIGIN)
    assert first.notice_id == update.notice_id and len(first.notice_id) <= 128
    other = health(detail={"eventArn": RETIREMENT_ARN + "-2"})
    (second,) = parse_message(json.dumps(other), None, ORIGIN)
    assert second.notice_id != first.notice_id


def test_an_iso_start_time_is_read_too() -> None:
    (n,) = parse_message(json.dumps(health(detail={"startTime": "2026-03-16T05:00:00Z"})))
    assert n.deadline == START


@pytest.mark.parametrize(
    "doc",
    [
        pytest.param(health(detail={"statusCode": "closed"}), id="closed"),
        pytest.param(health(detail={"service": "RDS"}), id="another-service"),
        pytest.param(health(detail={"eventTypeCategory": "issue"}), id="an-issue"),
        pytest.param(health(detail={"eventTypeCategory": "accountNotification"}), id="account"),
        pytest.param(
            health(detail={"affectedEntities": [{"entityValue": "vol-0123"}]}), id="no-instance"
        ),
    ],
)
def test_events_that_are_not_scheduled_changes_of_instances_are_not_notices(
    doc: dict[str, object],
) -> None:
    assert parse(doc) == ()


@pytest.mark.parametrize(
    ("doc", "check"),
    [
        pytest.param(health(account="210987654321"), "account", id="other-account"),
        pytest.param(health(region="eu-west-1"), "region", id="other-region"),
        pytest.param(
            health(detail={"eventRegion": "eu-west-1"}),
            "detail.eventRegion",
            id="other-event-region",
        ),
        pytest.param(health(resources=[]), "resources", id="entity-not-in-resources"),
        pytest.param(health(instances=(A, B), resources=[A]), "resources", id="one-missing"),
    ],
)
def test_a_health_event_not_from_us_is_rejected(doc: dict[str, object], check: str) -> None:
    with pytest.raises(RejectedNotice) as e:
        parse(doc)
    assert e.value.field == check


@pytest.mark.parametrize(
    "doc",
    [
        pytest.param(health(detail={"startTime": "soon"}), id="bad-start"),
        pytest.param(health(detail={"startTime": None}), id="no-start"),
        pytest.param(health(detail={"eventArn": None}), id="no-arn"),
        pytest.param(health(detail={"affectedEntities": "i-1"}), id="entities-not-a-list"),
        pytest.param(
            health(detail={"affectedEntities": [{"entityValue": "i-1; DROP"}]}), id="bad-id"
        ),
        pytest.param({**health(), "detail": []}, id="detail-not-an-object"),
    ],
)
def test_an_unreadable_health_event_is_malformed(doc: dict[str, object]) -> None:
    with pytest.raises(MalformedMessage):
        parse(doc)


def test_the_modules_rule_routes_a_health_event_to_the_queue(moto_server: str) -> None:
    kw = {"region_name": REGION, "endpoint_url": moto_server, **CREDS}
    events, sqs = boto3.client("events", **kw), boto3.client("sqs", **kw)  # type: ignore[call-overload]
    suffix = uuid.uuid4().hex[:10]
    url = sqs.create_queue(QueueName=f"health-{suffix}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    rule = f"spotfolio-health-{suffix}"
    events.put_rule(Name=rule, EventPattern=json.dumps(HEALTH_EVENT_PATTERN), State="ENABLED")
    target = {"Id": "notices", "Arn": arn, "InputTransformer": FULL_EVENT}
    events.put_targets(Rule=rule, Targets=[target])
    try:
        doc = health(instances=(A, B))
        issue = health(detail={"eventTypeCategory": "issue"})
        entries = [
            {
                "Source": "aws.health",
                "DetailType": "AWS Health Event",
                "Detail": json.dumps(d["detail"]),
                "Resources": [A, B],
                "Time": SENT,
            }
            for d in (doc, issue)
        ]
        assert events.put_events(Entries=entries)["FailedEntryCount"] == 0
        notices = SqsNotices(sqs, url, origin=ORIGIN, wait_time_s=0)
        got = notices.poll(10)
        # The issue never reached the queue: the rule's pattern filtered it.
        assert notices.stats.received == 1
        assert sorted((n.instance_id, n.deadline) for n in got) == [(A, START), (B, START)]
        # Both notices share the message's receipt: acking each is harmless.
        for n in got:
            notices.ack(n)
        assert notices.poll(10) == [] and notices.stats.received == 1
    finally:
        events.remove_targets(Rule=rule, Ids=["notices"])
        events.delete_rule(Name=rule)
        sqs.delete_queue(QueueUrl=url)
