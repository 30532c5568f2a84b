"""Notices from the EventBridge -> SQS queue, parsed into ``Notice``.

Owns: ``parse_message`` (one message body -> its notices), ``SqsNotices``
(long-polls the queue, parses, deletes on ``ack``) and its counters
``NoticeStats``. Reading a body and trusting an event are
``markets.aws.envelope``'s; AWS Health scheduled changes ``markets.aws.health``'s.

The three EC2 event shapes, as AWS documents them (``source`` is ``aws.ec2``;
every event carries ``id``, ``time`` (UTC, ISO 8601), ``account``,
``region``, ``resources`` (the instance ARN) and ``detail``):

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

- a notice (or, for an AWS Health event, one per affected instance):
  returned with its ``ReceiptHandle`` as ``receipt``; it stays in the queue,
  invisible for ``visibility_timeout_s``, until ``ack`` deletes it. A caller
  that crashes before acking sees it again.
- *foreign*: well-formed JSON that is certainly not for us (another
  ``source`` or ``detail-type``, e.g. a rule widened by hand): counted,
  logged and deleted at once, or it would come back forever.
- *rejected*: one of our events whose ``account``, ``region`` or
  ``resources`` are not the daemon's (``NoticeOrigin``): a spoof or a
  misrouted event. Counted, logged with the failed check, never acted on,
  and not deleted: the redrive policy moves it to the dead-letter queue,
  whose alarm tells the operator.
- *malformed*: anything else that fails, whatever the body (not JSON, too
  big, too deep, numbers past Python's limits, a missing id or time): counted
  and logged with the message id (never the body), *not* deleted; it returns
  after the visibility timeout until the redrive policy retires it. The rest
  of the batch is read as if it were not there.

Every field logged goes through ``markets.escape.log_safe``: a newline in an
id cannot forge a log line.

Must not: decide anything about a notice, or crash the poller on a bad
message.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from botocore.exceptions import ClientError

from markets.aws.envelope import (
    MAX_NOTICE_ID_CHARS,
    MalformedMessage,
    NoticeOrigin,
    RejectedNotice,
    check_origin,
    event_time,
    instance_id,
    read_event,
    text,
)
from markets.aws.errors import aws_call
from markets.aws.health import HEALTH_DETAIL_TYPE, HEALTH_SOURCE, parse_health
from markets.cloud_fleet import InstanceState, Notice, NoticeKind
from markets.escape import log_safe

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
    "POLL_MESSAGES_PER_NOTICE",
    "MalformedMessage",
    "NoticeOrigin",
    "NoticeStats",
    "RejectedNotice",
    "SqsApi",
    "SqsNotices",
    "parse_message",
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
# Messages one poll may receive per notice asked for: ten receives of ten for
# a poll of ten (each ~10-50 ms), enough to read past a batch of poison.
POLL_MESSAGES_PER_NOTICE = 10
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
    rejected: int = 0  # ours in shape, not from our account/region/instance: left
    malformed: int = 0  # unreadable, whatever failed: left for the redrive policy
    acked: int = 0  # deleted by ack
    stale_receipts: int = 0  # ack after the receipt expired (message returns)


def _ec2_notice(
    event: Mapping[str, object], kind: NoticeKind, receipt: str | None, origin: NoticeOrigin | None
) -> Notice:
    detail_type = event.get("detail-type")
    detail = event.get("detail")
    if not isinstance(detail, dict):
        raise MalformedMessage(f"{detail_type}: detail is not an object")
    notice_id = text(event.get("id"), "id", MAX_NOTICE_ID_CHARS)
    iid = instance_id(detail.get("instance-id"), "detail.instance-id")
    at = event_time(event.get("time"))
    deadline: datetime | None = None
    state: InstanceState | None = None
    if kind is NoticeKind.INTERRUPTION:
        action = detail.get("instance-action", "terminate")
        # Hibernation begins as soon as the notice is sent: no two minutes.
        warning = 0 if action == "hibernate" else INTERRUPTION_WARNING_S
        deadline = at + timedelta(seconds=warning)
    elif kind is NoticeKind.STATE_CHANGE:
        name = text(detail.get("state"), "detail.state", 32)
        if name not in _STATES:
            raise MalformedMessage(f"detail.state: unknown EC2 state {name!r}")
        state = _STATES[name]
    if origin is not None:
        check_origin(dict(event), origin, [iid])
    return Notice(
        notice_id=notice_id,
        kind=kind,
        instance_id=iid,
        at=at,
        deadline=deadline,
        state=state,
        receipt=receipt,
    )


def parse_message(
    body: object, receipt: str | None = None, origin: NoticeOrigin | None = None
) -> tuple[Notice, ...]:
    """The notices in one message body: one for an EC2 event, one per
    affected instance for an AWS Health scheduled change, none (``()``) if
    the event is certainly not one of ours. Raises ``MalformedMessage`` if it
    cannot be read, ``RejectedNotice`` if it is not from ``origin`` (``None``
    skips that check: parsing tests only; ``SqsNotices`` always has one)."""
    event = read_event(body)
    source, detail_type = event.get("source"), event.get("detail-type")
    if source is None and detail_type is None:
        raise MalformedMessage("no source or detail-type: not an EventBridge event")
    if source == HEALTH_SOURCE and detail_type == HEALTH_DETAIL_TYPE:
        return parse_health(event, receipt, origin)
    kind = DETAIL_TYPES.get(detail_type) if isinstance(detail_type, str) else None
    if source != EVENT_SOURCE or kind is None:
        return ()
    return (_ec2_notice(event, kind, receipt, origin),)


class SqsNotices:
    """Notices from one SQS queue fed by the EventBridge rule.

    ``origin``: the account and regions notices must come from.
    ``wait_time_s``: long-poll wait of the first receive of a poll (0-20).
    ``visibility_timeout_s``: how long a received, unacked message stays
    hidden before it is delivered again.
    """

    def __init__(
        self,
        sqs: SqsApi,
        queue_url: str,
        *,
        origin: NoticeOrigin,
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
        self.origin = origin
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
        """Up to ``max_notices`` notices: one long poll, then short receives
        while the queue answers full batches. Messages that are not notices
        (poison, spoofs) do not count against ``max_notices``, so a flood of
        them cannot hold a warning back for many polls; at most
        ``POLL_MESSAGES_PER_NOTICE * max_notices`` messages are received per
        poll, whatever they hold, so messages that keep coming back (a
        visibility timeout of 0) cannot spin the poller."""
        if max_notices < 1:
            raise ValueError(f"max_notices must be >= 1, got {max_notices}")
        notices: list[Notice] = []
        received = 0
        most = POLL_MESSAGES_PER_NOTICE * max_notices
        wait_s = self.wait_time_s
        while len(notices) < max_notices and received < most:
            want = min(MAX_MESSAGES_PER_RECEIVE, max_notices - len(notices), most - received)
            batch = self._receive(want, wait_s)
            received += len(batch)
            wait_s = 0  # the queue had messages: take the rest without waiting
            for message in batch:
                notices += self._read(message)
            if len(batch) < want:
                break  # drained for now; the next poll takes what arrives
        return notices

    def _read(self, message: MessageTypeDef) -> tuple[Notice, ...]:
        """One message's notices; ``()`` for anything else, each outcome
        counted and logged (module docstring). Never raises for a body."""
        self._count(received=1)
        message_id = log_safe(message.get("MessageId", "?"), 128)
        receipt = message.get("ReceiptHandle")
        receives = log_safe(message.get("Attributes", {}).get("ApproximateReceiveCount", "?"), 16)
        try:
            notices = parse_message(message.get("Body", ""), receipt, self.origin)
        except RejectedNotice as e:
            self._count(rejected=1)
            log.warning(
                "notice rejected, not from this daemon's account/region/instance; left for "
                "the redrive policy: message_id=%s receive_count=%s check=%s reason=%s",
                message_id,
                receives,
                log_safe(e.field, 64),
                log_safe(e),
            )
            return ()
        except Exception as e:  # the message boundary: any body, any failure
            # MalformedMessage, and whatever else a hostile body provokes
            # (RecursionError, ValueError, MemoryError, a model's validation):
            # one message must not cost the batch. The body is never logged.
            self._count(malformed=1)
            reason = str(e) if isinstance(e, MalformedMessage) else type(e).__name__
            log.warning(
                "malformed notice message left for the redrive policy: "
                "message_id=%s receive_count=%s reason=%s",
                message_id,
                receives,
                log_safe(reason),
            )
            return ()
        if not notices:
            self._count(foreign=1)
            log.info("deleting a message that is not an EC2 notice: message_id=%s", message_id)
            if receipt:
                self._delete(str(receipt))
            return ()
        self._count(notices=len(notices))
        return notices

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
                log.info(
                    "receipt expired before delete; the message will return: %s", log_safe(code)
                )
                return False
        return True

    def ack(self, notice: Notice) -> None:
        """Delete ``notice``'s message. Call only once its handling is
        durable. An expired receipt is logged, not raised: the message comes
        back, and its ``notice_id`` shows it was handled."""
        if notice.receipt is None:
            raise ValueError(f"notice {log_safe(notice.notice_id)} has no receipt to acknowledge")
        if self._delete(notice.receipt):
            self._count(acked=1)
