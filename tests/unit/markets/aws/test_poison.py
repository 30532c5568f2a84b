"""Hostile message bodies on the notice queue: the parser turns every one into
``MalformedMessage`` (never another exception), and the poller, reading real
SQS through moto's HTTP server, counts it, logs its message id (not its body),
leaves it for the redrive policy and still returns the rest of the batch."""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import TYPE_CHECKING

import boto3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from markets.aws.envelope import MAX_BODY_CHARS, MalformedMessage, RejectedNotice
from markets.aws.notices import POLL_MESSAGES_PER_NOTICE, SqsNotices, parse_message
from markets.cloud_fleet import NoticeKind
from tests.unit.markets.aws.test_notices import CREDS, INTERRUPTION, ORIGIN, REGION, T0, event

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


def warning(instance_id: str = "i-0123456789abcdef0") -> str:
    detail = {"instance-id": instance_id, "instance-action": "terminate"}
    return json.dumps(event(INTERRUPTION, detail))


def _deep(depth: int) -> str:
    """A genuine warning whose detail holds a ``depth``-deep array."""
    body = warning()
    return body[:-1] + ', "extra": ' + "[" * depth + "]" * depth + "}"


HUGE_INT = "9" * 5000  # past Python's 4,300-digit int-string limit: ValueError
POISON = [
    pytest.param(body, id=name)
    for name, body in [
        ("5000-digit-int", warning()[:-1] + f', "n": {HUGE_INT}}}'),
        ("5000-digit-int-alone", HUGE_INT),
        ("60000-deep-array", "[" * 60_000 + "]" * 60_000),
        ("60000-deep-in-a-warning", _deep(60_000)),
        ("60000-deep-object", '{"a":' * 60_000 + "1" + "}" * 60_000),
        ("over-256-KiB", warning()[:-1] + ', "pad": "' + "x" * MAX_BODY_CHARS + '"}'),
        (
            "nested-sns",
            json.dumps(
                {
                    "Type": "Notification",
                    "Message": json.dumps({"Type": "Notification", "Message": warning()}),
                }
            ),
        ),
        ("sns-message-not-text", json.dumps({"Type": "Notification", "Message": [1]})),
        ("id-is-a-number", warning().replace('"id": "', '"id": 1, "x": "', 1)),
        (
            "id-over-128-chars",
            json.dumps(event(INTERRUPTION, {"instance-id": "i-1"}, id="a" * 129)),
        ),
        ("instance-id-not-an-id", json.dumps(event(INTERRUPTION, {"instance-id": "i-1 OR 1=1"}))),
        (
            "instance-id-a-list",
            json.dumps(
                {**event(INTERRUPTION, {"instance-id": "i-1"}), "detail": {"instance-id": ["i-1"]}}
            ),
        ),
        ("time-is-a-number", json.dumps(event(INTERRUPTION, {"instance-id": "i-1"}, time=1e308))),
        ("id-is-nan", warning().replace('"id": "', '"id": NaN, "x": "', 1)),
        ("lone-surrogate", warning().replace("terminate", "\\ud800")[:-1] + ', "id": "\\udfff"}'),
        ("nul-bytes", "\x00" * 1000),
        ("empty", ""),
    ]
]


@pytest.mark.parametrize("body", POISON)
def test_any_poison_body_is_malformed_never_another_error(body: str) -> None:
    with pytest.raises(MalformedMessage):
        parse_message(body, "r", ORIGIN)


def test_a_deep_array_leaves_the_recursion_limit_as_it_was() -> None:
    limit = sys.getrecursionlimit()
    with pytest.raises(MalformedMessage, match="nested too deeply"):
        parse_message("[" * 60_000 + "]" * 60_000)
    assert sys.getrecursionlimit() == limit


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner),
        max_leaves=30,
    ),
    st.sampled_from(["id", "time", "detail", "account", "region", "resources", "source"]),
)
def test_a_genuine_warning_with_any_field_replaced_parses_or_is_malformed_or_rejected(
    value: object, key: str
) -> None:
    doc = event(INTERRUPTION, {"instance-id": "i-0abc", "instance-action": "terminate"})
    doc[key] = value
    try:
        body = json.dumps(doc)
    except ValueError:  # a float json cannot write (nan is written; fine)
        return
    with contextlib.suppress(MalformedMessage, RejectedNotice):
        parse_message(body, "r", ORIGIN)


