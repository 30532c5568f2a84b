"""EC2 notices from the EventBridge -> SQS queue, parsed into ``Notice``.

Owns: ``parse_event`` (one EventBridge event body -> one ``Notice``),
``SqsNotices`` (long-polls the queue, parses, deletes on ``ack``) and its
counters ``NoticeStats``.

The three event shapes, as AWS documents them (``source`` is ``aws.ec2``;
every event carries ``id``, ``time`` (UTC, ISO 8601) and ``detail``):

- ``EC2 Spot Instance Interruption Warning``: ``detail`` =
  ``{"instance-id", "instance-action"}``, action ``terminate``, ``stop`` or
  ``hibernate``; emitted two minutes before the interruption, except for
  hibernation, which starts at once (EC2 User Guide, "Spot Instance
  interruption notices", docs.aws.amazon.com/AWSEC2/latest/UserGuide/
  spot-instance-termination-notices.html).
- ``EC2 Instance Rebalance Recommendation``: ``detail`` = ``{"instance-id"}``
  (EC2 User Guide, "EC2 instance rebalance recommendations",
  .../rebalance-recommendations.html).
- ``EC2 Instance State-change Notification``: ``detail`` =
  ``{"instance-id", "state"}``, state one of ``pending``, ``running``,
  ``stopping``, ``stopped``, ``shutting-down``, ``terminated`` (EC2 User
  Guide, "State change events for Amazon EC2 instances",
  .../monitoring-instance-state-changes.html).

EventBridge's SQS target puts the event JSON itself in the message body; an
SNS hop in between wraps it as ``{"Type": "Notification", "Message": ...}``,
which is unwrapped.

What happens to each message (the queue is at-least-once: duplicates and
reordering happen; ``notice_id`` = the event ``id`` lets callers handle each
event once):

- a notice: returned with its ``ReceiptHandle`` as ``receipt``; it stays in
  the queue, invisible for ``visibility_timeout_s``, until ``ack`` deletes
  it. A caller that crashes before acking sees it again.
- *foreign*: well-formed JSON that is certainly not for us (another
  ``source`` or ``detail-type``, e.g. a rule widened by hand): counted,
  logged and deleted at once, or it would come back forever.
- *malformed*: not JSON, or one of our detail-types without a usable
  instance id or time. It might be ours, so it is counted and logged but
  *not* deleted: it returns after the visibility timeout and the queue's
  redrive policy (``maxReceiveCount`` -> dead-letter queue) retires it.

Must not: decide anything about a notice, or crash the poller on a bad
message.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from botocore.exceptions import ClientError

from markets.aws.errors import aws_call
from markets.clock import ensure_utc
from markets.fleet import InstanceState, Notice, NoticeKind

if TYPE_CHECKING:
    from typing import Unpack

    from mypy_boto3_sqs.type_defs import (
        DeleteMessageRequestTypeDef,
        EmptyResponseMetadataTypeDef,
        MessageTypeDef,
        ReceiveMessageRequestTypeDef,
        ReceiveMessageResultTypeDef,
    )

__all__ = [
    "DEFAULT_VISIBILITY_TIMEOUT_S",
    "DEFAULT_WAIT_TIME_S",
    "DETAIL_TYPES",
    "EVENT_SOURCE",
    "INTERRUPTION_WARNING_S",
    "MalformedMessage",
    "NoticeStats",
    "SqsApi",
    "SqsNotices",
    "parse_event",
]

log = logging.getLogger(__name__)

EVENT_SOURCE = "aws.ec2"
INTERRUPTION = "EC2 Spot Instance Interruption Warning"
REBALANCE = "EC2 Instance Rebalance Recommendation"
STATE_CHANGE = "EC2 Instance State-change Notification"
DETAIL_TYPES: Mapping[str, NoticeKind] = {
    INTERRUPTION: NoticeKind.INTERRUPTION,
    REBALANCE: NoticeKind.REBALANCE,
    STATE_CHANGE: NoticeKind.STATE_CHANGE,
}
# "a warning that is issued two minutes before Amazon EC2 stops or terminates
# your Spot Instance" (EC2 User Guide, Spot Instance interruption notices).
INTERRUPTION_WARNING_S = 120
# ReceiveMessage: WaitTimeSeconds 0-20 (20 = longest long poll); at most 10
# messages per call; VisibilityTimeout 0-43200 s (SQS API reference).
MAX_WAIT_TIME_S = 20
MAX_MESSAGES_PER_RECEIVE = 10
MAX_VISIBILITY_TIMEOUT_S = 43_200
# AWS suggests checking for interruption notices every 5 s: a 5 s long poll
# returns at once when a message arrives and costs one request per 5 s idle.
DEFAULT_WAIT_TIME_S = 5
# Long enough for one handling (decide, launch, record) to finish, short
# enough that a restarted daemon sees an unacked warning again with most of
# its 120 s left.
DEFAULT_VISIBILITY_TIMEOUT_S = 30

# EC2 state names -> ours. ``shutting-down`` is the start of termination: the
# capacity is going; ``stopped`` has no state of its own in InstanceState.
_STATES: Mapping[str, InstanceState] = {
    "pending": InstanceState.PENDING,
    "running": InstanceState.RUNNING,
    "stopping": InstanceState.STOPPING,
    "stopped": InstanceState.STOPPING,
    "shutting-down": InstanceState.TERMINATED,
    "terminated": InstanceState.TERMINATED,
}


class MalformedMessage(ValueError):
    """A message that might be ours but cannot be read."""


class SqsApi(Protocol):
    """The SQS client methods used (a boto3 SQS client fits; the shapes are
    boto3-stubs', named for the type checker only)."""

    def receive_message(
        self, **kwargs: Unpack[ReceiveMessageRequestTypeDef]
    ) -> ReceiveMessageResultTypeDef: ...

    def delete_message(
        self, **kwargs: Unpack[DeleteMessageRequestTypeDef]
    ) -> EmptyResponseMetadataTypeDef: ...


@dataclass(frozen=True)
class NoticeStats:
    """Counters since the ``SqsNotices`` was built."""

    received: int = 0  # messages received (redeliveries included)
    notices: int = 0  # returned as notices
    foreign: int = 0  # certainly not ours: deleted at once
    malformed: int = 0  # unreadable: left for the redrive policy
    acked: int = 0  # deleted by ack
    stale_receipts: int = 0  # ack after the receipt expired (message returns)


def _text(value: object, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise MalformedMessage(f"{what}: expected a non-empty string, got {value!r}")
    return value.strip()


def _event_time(value: object) -> datetime:
    text = _text(value, "time")
    try:
        # EventBridge writes "2021-11-11T21:29:54Z"; fromisoformat reads "Z" on 3.11.
        return ensure_utc(datetime.fromisoformat(text))
    except ValueError as e:
        raise MalformedMessage(f"time: expected ISO 8601, got {text!r}") from e


def _unwrap(body: str) -> object:
    try:
        doc: object = json.loads(body)
    except (json.JSONDecodeError, TypeError) as e:
        raise MalformedMessage(f"body is not JSON: {e}") from e
    if isinstance(doc, dict) and doc.get("Type") == "Notification" and "Message" in doc:
        return _unwrap(str(doc["Message"]))  # EventBridge -> SNS -> SQS
    return doc


def parse_event(body: str, receipt: str | None = None) -> Notice | None:
    """The notice in one message body; ``None`` if the event is certainly not
    one of ours (another source or detail-type); ``MalformedMessage`` if it
    cannot be read."""
    event = _unwrap(body)
    if not isinstance(event, dict):
        raise MalformedMessage(f"expected a JSON object, got {type(event).__name__}")
    source, detail_type = event.get("source"), event.get("detail-type")
    if source is None and detail_type is None:
        raise MalformedMessage("no source or detail-type: not an EventBridge event")
    if source != EVENT_SOURCE or detail_type not in DETAIL_TYPES:
        return None
    kind = DETAIL_TYPES[str(detail_type)]
    detail = event.get("detail")
    if not isinstance(detail, dict):
        raise MalformedMessage(f"{detail_type}: detail is not an object")
    notice_id = _text(event.get("id"), "id")
    instance_id = _text(detail.get("instance-id"), "detail.instance-id")
    at = _event_time(event.get("time"))
    deadline: datetime | None = None
    state: InstanceState | None = None
    if kind is NoticeKind.INTERRUPTION:
        action = str(detail.get("instance-action", "terminate"))
        # Hibernation begins as soon as the notice is sent: no two minutes.
        warning = 0 if action == "hibernate" else INTERRUPTION_WARNING_S
        deadline = at + timedelta(seconds=warning)
    elif kind is NoticeKind.STATE_CHANGE:
        name = _text(detail.get("state"), "detail.state")
        if name not in _STATES:
            raise MalformedMessage(f"detail.state: unknown EC2 state {name!r}")
        state = _STATES[name]
    return Notice(
        notice_id=notice_id,
        kind=kind,
        instance_id=instance_id,
        at=at,
        deadline=deadline,
        state=state,
        receipt=receipt,
    )


class SqsNotices:
    """Notices from one SQS queue fed by the EventBridge rule.

    ``wait_time_s``: long-poll wait of the first receive of a poll (0-20).
    ``visibility_timeout_s``: how long a received, unacked message stays
    hidden before it is delivered again.
    """

    def __init__(
        self,
        sqs: SqsApi,
        queue_url: str,
        *,
        wait_time_s: int = DEFAULT_WAIT_TIME_S,
        visibility_timeout_s: int = DEFAULT_VISIBILITY_TIMEOUT_S,
    ) -> None:
        if not queue_url.strip():
            raise ValueError("queue_url must not be empty")
        if not 0 <= wait_time_s <= MAX_WAIT_TIME_S:
            raise ValueError(f"wait_time_s must be 0-{MAX_WAIT_TIME_S}, got {wait_time_s}")
        if not 0 <= visibility_timeout_s <= MAX_VISIBILITY_TIMEOUT_S:
            raise ValueError(
                f"visibility_timeout_s must be 0-{MAX_VISIBILITY_TIMEOUT_S}, "
                f"got {visibility_timeout_s}"
            )
        self.sqs = sqs
        self.queue_url = queue_url
        self.wait_time_s = wait_time_s
        self.visibility_timeout_s = visibility_timeout_s
        self.stats = NoticeStats()
        self._lock = threading.Lock()

    def _count(self, **deltas: int) -> None:
        # poll and ack may run on different scheduler threads.
        with self._lock:
            values = {k: getattr(self.stats, k) + v for k, v in deltas.items()}
            self.stats = replace(self.stats, **values)

    def _receive(self, max_messages: int, wait_s: int) -> list[MessageTypeDef]:
        with aws_call("sqs:ReceiveMessage"):
            reply = self.sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=max_messages,
                WaitTimeSeconds=wait_s,
                VisibilityTimeout=self.visibility_timeout_s,
                MessageSystemAttributeNames=["ApproximateReceiveCount"],
            )
        return reply.get("Messages", [])

    def poll(self, max_notices: int = MAX_MESSAGES_PER_RECEIVE) -> Sequence[Notice]:
        """Up to ``max_notices`` notices: one long poll, then (to take more
        than 10) short receives while the queue answers full batches. At
        most ``max_notices`` messages are received per poll, whatever they
        hold, so messages that keep coming back cannot spin the poller."""
        if max_notices < 1:
            raise ValueError(f"max_notices must be >= 1, got {max_notices}")
        notices: list[Notice] = []
        received = 0
        wait_s = self.wait_time_s
        while received < max_notices:
            want = min(MAX_MESSAGES_PER_RECEIVE, max_notices - received)
            batch = self._receive(want, wait_s)
            received += len(batch)
            wait_s = 0  # the queue had messages: take the rest without waiting
            for message in batch:
                notice = self._read(message)
                if notice is not None:
                    notices.append(notice)
            if len(batch) < want:
                break  # drained for now; the next poll takes what arrives
        return notices

    def _read(self, message: MessageTypeDef) -> Notice | None:
        self._count(received=1)
        message_id = message.get("MessageId", "?")
        receipt = message.get("ReceiptHandle")
        try:
            notice = parse_event(str(message.get("Body", "")), receipt)
        except MalformedMessage as e:
            self._count(malformed=1)
            receives = message.get("Attributes", {}).get("ApproximateReceiveCount", "?")
            log.warning(
                "malformed notice message left for the redrive policy: "
                "message_id=%s receive_count=%s reason=%s",
                message_id,
                receives,
                e,
            )
            return None
        if notice is None:
            self._count(foreign=1)
            log.info("deleting a message that is not an EC2 notice: message_id=%s", message_id)
            if receipt:
                self._delete(str(receipt))
            return None
        self._count(notices=1)
        return notice

    def _delete(self, receipt: str) -> bool:
        """Delete one message; ``False`` if its receipt had expired (the
        message will be delivered again)."""
        with aws_call("sqs:DeleteMessage"):
            try:
                self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=receipt)
            except ClientError as e:
                code = str(e.response.get("Error", {}).get("Code", ""))
                # JSON and query-compatible spellings of the same error.
                if not code.endswith("ReceiptHandleIsInvalid"):
                    raise
                self._count(stale_receipts=1)
                log.info("receipt expired before delete; the message will return: %s", code)
                return False
        return True

    def ack(self, notice: Notice) -> None:
        """Delete ``notice``'s message. Call only once its handling is
        durable. An expired receipt is logged, not raised: the message comes
        back, and its ``notice_id`` shows it was handled."""
        if notice.receipt is None:
            raise ValueError(f"notice {notice.notice_id} has no receipt to acknowledge")
        if self._delete(notice.receipt):
            self._count(acked=1)
