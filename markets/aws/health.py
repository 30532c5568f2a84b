"""AWS Health scheduled changes for EC2 instances, parsed into ``Notice``.

Owns: ``parse_health`` (one ``aws.health`` event -> a notice per affected
instance) and the names of the events it reads.

The event, as the AWS Health User Guide documents it ("AWS Health events
Amazon EventBridge schema"): ``source`` ``aws.health``, ``detail-type``
``AWS Health Event``; ``detail`` carries ``eventArn``, ``service``
(``EC2``), ``eventTypeCode`` (``AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED``,
``AWS_EC2_INSTANCE_STOP_SCHEDULED``, ``AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED``,
``AWS_EC2_SYSTEM_REBOOT_MAINTENANCE_SCHEDULED``, ...), ``eventTypeCategory``
(``scheduledChange`` for these), ``statusCode`` (``upcoming``, ``open``,
``closed``), ``startTime`` (when the change begins), ``eventRegion`` and
``affectedEntities`` (``[{"entityValue": "i-..."}]``). Events about EC2
maintenance are sent about two weeks before their start time.

What becomes of one:

- ``service`` EC2, category ``scheduledChange``, status ``upcoming`` or
  ``open``: one ``NoticeKind.SCHEDULED`` notice per affected instance, its
  ``deadline`` the event's ``startTime`` (the real one, not two minutes);
  reboots are treated like retirements (the capacity is gone at the start).
- another service or category, ``closed`` (the change is over), or no
  instance among the entities: nothing (``()``: certainly not a notice).
- anything unreadable: ``MalformedMessage``.

``notice_id`` is ``health/<instance id>/<16 hex digits of the eventArn's
SHA-256>``: AWS Health sends a new EventBridge event (a new ``id``) each time
the event is updated, and the instance must be handled once per scheduled
change, not once per update; the eventArn itself can be 1,600 characters,
too long for the store's id column.

Must not: decide anything about a notice, or trust an event without
``markets.aws.envelope.check_origin``.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from email.utils import parsedate_to_datetime

from markets.aws.envelope import (
    MalformedMessage,
    NoticeOrigin,
    RejectedNotice,
    check_origin,
    event_time,
    instance_id,
    text,
)
from markets.clock import ensure_utc
from markets.cloud_fleet import Notice, NoticeKind

__all__ = [
    "HEALTH_DETAIL_TYPE",
    "HEALTH_EVENT_PATTERN",
    "HEALTH_SOURCE",
    "SCHEDULED_CHANGE",
    "parse_health",
]

HEALTH_SOURCE = "aws.health"
HEALTH_DETAIL_TYPE = "AWS Health Event"
SCHEDULED_CHANGE = "scheduledChange"
HEALTH_SERVICE = "EC2"
# The EventBridge rule that routes these events to the notice queue
# (terraform/modules/aws/events.tf, local.health_event_pattern).
HEALTH_EVENT_PATTERN: dict[str, object] = {
    "source": [HEALTH_SOURCE],
    "detail-type": [HEALTH_DETAIL_TYPE],
    "detail": {"service": [HEALTH_SERVICE], "eventTypeCategory": [SCHEDULED_CHANGE]},
}
_ACTIVE = frozenset({"upcoming", "open"})
# One event lists at most this many entities we turn into notices: the body
# cap bounds it anyway; this keeps one message from becoming a storm.
_MAX_ENTITIES = 1000


def _health_time(value: object, what: str) -> datetime:
    """AWS Health writes RFC 1123 times (``Wed, 31 Jan 2023 05:00:00 GMT``)
    in ``detail``; ISO 8601 is read too."""
    raw = text(value, what, 64)
    try:
        return ensure_utc(parsedate_to_datetime(raw))
    except (TypeError, ValueError, IndexError):
        return event_time(raw, what)


def _notice_id(iid: str, event_arn: str) -> str:
    digest = hashlib.sha256(event_arn.encode()).hexdigest()[:16]
    return f"health/{iid}/{digest}"


def parse_health(
    event: dict[str, object], receipt: str | None, origin: NoticeOrigin | None
) -> tuple[Notice, ...]:
    """The notices of one ``aws.health`` event (module docstring); checked
    against ``origin`` unless it is ``None`` (parsing tests only)."""
    detail = event.get("detail")
    if not isinstance(detail, dict):
        raise MalformedMessage(f"{HEALTH_DETAIL_TYPE}: detail is not an object")
    if detail.get("service") != HEALTH_SERVICE or detail.get("eventTypeCategory") != (
        SCHEDULED_CHANGE
    ):
        return ()
    status = text(detail.get("statusCode"), "detail.statusCode", 32)
    if status not in _ACTIVE:
        return ()
    event_arn = text(detail.get("eventArn"), "detail.eventArn")
    text(detail.get("eventTypeCode"), "detail.eventTypeCode", 256)
    at = event_time(event.get("time"))
    start = _health_time(detail.get("startTime"), "detail.startTime")
    entities = detail.get("affectedEntities")
    if not isinstance(entities, list):
        raise MalformedMessage("detail.affectedEntities: expected a list")
    ids: list[str] = []
    for i, entity in enumerate(entities[:_MAX_ENTITIES]):
        value = entity.get("entityValue") if isinstance(entity, dict) else None
        if isinstance(value, str) and value.startswith("i-"):
            ids.append(instance_id(value, f"detail.affectedEntities[{i}].entityValue"))
    ids = list(dict.fromkeys(ids))
    if not ids:
        return ()
    if origin is not None:
        check_origin(event, origin, ids, bare_ids=True)
        where = detail.get("eventRegion")  # the region affected (``region``: delivered to)
        if where is not None and where not in origin.regions:
            raise RejectedNotice("detail.eventRegion", f"{str(where)[:64]!r} is not one of ours")
    return tuple(
        Notice(
            notice_id=_notice_id(iid, event_arn),
            kind=NoticeKind.SCHEDULED,
            instance_id=iid,
            at=at,
            deadline=start,
            receipt=receipt,
        )
        for iid in ids
    )
