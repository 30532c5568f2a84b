"""The fleet as a cloud sees it, and the requests that change it.

Owns the values that cross between the broker and a cloud provider adapter:
``Instance`` (one instance we own), ``LaunchRequest`` / ``TerminateRequest``
(each carrying an idempotency key that the adapter turns into the cloud's
client token / request id, so a retried request never launches twice),
``ActionResult`` (with ``ErrorKind``: what a refused request calls for),
and ``Notice`` (a revocation warning, a rebalance recommendation, a
preemption, or a state change, parsed from the cloud's own event shape into
one type).

Ownership: every instance Spotfolio launches carries ``OWNER_TAG`` =
the daemon's owner id (plus workload, pool and plan generation tags); an
adapter refuses to terminate an instance without it (least privilege, and the
IAM policy says the same).

Must not: do I/O or decide anything.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator

from markets.clock import ensure_utc
from markets.model import Tier

__all__ = [
    "GENERATION_TAG",
    "OWNER_TAG",
    "POOL_TAG",
    "WORKLOAD_TAG",
    "ActionResult",
    "ErrorKind",
    "Instance",
    "InstanceState",
    "LaunchRequest",
    "Notice",
    "NoticeKind",
    "TerminateRequest",
]

OWNER_TAG = "spotfolio:owner"
WORKLOAD_TAG = "spotfolio:workload"
POOL_TAG = "spotfolio:pool"
GENERATION_TAG = "spotfolio:plan-generation"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class InstanceState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    STOPPING = "stopping"
    TERMINATED = "terminated"


class Instance(_Frozen):
    """One instance carrying our ownership tag, as the cloud reports it."""

    instance_id: str = Field(min_length=1)
    pool_key: str
    tier: Tier
    workload: str
    state: InstanceState
    units: int = Field(gt=0)
    launched_at: datetime
    tags: dict[str, str] = Field(default_factory=dict)

    @field_validator("launched_at")
    @classmethod
    def _utc(cls, v: datetime) -> datetime:
        return ensure_utc(v)


class LaunchRequest(_Frozen):
    """Launch ``count`` instances of a pool on a tier for a workload.

    ``idempotency_key`` is stable for the same intent (plan generation,
    workload, pool, tier, slot), so a retry or a restart after a crash
    re-sends the same key and the cloud answers with the same instances.
    """

    idempotency_key: str = Field(min_length=8, max_length=64)
    pool_key: str
    tier: Tier
    workload: str
    count: int = Field(gt=0)
    owner: str = Field(min_length=1)
    plan_generation: int = Field(ge=0)


class TerminateRequest(_Frozen):
    idempotency_key: str = Field(min_length=8, max_length=64)
    instance_ids: tuple[str, ...] = Field(min_length=1)
    owner: str = Field(min_length=1)
    reason: str = ""


class ErrorKind(StrEnum):
    """Why a provider call did not do all it was asked, by what the caller
    should do (the branches of ``markets.errors``). A ``StrEnum``: results
    stored as JSON keep the plain strings."""

    TRANSIENT = "transient"  # retry later
    CAPACITY = "capacity"  # try the next acceptable pool
    QUOTA = "quota"  # an account limit: a human must act
    AUTH = "auth"  # credentials or permissions
    # The request itself was wrong: an idempotency key reused with other
    # parameters, or a terminate naming instances without our owner tag
    # (refused; the ones with it are still terminated).
    INPUT = "input"


class ActionResult(_Frozen):
    """What a provider did. ``instance_ids`` are the instances the request
    created (launch) or ended (terminate); ``replayed`` is true when the cloud
    recognised the idempotency key and nothing new happened. ``ok=False``
    comes with ``error`` (words) and ``error_kind``."""

    idempotency_key: str
    ok: bool
    instance_ids: tuple[str, ...] = ()
    replayed: bool = False
    error: str | None = None
    error_kind: ErrorKind | None = None


class NoticeKind(StrEnum):
    INTERRUPTION = "interruption"  # AWS spot interruption warning (2 min)
    REBALANCE = "rebalance"  # AWS rebalance recommendation (earlier, often false)
    PREEMPTED = "preempted"  # GCP preemption (30 s)
    STATE_CHANGE = "state_change"
    SCHEDULED = "scheduled"  # AWS Health scheduled change (retirement, maintenance)


class Notice(_Frozen):
    """One event about one instance, from any provider.

    ``notice_id`` is the provider's event id (EventBridge ``id``, GCP
    operation id): the idempotency key for handling it exactly once.
    ``deadline`` is when the capacity goes away (``None`` if unknown);
    ``receipt`` is the provider's handle to acknowledge (delete) it once its
    handling is durable.
    """

    notice_id: str = Field(min_length=1)
    kind: NoticeKind
    instance_id: str
    at: datetime
    deadline: datetime | None = None
    pool_key: str | None = None
    state: InstanceState | None = None
    receipt: str | None = None

    @field_validator("at", "deadline")
    @classmethod
    def _utc(cls, v: datetime | None) -> datetime | None:
        return None if v is None else ensure_utc(v)