# -- the poller, on moto's SQS ---------------------------------------------------


@pytest.fixture
def queue(moto_server: str) -> Iterator[tuple[SQSClient, str]]:
    sqs = boto3.client("sqs", region_name=REGION, endpoint_url=moto_server, **CREDS)
    url = sqs.create_queue(QueueName=f"poison-{uuid.uuid4().hex[:10]}")["QueueUrl"]
    yield sqs, url
    sqs.delete_queue(QueueUrl=url)


@pytest.mark.parametrize(
    "poison",
    [
        pytest.param(warning()[:-1] + f', "n": {HUGE_INT}}}', id="5000-digit-int"),
        pytest.param(_deep(60_000), id="60000-deep-array"),
    ],
)
def test_a_poison_message_is_counted_logged_by_id_and_left_while_the_warning_beside_it_arrives(
    queue: tuple[SQSClient, str], poison: str, caplog: pytest.LogCaptureFixture
) -> None:
    sqs, url = queue
    sqs.send_message(QueueUrl=url, MessageBody=poison)
    sqs.send_message(QueueUrl=url, MessageBody=warning("i-0aaaaaaaaaaaaaaa1"))
    notices = SqsNotices(sqs, url, origin=ORIGIN, wait_time_s=0, visibility_timeout_s=0)
    with caplog.at_level(logging.WARNING, logger="markets.aws.notices"):
        got = notices.poll(10)
    assert [(n.kind, n.instance_id) for n in got] == [
        (NoticeKind.INTERRUPTION, "i-0aaaaaaaaaaaaaaa1")
    ]
    assert got[0].deadline == T0 + timedelta(seconds=120)
    assert notices.stats.malformed == 1 and notices.stats.received == 2
    (record,) = [r for r in caplog.records if "malformed" in r.getMessage()]
    text = record.getMessage()
    assert "message_id=" in text and len(text) < 500 and HUGE_INT[:50] not in text
    notices.ack(got[0])
    # The poison was not deleted: it comes back (visibility 0) until redrive.
    assert notices.poll(10) == [] and notices.stats.malformed == 2


def test_a_batch_of_ten_with_nine_poisons_still_yields_its_warning(
    queue: tuple[SQSClient, str],
) -> None:
    sqs, url = queue
    # 12,000 deep: past the recursion limit, and nine fit SQS's 256 KiB per batch.
    entries = [{"Id": str(i), "MessageBody": "[" * 12_000 + "]" * 12_000} for i in range(9)]
    entries.append({"Id": "9", "MessageBody": warning("i-0bbbbbbbbbbbbbbb2")})
    sqs.send_message_batch(QueueUrl=url, Entries=entries)  # type: ignore[arg-type]
    notices = SqsNotices(sqs, url, origin=ORIGIN, wait_time_s=0, visibility_timeout_s=30)
    got = notices.poll(10)
    assert [n.instance_id for n in got] == ["i-0bbbbbbbbbbbbbbb2"]
    assert notices.stats.malformed == 9


def test_a_flood_of_poison_ahead_of_a_warning_does_not_hold_it_back_a_poll(
    queue: tuple[SQSClient, str],
) -> None:
    sqs, url = queue
    for start in range(0, 30, 10):
        entries = [{"Id": str(i), "MessageBody": HUGE_INT} for i in range(start, start + 10)]
        sqs.send_message_batch(QueueUrl=url, Entries=entries)  # type: ignore[arg-type]
    sqs.send_message(QueueUrl=url, MessageBody=warning("i-0ccccccccccccccc3"))
    notices = SqsNotices(sqs, url, origin=ORIGIN, wait_time_s=0, visibility_timeout_s=30)
    got = notices.poll(10)
    assert [n.instance_id for n in got] == ["i-0ccccccccccccccc3"]
    assert notices.stats.malformed == 30 and notices.stats.received == 31


def test_messages_that_keep_coming_back_cannot_spin_a_poll(
    queue: tuple[SQSClient, str],
) -> None:
    sqs, url = queue
    sqs.send_message(QueueUrl=url, MessageBody=HUGE_INT)
    # Visibility 0: the poison is back at once, every receive.
    notices = SqsNotices(sqs, url, origin=ORIGIN, wait_time_s=0, visibility_timeout_s=0)
    assert notices.poll(2) == []
    assert notices.stats.received <= POLL_MESSAGES_PER_NOTICE * 2
