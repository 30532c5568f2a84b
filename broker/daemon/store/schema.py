"""The daemon store's tables (SQLAlchemy Core), shared by SQLite and PostgreSQL.

Owns: ``meta`` and the tables ``fleet``, ``plans``, ``actions`` (UNIQUE
idempotency key), ``notices`` (notice id as key), ``decisions`` (UNIQUE
notice id; NULL for the daemon's own), ``hook_results`` (one per notice:
what its checkpoint hook did), ``pool_experience`` (revocations and spot
hours held per pool, the account's own hazard evidence), ``rebalance_record``
(per owner and pool: rebalance recommendations resolved and those followed by
an interruption) and ``lease``; ``UtcDateTime`` (aware
UTC in Python, naive UTC in the database, so both dialects compare times as
values). ``broker.daemon.store.store`` and its ``store_*`` query modules read and write them.

Must not: open connections or hold queries.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import JSON, Boolean, Column, DateTime, Float, Integer, MetaData, String, Table
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

from markets.clock import ensure_utc

__all__ = [
    "UtcDateTime",
    "actions_t",
    "decisions_t",
    "fleet_t",
    "hook_results_t",
    "lease_t",
    "meta",
    "notices_t",
    "plans_t",
    "pool_experience_t",
    "rebalance_t",
]


class UtcDateTime(TypeDecorator[datetime]):
    """Aware UTC in Python, naive UTC in the database (same on both dialects)."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else ensure_utc(value).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else value.replace(tzinfo=UTC)


meta = MetaData()

fleet_t = Table(
    "fleet",
    meta,
    Column("instance_id", String(64), primary_key=True),
    Column("owner", String(128), nullable=False, index=True),
    Column("workload", String(64), nullable=False),
    Column("pool_key", String(200), nullable=False),
    Column("tier", String(16), nullable=False),
    Column("units", Integer, nullable=False),
    Column("state", String(16), nullable=False),
    Column("launched_at", UtcDateTime, nullable=False),
    Column("action_key", String(64)),
    Column("updated_at", UtcDateTime, nullable=False),
)
plans_t = Table(
    "plans",
    meta,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("owner", String(128), nullable=False, index=True),
    Column("generation", Integer, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("summary", JSON, nullable=False),
    Column("lease_epoch", Integer),  # the fencing token of the daemon that wrote it
)
actions_t = Table(
    "actions",
    meta,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("idempotency_key", String(64), nullable=False, unique=True),
    Column("owner", String(128), nullable=False, index=True),
    Column("kind", String(16), nullable=False),  # launch | terminate
    Column("payload", JSON, nullable=False),
    Column("status", String(16), nullable=False, index=True),  # pending | done | failed
    Column("result", JSON),
    Column("created_at", UtcDateTime, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    Column("lease_epoch", Integer),  # the fencing token of the daemon that wrote it
)
notices_t = Table(
    "notices",
    meta,
    Column("notice_id", String(128), primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("instance_id", String(64), nullable=False),
    Column("at", UtcDateTime, nullable=False),
    Column("received_at", UtcDateTime, nullable=False),
    Column("handled_at", UtcDateTime),
    # when the notice's instance goes (a revocation's window end, a scheduled
    # change's start); NULL: not given, the default window applies
    Column("deadline", UtcDateTime),
)
decisions_t = Table(
    "decisions",
    meta,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("notice_id", String(128), unique=True),  # NULL for the daemon's own decisions
    Column("owner", String(128), nullable=False, index=True),
    Column("kind", String(24), nullable=False),
    Column("workload", String(64)),
    Column("reason", String(1000), nullable=False),
    Column("latency_s", Float, nullable=False),
    Column("break_glass_usd", Float, nullable=False),
    Column("payload", JSON, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("lease_epoch", Integer),  # the fencing token of the daemon that wrote it
)
hook_results_t = Table(
    "hook_results",
    meta,
    Column("notice_id", String(128), primary_key=True),
    Column("owner", String(128), nullable=False, index=True),
    Column("workload", String(64), nullable=False),
    Column("ok", Boolean, nullable=False),
    Column("record", JSON, nullable=False),  # checkpoint_hook.HookResult.as_record()
    Column("created_at", UtcDateTime, nullable=False),
)
pool_experience_t = Table(
    "pool_experience",
    meta,
    Column("owner", String(128), primary_key=True),
    Column("pool_key", String(200), primary_key=True),
    Column("revocations", Integer, nullable=False),
    Column("held_hours", Float, nullable=False),
    # counted up to here: held hours before it and notices dated before it are in
    Column("counted_to", UtcDateTime, nullable=False),
)
rebalance_t = Table(
    "rebalance_record",
    meta,
    Column("owner", String(128), primary_key=True),
    Column("pool_key", String(200), primary_key=True),
    Column("hits", Integer, nullable=False),  # followed by an interruption in the window
    Column("resolved", Integer, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
)
lease_t = Table(
    "lease",
    meta,
    Column("name", String(128), primary_key=True),
    Column("holder", String(128), nullable=False),
    Column("expires_at", UtcDateTime, nullable=False),
    Column("acquired_at", UtcDateTime, nullable=False),
    # The fencing token: +1 at every acquisition; every write of the holder
    # carries it and is refused once it is not the row's (a takeover).
    Column("epoch", Integer, nullable=False, server_default="0"),
)
