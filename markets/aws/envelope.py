"""One EventBridge event from the notice queue: read it, then decide whether to trust it.

Owns: ``read_event`` (a message body -> the event object, whatever the body
holds), the field readers every event shape shares (``text``,
``event_time``, ``instance_id``), ``NoticeOrigin`` (the account and regions
the daemon runs in) and ``check_origin`` (is this event about our instances,
from our account and region?), with their two errors: ``MalformedMessage``
(cannot be read) and ``RejectedNotice`` (readable, but not from us).

Reading survives any body: bodies over ``MAX_BODY_CHARS`` are refused
before parsing; any JSON failure (syntax, an integer past Python's
4,300-digit int-string limit -> ``ValueError``, a 60,000-deep array ->
``RecursionError``) becomes ``MalformedMessage``; at most one SNS envelope is
unwrapped (EventBridge -> SNS -> SQS is one hop; nesting is not followed).

Trust: the queue policy lets only our EventBridge rules send, but anyone
granted ``sqs:SendMessage`` on the queue can write a well-formed event. An
event is acted on only when its ``account`` is ours, its ``region`` one we
launch in, and its ``resources`` name the instance: for EC2 events the
instance ARN ``arn:<partition>:ec2:<region>:<account>:instance/<id>`` in
that same region and account (EC2 User Guide, "EventBridge events for
Amazon EC2"), for AWS Health events the entity itself (AWS Health User
Guide, "AWS Health events Amazon EventBridge schema": ``resources`` lists
the affected entities).

Must not: know what an event means (``markets.aws.notices``,
``markets.aws.health``), or log (callers log with the message id).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from markets.clock import ensure_utc
from markets.errors import RebuiltByState

__all__ = [
    "MAX_BODY_CHARS",
    "MAX_NOTICE_ID_CHARS",
    "MalformedMessage",
    "NoticeOrigin",
    "RejectedNotice",
    "check_origin",
    "event_time",
    "instance_id",
    "read_event",
    "text",
]

# An EventBridge event is at most 256 KB (PutEvents entry size limit), and so
# is a classic SQS message: anything longer was not written by our rules.
MAX_BODY_CHARS = 256 * 1024
# The store's notice_id column is String(128); a longer id would fail the
# whole batch's transaction on PostgreSQL.
MAX_NOTICE_ID_CHARS = 128
_MAX_TEXT_CHARS = 2048  # any other field: ARNs (<= 1,600), codes, states
# EC2 instance ids: "i-" and 8 or 17 hex digits; shorter ones are let through
# (fakes use them), longer ones and other characters are not.
_INSTANCE_ID = re.compile(r"i-[0-9a-f]{1,17}")
_INSTANCE_ARN = re.compile(
    r"arn:aws(?:-[a-z]+)*:ec2:(?P<region>[a-z0-9-]+):(?P<account>\d{12}):instance/(?P<id>.+)"
)
_ACCOUNT = re.compile(r"\d{12}")


class MalformedMessage(ValueError):
    """A message that might be ours but cannot be read."""


class RejectedNotice(RebuiltByState, ValueError):
    """A readable event that is not from our account and region, or does not
    name the instance it is about; ``field`` says which check failed."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True)
class NoticeOrigin:
    """Where the daemon's notices must come from: its AWS account id and the
    regions it launches in."""

    account: str
    regions: frozenset[str]

    def __post_init__(self) -> None:
        if not _ACCOUNT.fullmatch(self.account):
            raise ValueError(f"account must be a 12-digit AWS account id, got {self.account!r}")
        if not self.regions:
            raise ValueError("regions must not be empty")


def _json(body: str) -> object:
    try:
        return json.loads(body)
    except RecursionError as e:
        raise MalformedMessage("body is nested too deeply to parse") from e
    except (ValueError, TypeError) as e:  # JSONDecodeError, the int-string limit
        raise MalformedMessage(f"body is not readable JSON: {str(e)[:200]}") from e


