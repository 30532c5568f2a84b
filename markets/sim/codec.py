"""The simulated account's state as a versioned JSON document.

Owns: ``ACCOUNT_FORMAT`` / ``ACCOUNT_VERSION``, ``AccountFile`` (the document:
format name, version, clock offset, state), ``encode`` (a ``SimCore``'s state
-> ``AccountState``) and ``restore`` (an ``AccountState`` -> the state of a
fresh ``SimCore`` over the same market; ``ValueError`` if its indexes name
records it does not hold), and ``read_account`` (a file's
bytes -> ``AccountFile``, or a one-line ``InputError`` naming the file and
what was expected).

The account's records point at each other (an instance sits in the account,
in its slot's list and in its pool's spot holdings; a queued notice in the
queue and under its receipt). The document keeps each record once and the
indexes as ids, in their order (the order decides which spot instance a
revocation takes, so a restored account draws as the saved one would have).
What the market gives (the pools' static terms, the hourly cache) and the
clock are not saved: the opener supplies them.

Why not pickle: a pickle names the simulator's classes and modules, so a
refactor breaks every saved account without saying so, and loading one runs
whatever it names. A change to this document (or to ``SimOptions`` /
``SimCounters``, stored field by field) that an older file cannot fill bumps
``ACCOUNT_VERSION``; a file of another version is refused, never guessed at.

Must not: do I/O beyond reading the bytes it is handed, or decide anything.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from datetime import datetime
from typing import Annotated, Final, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from markets.clock import ensure_utc
from markets.cloud_fleet import Instance, LaunchRequest, Notice, TerminateRequest
from markets.errors import (
    AuthError,
    CapacityUnavailableError,
    FatalError,
    InputError,
    QuotaExceededError,
    SpotfolioError,
    ThrottledError,
    TransientError,
)
from markets.sim.core import (
    IntentKey,
    SimCore,
    SimCounters,
    SimOptions,
    SlotKey,
    _Inst,
    _Intent,
    _Queued,
)
from markets.validation import input_error_from

__all__ = [
    "ACCOUNT_FORMAT",
    "ACCOUNT_VERSION",
    "AccountFile",
    "AccountState",
    "encode",
    "read_account",
    "restore",
]

ACCOUNT_FORMAT: Final = "spotfolio.sim.account"
# 1: a pickle of the simulator's attributes (no format name); 2: this JSON document.
ACCOUNT_VERSION: Final = 2
_PICKLE_MAGIC = b"\x80"  # pickle protocol 2 and later start with PROTO

Utc = Annotated[datetime, AfterValidator(ensure_utc)]

# Injected faults that survive a save: the error tree's plain branches. An
# error that needs more than a message to rebuild (InputError) is refused.
_FAULTS: dict[str, type[SpotfolioError]] = {
    cls.__name__: cls
    for cls in (
        SpotfolioError,
        TransientError,
        ThrottledError,
        FatalError,
        AuthError,
        QuotaExceededError,
        CapacityUnavailableError,
    )
}


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _InstRecord(_Record):
    inst: Instance
    usd_per_hour: float
    ended_at: Utc | None = None
    revoke_at: Utc | None = None
    terminated: bool = False


class _QueuedRecord(_Record):
    notice: Notice
    visible_at: Utc
    deleted: bool = False


class _LaunchKey(_Record):
    kind: Literal["launch"] = "launch"
    request: LaunchRequest
    ids: tuple[str, ...]


class _TerminateKey(_Record):
    kind: Literal["terminate"] = "terminate"
    request: TerminateRequest
    ids: tuple[str, ...]


class _IntentRecord(_Record):
    key: IntentKey
    visible: int
    ids: tuple[str, ...]


class _Fault(_Record):
    error: str  # a class name of _FAULTS
    message: str
    pool_key: str | None = None


class AccountState(_Record):
    """Every piece of ``SimCore`` state the market and clock do not give."""

    options: SimOptions
    rng: tuple[int, tuple[int, ...], float | None]  # random.Random.getstate()
    counters: SimCounters
    seq: int
    instances: list[_InstRecord]  # in the account's order
    order: dict[str, int]
    by_key: dict[str, Annotated[_LaunchKey | _TerminateKey, Field(discriminator="kind")]]
    intents: list[_IntentRecord]
    queue: list[_QueuedRecord]
    receipts: list[str | None]  # the queue's copies not yet acknowledged, by receipt
    deleted: int
    by_slot: list[tuple[SlotKey, list[str]]]
    spot_held: list[tuple[str, list[str]]]
    due: list[tuple[Utc, int, str]]  # a heap, in heap order
    next_event: dict[str, tuple[Utc, Utc | None]]
    acked: list[str]
    scanned: dict[str, Utc]
    faults: dict[str, list[_Fault]]
    exhausted: dict[str, Utc]


class AccountFile(_Record):
    """The document on disk."""

    format: Literal["spotfolio.sim.account"] = "spotfolio.sim.account"  # ACCOUNT_FORMAT
    version: Literal[2] = 2  # ACCOUNT_VERSION
    offset_s: float  # simulated time minus wall-clock time (``OffsetClock``)
    state: AccountState


def _fault(err: SpotfolioError) -> _Fault:
    name = type(err).__name__
    if _FAULTS.get(name) is not type(err):
        raise ValueError(f"an injected {name} cannot be saved with the simulated account")
    pool = err.pool_key if isinstance(err, CapacityUnavailableError) else None
    return _Fault(error=name, message=str(err), pool_key=pool)


def _unfault(f: _Fault) -> SpotfolioError:
    cls = _FAULTS[f.error]
    if cls is CapacityUnavailableError:
        return CapacityUnavailableError(f.message, pool_key=f.pool_key)
    return cls(f.message)


def encode(core: SimCore) -> AccountState:
    """``core``'s state as a document (no copy of the market or clock)."""
    by_key: dict[str, _LaunchKey | _TerminateKey] = {}
    for key, (req, ids) in core._by_key.items():
        by_key[key] = (
            _LaunchKey(request=req, ids=ids)
            if isinstance(req, LaunchRequest)
            else _TerminateKey(request=req, ids=ids)
        )
    version, internal, gauss = core.rng.getstate()
    return AccountState(
        options=core.options,
        rng=(version, internal, gauss),
        counters=core.counters,
        seq=core._seq,
        instances=[
            _InstRecord(
                inst=s.inst,
                usd_per_hour=s.usd_per_hour,
                ended_at=s.ended_at,
                revoke_at=s.revoke_at,
                terminated=s.terminated,
            )
            for s in core._instances.values()
        ],
        order=core._order,
        by_key=by_key,
        intents=[
            _IntentRecord(key=k, visible=v.visible, ids=v.ids) for k, v in core._intents.items()
        ],
        queue=[
            _QueuedRecord(notice=q.notice, visible_at=q.visible_at, deleted=q.deleted)
            for q in core._queue
        ],
        receipts=list(core._by_receipt),
        deleted=core._deleted,
        by_slot=[(k, [s.inst.instance_id for s in v]) for k, v in core._by_slot.items()],
        spot_held=[(pool, list(held)) for pool, held in core._spot_held.items()],
        due=list(core._due),
        next_event=core._next_event,
        acked=sorted(core._acked),
        scanned=core._scanned,
        faults={op: [_fault(e) for e in errs] for op, errs in core._faults.items() if errs},
        exhausted=core._exhausted,
    )


def restore(core: SimCore, state: AccountState) -> None:
    """Put ``state`` into ``core``, a fresh account over the same market
    (its options, counters and every record replaced)."""
    core.options = state.options
    core.rng = random.Random()
    core.rng.setstate(state.rng)
    counters = state.counters
    counters.by_tier = defaultdict(int, counters.by_tier)
    core.counters = counters
    core._seq = state.seq
    core._instances = {
        r.inst.instance_id: _Inst(r.inst, r.usd_per_hour, r.ended_at, r.revoke_at, r.terminated)
        for r in state.instances
    }
    core._order = dict(state.order)
    core._by_key = {k: (v.request, v.ids) for k, v in state.by_key.items()}
    core._intents = {r.key: _Intent(r.visible, r.ids) for r in state.intents}
    core._queue = [_Queued(r.notice, r.visible_at, r.deleted) for r in state.queue]
    by_receipt = {q.notice.receipt: q for q in core._queue}
    inst = core._instances
    try:
        core._by_receipt = {r: by_receipt[r] for r in state.receipts}
        core._by_slot = {k: [inst[i] for i in ids] for k, ids in state.by_slot}
        core._spot_held = {pool: {i: inst[i] for i in ids} for pool, ids in state.spot_held}
    except KeyError as e:
        raise ValueError(f"the account's indexes name {e.args[0]!r}, which it does not hold") from e
    core._deleted = state.deleted
    core._due = list(state.due)
    core._next_event = dict(state.next_event)
    core._acked = set(state.acked)
    core._scanned = dict(state.scanned)
    core._faults = defaultdict(
        list, {op: [_unfault(f) for f in fs] for op, fs in state.faults.items()}
    )
    core._exhausted = dict(state.exhausted)


def read_account(data: bytes, source: str) -> AccountFile:
    """Parse an account file's bytes; anything but this format and version is
    an ``InputError`` naming ``source`` (the file) and what was expected."""
    expected = f"a simulated account file ({ACCOUNT_FORMAT} version {ACCOUNT_VERSION}, JSON)"
    if data.startswith(_PICKLE_MAGIC):
        raise InputError(
            source,
            None,
            expected,
            got="a pickle (written before version 2): delete it to start anew",
        )
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise InputError(source, None, expected, got="not JSON") from None
    if not isinstance(doc, dict) or doc.get("format") != ACCOUNT_FORMAT:
        got = doc.get("format") if isinstance(doc, dict) else None
        raise InputError(
            source, "format", expected, got=got if got is not None else "JSON of another kind"
        )
    if doc.get("version") != ACCOUNT_VERSION:
        raise InputError(source, "version", expected, got=doc.get("version"))
    try:
        return AccountFile.model_validate(doc)
    except ValidationError as e:
        first = input_error_from(source, e)
        raise InputError(source, first.field, f"{expected}: {first.expected}", got=first.got) from e