def read_event(body: object) -> dict[str, object]:
    """The event object in one message body (one SNS envelope unwrapped)."""
    if not isinstance(body, str):
        raise MalformedMessage(f"body: expected text, got {type(body).__name__}")
    if len(body) > MAX_BODY_CHARS:
        raise MalformedMessage(f"body of {len(body):,} characters (at most {MAX_BODY_CHARS:,})")
    doc = _json(body)
    if isinstance(doc, dict) and doc.get("Type") == "Notification" and "Message" in doc:
        inner = doc["Message"]  # EventBridge -> SNS -> SQS
        if not isinstance(inner, str):
            raise MalformedMessage("SNS envelope: Message is not text")
        doc = _json(inner)
    if not isinstance(doc, dict):
        raise MalformedMessage(f"expected a JSON object, got {type(doc).__name__}")
    return {str(k): v for k, v in doc.items()}


def text(value: object, what: str, limit: int = _MAX_TEXT_CHARS) -> str:
    """A non-empty string of at most ``limit`` characters."""
    if not isinstance(value, str) or not value.strip():
        raise MalformedMessage(f"{what}: expected a non-empty string, got {type(value).__name__}")
    if len(value) > limit:
        raise MalformedMessage(f"{what}: {len(value):,} characters (at most {limit:,})")
    try:
        value.encode()  # JSON's \ud800 escapes make lone surrogates no store can write
    except UnicodeEncodeError as e:
        raise MalformedMessage(f"{what}: not valid Unicode") from e
    return value.strip()


def event_time(value: object, what: str = "time") -> datetime:
    """An ISO 8601 time (EventBridge writes ``2021-11-11T21:29:54Z``)."""
    raw = text(value, what, 64)
    try:
        # fromisoformat reads "Z" on 3.11.
        return ensure_utc(datetime.fromisoformat(raw))
    except ValueError as e:
        raise MalformedMessage(f"{what}: expected ISO 8601, got {raw[:64]!r}") from e


def instance_id(value: object, what: str) -> str:
    """An EC2 instance id (``i-`` and hex digits)."""
    raw = text(value, what, 32)
    if not _INSTANCE_ID.fullmatch(raw):
        raise MalformedMessage(f"{what}: expected an EC2 instance id, got {raw!r}")
    return raw


def _named(resources: object, region: str, account: str, bare_ids: bool) -> set[str]:
    """Instance ids the event's ``resources`` name, as ARNs in ``region`` and
    ``account`` (and as bare ids when ``bare_ids``)."""
    if not isinstance(resources, list):
        return set()
    named: set[str] = set()
    for r in resources:
        if not isinstance(r, str) or len(r) > _MAX_TEXT_CHARS:
            continue
        m = _INSTANCE_ARN.fullmatch(r)
        if m is not None:
            if m["region"] == region and m["account"] == account:
                named.add(m["id"])
        elif bare_ids and _INSTANCE_ID.fullmatch(r):
            named.add(r)
    return named


def check_origin(
    event: dict[str, object],
    origin: NoticeOrigin,
    instance_ids: Iterable[str],
    *,
    bare_ids: bool = False,
) -> None:
    """Raise ``RejectedNotice`` unless ``event`` comes from ``origin``'s
    account, from one of its regions, and its ``resources`` name every one
    of ``instance_ids`` (as ARNs; also as bare ids when ``bare_ids``, the
    AWS Health form)."""
    account, region = event.get("account"), event.get("region")
    if account != origin.account:
        raise RejectedNotice("account", f"{str(account)[:64]!r} is not ours ({origin.account})")
    if not isinstance(region, str) or region not in origin.regions:
        ours = ", ".join(sorted(origin.regions))
        raise RejectedNotice("region", f"{str(region)[:64]!r} is not one we launch in ({ours})")
    named = _named(event.get("resources"), region, account, bare_ids)
    for iid in instance_ids:
        if iid not in named:
            raise RejectedNotice("resources", f"no resource names {iid} in {region} of {account}")
