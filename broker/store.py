"""The daemon's durable state: fleet, plans, actions, notices, decisions,
checkpoint-hook results, lease.

Owns: the tables (SQLAlchemy Core, so the same statements run on SQLite, the
default file store, and on PostgreSQL by URL), ``Store`` (engine, schema,
transactions) and ``Tx`` (every read and write, inside one transaction).

Rules the daemon relies on:

- *Write-ahead actions*: an action (launch/terminate) is recorded ``pending``
  under its idempotency key before the provider is called and marked
  ``done``/``failed`` after; a restart re-sends every pending key. Recording a
  key twice is a no-op that returns the first record (``INSERT ... ON
  CONFLICT DO NOTHING`` on both dialects).
- *Exactly-once notices*: a notice is recorded once by ``notice_id``; a
  decision is recorded at most once per notice (``decisions.notice_id`` is
  UNIQUE; decisions of the daemon's own, e.g. returning to spot, have none).
  The sum of ``decisions.break_glass_usd`` is the break-glass total: notice
  decisions add what they commit, the daemon's own add their net change
  (negative when a stretch ends under its estimate).
- *Batches*: a received batch of notices, its decisions and their actions
  are written with one statement per table (``record_notices``,
  ``record_decisions``, ``record_actions``: executemany, ``ON CONFLICT DO
  NOTHING``), which is what keeps a notice storm under a second on SQLite.
- *One active daemon per account*: ``lease`` rows are taken with
  compare-and-set ``UPDATE ... WHERE holder = me OR expires_at < now``; the
  row count says who won. Row locks (PostgreSQL) and the single writer
  (SQLite) make the check and the write one step.
- Everything one step writes goes through one ``Tx`` (one transaction):
  nothing is half-written.

Tables live in ``broker.store_schema``. Times are stored as naive UTC and come
back as aware UTC. Must not: call a provider, decide, or read the wall clock
(callers pass ``now`` from their injected clock).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    Table,
    bindparam,
    create_engine,
    event,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.pool import StaticPool

from broker.store_schema import (
    actions_t,
    decisions_t,
    fleet_t,
    hook_results_t,
    lease_t,
    meta,
    notices_t,
    plans_t,
)
from markets.errors import InputError
from markets.fleet import Instance, InstanceState

__all__ = ["ActionRecord", "DecisionRecord", "FleetRow", "Store", "Tx", "sqlite_url"]


@dataclass(frozen=True)
class ActionRecord:
    idempotency_key: str
    owner: str
    kind: str
    payload: dict[str, Any]
    status: str
    result: dict[str, Any] | None
    created_at: datetime
    created: bool = False  # True when this call inserted it


@dataclass(frozen=True)
class FleetRow:
    instance_id: str
    owner: str
    workload: str
    pool_key: str
    tier: str
    units: int
    state: str
    launched_at: datetime
    action_key: str | None


@dataclass(frozen=True)
class DecisionRecord:
    notice_id: str | None
    kind: str
    workload: str | None
    reason: str
    latency_s: float
    break_glass_usd: float
    payload: dict[str, Any]
    created_at: datetime


def sqlite_url(path: str) -> str:
    """A SQLAlchemy URL for a SQLite file (or ``:memory:``)."""
    return "sqlite://" if path == ":memory:" else f"sqlite:///{path}"


def _jsonable(obj: Mapping[str, Any]) -> dict[str, Any]:
    # Round-trip through json so datetimes and enums are stored as strings.
    out: dict[str, Any] = json.loads(json.dumps(dict(obj), default=str))
    return out


_INSERT_IGNORE: dict[tuple[str, str], Any] = {}
_INSERT_MANY: dict[tuple[str, str], Any] = {}


class Tx:
    """Reads and writes inside one transaction (``Store.transaction``)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def _insert_ignore(self, table: Table, values: dict[str, Any], key: str) -> bool:
        """Insert unless a row with the same ``key`` exists; True if inserted."""
        name = self.conn.dialect.name
        if name in ("sqlite", "postgresql"):
            # RETURNING, not rowcount: drivers disagree on rowcount here. The
            # statement carries no values (they are parameters), so it is built
            # and compiled once per table.
            stmt = _INSERT_IGNORE.get((name, table.name))
            if stmt is None:
                from sqlalchemy.dialects import postgresql, sqlite

                d_insert = sqlite.insert if name == "sqlite" else postgresql.insert
                stmt = (
                    d_insert(table)
                    .on_conflict_do_nothing(index_elements=[key])
                    .returning(table.c[key])
                )
                _INSERT_IGNORE[(name, table.name)] = stmt
            return self.conn.execute(stmt, values).first() is not None
        # Other dialects: SELECT then INSERT in a savepoint.
        exists = self.conn.execute(select(table.c[key]).where(table.c[key] == values[key])).first()
        if exists:
            return False
        try:
            with self.conn.begin_nested():
                self.conn.execute(insert(table).values(**values))
        except IntegrityError:
            return False
        return True

    def _insert_many_ignore(self, table: Table, rows: Sequence[dict[str, Any]], key: str) -> None:
        """Insert ``rows`` in one statement (executemany), skipping keys that
        exist: for batches whose callers do not need to know which were new."""
        if not rows:
            return
        name = self.conn.dialect.name
        if name not in ("sqlite", "postgresql"):
            for row in rows:
                self._insert_ignore(table, row, key)
            return
        stmt = _INSERT_MANY.get((name, table.name))
        if stmt is None:
            from sqlalchemy.dialects import postgresql, sqlite

            d_insert = sqlite.insert if name == "sqlite" else postgresql.insert
            stmt = d_insert(table).on_conflict_do_nothing(index_elements=[key])
            _INSERT_MANY[(name, table.name)] = stmt
        self.conn.execute(stmt, list(rows))

    # --- actions ----------------------------------------------------------
    def record_action(
        self, key: str, owner: str, kind: str, payload: Mapping[str, Any], now: datetime
    ) -> ActionRecord:
        """Record a pending action once; always returns the stored record."""
        values = {
            "idempotency_key": key,
            "owner": owner,
            "kind": kind,
            "payload": _jsonable(payload),
            "status": "pending",
            "result": None,
            "created_at": now,
            "updated_at": now,
        }
        created = self._insert_ignore(actions_t, values, "idempotency_key")
        rec = self.action(key)
        assert rec is not None
        return ActionRecord(**{**rec.__dict__, "created": created})

    def record_actions(
        self, owner: str, actions: Sequence[tuple[str, str, Mapping[str, Any]]], now: datetime
    ) -> None:
        """Record ``(key, kind, payload)`` actions pending in one statement
        (a key already recorded keeps its record)."""
        rows = [
            {
                "idempotency_key": key,
                "owner": owner,
                "kind": kind,
                "payload": _jsonable(payload),
                "status": "pending",
                "result": None,
                "created_at": now,
                "updated_at": now,
            }
            for key, kind, payload in actions
        ]
        self._insert_many_ignore(actions_t, rows, "idempotency_key")

    def action(self, key: str) -> ActionRecord | None:
        r = self.conn.execute(select(actions_t).where(actions_t.c.idempotency_key == key)).first()
        if r is None:
            return None
        m = r._mapping
        return ActionRecord(
            m["idempotency_key"],
            m["owner"],
            m["kind"],
            m["payload"],
            m["status"],
            m["result"],
            m["created_at"],
        )

    def finish_action(
        self, key: str, status: str, result: Mapping[str, Any], now: datetime
    ) -> None:
        if status not in ("done", "failed"):
            raise ValueError(f"an action finishes done or failed, not {status!r}")
        self.conn.execute(
            update(actions_t)
            .where(actions_t.c.idempotency_key == key)
            .values(status=status, result=_jsonable(result), updated_at=now)
        )

    def pending_actions(self, owner: str) -> list[ActionRecord]:
        rows = self.conn.execute(
            select(actions_t.c.idempotency_key)
            .where(actions_t.c.owner == owner, actions_t.c.status == "pending")
            .order_by(actions_t.c.id)
        ).all()
        return [a for (k,) in rows if (a := self.action(k)) is not None]

    def count_actions(self, owner: str, status: str | None = None) -> int:
        q = select(func.count()).select_from(actions_t).where(actions_t.c.owner == owner)
        if status is not None:
            q = q.where(actions_t.c.status == status)
        return int(self.conn.execute(q).scalar_one())

    # --- fleet -------------------------------------------------------------
    def upsert_instances(
        self,
        owner: str,
        instances: Sequence[Instance],
        now: datetime,
        action_key: str | None = None,
    ) -> None:
        """Insert new instances, update the state of known ones (bulk statements)."""
        if not instances:
            return
        ids = [i.instance_id for i in instances]
        known = dict(
            self.conn.execute(
                select(fleet_t.c.instance_id, fleet_t.c.state).where(fleet_t.c.instance_id.in_(ids))
            ).all()
        )
        fresh = [
            {
                "instance_id": i.instance_id,
                "owner": owner,
                "workload": i.workload,
                "pool_key": i.pool_key,
                "tier": i.tier.value,
                "units": i.units,
                "state": i.state.value,
                "launched_at": i.launched_at,
                "action_key": action_key,
                "updated_at": now,
            }
            for i in instances
            if i.instance_id not in known
        ]
        self._insert_many_ignore(fleet_t, fresh, "instance_id")
        changed = [
            {"b_id": i.instance_id, "b_state": i.state.value, "b_now": now}
            for i in instances
            if i.instance_id in known and known[i.instance_id] != i.state.value
        ]
        if changed:
            self.conn.execute(
                update(fleet_t)
                .where(fleet_t.c.instance_id == bindparam("b_id"))
                .values(state=bindparam("b_state"), updated_at=bindparam("b_now")),
                changed,
            )

    def mark_instances(self, ids: Sequence[str], state: InstanceState, now: datetime) -> None:
        if ids:
            self.conn.execute(
                update(fleet_t)
                .where(fleet_t.c.instance_id.in_(list(ids)))
                .values(state=state.value, updated_at=now)
            )

    def fleet(self, owner: str, *, alive_only: bool = True) -> list[FleetRow]:
        q = select(fleet_t).where(fleet_t.c.owner == owner)
        if alive_only:
            q = q.where(fleet_t.c.state != InstanceState.TERMINATED.value)
        rows = self.conn.execute(q.order_by(fleet_t.c.instance_id)).all()
        return [FleetRow(**{c: r._mapping[c] for c in FleetRow.__dataclass_fields__}) for r in rows]

    def known_instance_ids(self, owner: str) -> set[str]:
        q = select(fleet_t.c.instance_id).where(fleet_t.c.owner == owner)
        return {r[0] for r in self.conn.execute(q)}

    # --- plans -------------------------------------------------------------
    def record_plan(self, owner: str, summary: Mapping[str, Any], now: datetime) -> int:
        """Store a plan summary under the owner's next generation number."""
        last = self.conn.execute(
            select(func.max(plans_t.c.generation)).where(plans_t.c.owner == owner)
        ).scalar_one()
        gen = 1 if last is None else int(last) + 1
        self.conn.execute(
            insert(plans_t).values(
                owner=owner, generation=gen, created_at=now, summary=_jsonable(summary)
            )
        )
        return gen

    def latest_plan(self, owner: str) -> tuple[int, datetime, dict[str, Any]] | None:
        r = self.conn.execute(
            select(plans_t.c.generation, plans_t.c.created_at, plans_t.c.summary)
            .where(plans_t.c.owner == owner)
            .order_by(plans_t.c.generation.desc())
            .limit(1)
        ).first()
        return None if r is None else (int(r[0]), r[1], r[2])

    # --- notices and decisions --------------------------------------------
    def record_notice(
        self, notice_id: str, kind: str, instance_id: str, at: datetime, now: datetime
    ) -> bool:
        """True when the notice is new (first delivery)."""
        values = {
            "notice_id": notice_id,
            "kind": kind,
            "instance_id": instance_id,
            "at": at,
            "received_at": now,
            "handled_at": None,
        }
        return self._insert_ignore(notices_t, values, "notice_id")

    def notice_handled(self, notice_id: str) -> bool:
        r = self.conn.execute(
            select(notices_t.c.handled_at).where(notices_t.c.notice_id == notice_id)
        ).first()
        return r is not None and r[0] is not None

    def mark_notice_handled(self, notice_id: str, now: datetime) -> None:
        self.conn.execute(
            update(notices_t)
            .where(notices_t.c.notice_id == notice_id, notices_t.c.handled_at.is_(None))
            .values(handled_at=now)
        )

    def record_notices(
        self, notices: Sequence[tuple[str, str, str, datetime]], now: datetime
    ) -> set[str]:
        """Record each ``(notice_id, kind, instance_id, at)`` once (a batch in
        two statements); returns the ids that were new (first delivery)."""
        ids = list(dict.fromkeys(n[0] for n in notices))
        if not ids:
            return set()
        q = select(notices_t.c.notice_id).where(notices_t.c.notice_id.in_(ids))
        known = {str(r[0]) for r in self.conn.execute(q)}
        rows: dict[str, dict[str, Any]] = {}
        for nid, kind, iid, at in notices:
            if nid not in known and nid not in rows:
                rows[nid] = {
                    "notice_id": nid,
                    "kind": kind,
                    "instance_id": iid,
                    "at": at,
                    "received_at": now,
                    "handled_at": None,
                }
        # One writer holds the lease (and SQLite's BEGIN IMMEDIATE lock), so
        # nothing can insert between the SELECT and this.
        self._insert_many_ignore(notices_t, list(rows.values()), "notice_id")
        return set(rows)

    def handled_notices(self, notice_ids: Sequence[str]) -> set[str]:
        """Which of ``notice_ids`` are handled (one query for a batch)."""
        if not notice_ids:
            return set()
        q = select(notices_t.c.notice_id).where(
            notices_t.c.notice_id.in_(list(notice_ids)), notices_t.c.handled_at.is_not(None)
        )
        return {str(r[0]) for r in self.conn.execute(q)}

    def mark_notices_handled(self, notice_ids: Sequence[str], now: datetime) -> None:
        if notice_ids:
            self.conn.execute(
                update(notices_t)
                .where(
                    notices_t.c.notice_id.in_(list(notice_ids)), notices_t.c.handled_at.is_(None)
                )
                .values(handled_at=now)
            )

    def count_notices(self, *, unhandled: bool = False) -> int:
        q = select(func.count()).select_from(notices_t)
        if unhandled:
            q = q.where(notices_t.c.handled_at.is_(None))
        return int(self.conn.execute(q).scalar_one())

    def record_decision(self, owner: str, d: DecisionRecord) -> bool:
        """Store a decision; False if the notice already has one."""
        values = {
            "notice_id": d.notice_id,
            "owner": owner,
            "kind": d.kind,
            "workload": d.workload,
            "reason": d.reason[:1000],
            "latency_s": d.latency_s,
            "break_glass_usd": d.break_glass_usd,
            "payload": _jsonable(d.payload),
            "created_at": d.created_at,
        }
        if d.notice_id is None:
            self.conn.execute(insert(decisions_t).values(**values))
            return True
        return self._insert_ignore(decisions_t, values, "notice_id")

    def record_decisions(self, owner: str, records: Sequence[DecisionRecord]) -> None:
        """Store a batch of decisions; a notice that already has one keeps it."""
        rows = [
            {
                "notice_id": d.notice_id,
                "owner": owner,
                "kind": d.kind,
                "workload": d.workload,
                "reason": d.reason[:1000],
                "latency_s": d.latency_s,
                "break_glass_usd": d.break_glass_usd,
                "payload": _jsonable(d.payload),
                "created_at": d.created_at,
            }
            for d in records
        ]
        own = [r for r in rows if r["notice_id"] is None]
        if own:
            self.conn.execute(insert(decisions_t), own)
        self._insert_many_ignore(
            decisions_t, [r for r in rows if r["notice_id"] is not None], "notice_id"
        )

    def decisions(
        self,
        owner: str,
        *,
        since: datetime | None = None,
        notice_id: str | None = None,
        kinds: Sequence[str] | None = None,
    ) -> list[DecisionRecord]:
        q = select(decisions_t).where(decisions_t.c.owner == owner)
        if since is not None:
            q = q.where(decisions_t.c.created_at >= since)
        if notice_id is not None:
            q = q.where(decisions_t.c.notice_id == notice_id)
        if kinds is not None:
            q = q.where(decisions_t.c.kind.in_(list(kinds)))
        rows = self.conn.execute(q.order_by(decisions_t.c.id)).all()
        return [
            DecisionRecord(**{c: r._mapping[c] for c in DecisionRecord.__dataclass_fields__})
            for r in rows
        ]

    def decisions_for_notices(
        self, owner: str, notice_ids: Sequence[str]
    ) -> dict[str, DecisionRecord]:
        """The stored decisions of ``notice_ids`` (one query for a batch)."""
        if not notice_ids:
            return {}
        q = select(decisions_t).where(
            decisions_t.c.owner == owner, decisions_t.c.notice_id.in_(list(notice_ids))
        )
        out: dict[str, DecisionRecord] = {}
        for r in self.conn.execute(q):
            rec = DecisionRecord(**{c: r._mapping[c] for c in DecisionRecord.__dataclass_fields__})
            if rec.notice_id is not None:
                out[rec.notice_id] = rec
        return out

    def decision_counts(self, owner: str) -> dict[str, int]:
        q = (
            select(decisions_t.c.kind, func.count())
            .where(decisions_t.c.owner == owner)
            .group_by(decisions_t.c.kind)
        )
        return {str(k): int(n) for k, n in self.conn.execute(q)}

    def break_glass_usd(self, owner: str) -> float:
        q = select(func.coalesce(func.sum(decisions_t.c.break_glass_usd), 0.0)).where(
            decisions_t.c.owner == owner
        )
        return float(self.conn.execute(q).scalar_one())

    def record_hook_result(
        self,
        owner: str,
        notice_id: str,
        workload: str,
        record: Mapping[str, Any],
        now: datetime,
    ) -> bool:
        """What a notice's checkpoint hook did (once per notice); True if new."""
        values = {
            "notice_id": notice_id,
            "owner": owner,
            "workload": workload,
            "ok": bool(record.get("ok")),
            "record": _jsonable(record),
            "created_at": now,
        }
        return self._insert_ignore(hook_results_t, values, "notice_id")

    def hook_results(self, owner: str) -> dict[str, dict[str, Any]]:
        """Notice id -> its hook's record."""
        q = select(hook_results_t.c.notice_id, hook_results_t.c.record).where(
            hook_results_t.c.owner == owner
        )
        return {str(n): dict(r) for n, r in self.conn.execute(q)}

    # --- lease ---------------------------------------------------------------
    def acquire_lease(self, name: str, holder: str, ttl_s: float, now: datetime) -> bool:
        """Take or renew the lease unless another holder's is still live."""
        exp = now + timedelta(seconds=ttl_s)
        values = {"name": name, "holder": holder, "expires_at": exp, "acquired_at": now}
        if self._insert_ignore(lease_t, values, "name"):
            return True
        won = self.conn.execute(
            update(lease_t)
            .where(
                lease_t.c.name == name,
                (lease_t.c.holder == holder) | (lease_t.c.expires_at < now),
            )
            .values(holder=holder, expires_at=exp, acquired_at=now)
        ).rowcount
        return bool(won)

    def renew_lease(self, name: str, holder: str, ttl_s: float, now: datetime) -> bool:
        """Extend our own lease; False if someone else holds it now."""
        won = self.conn.execute(
            update(lease_t)
            .where(lease_t.c.name == name, lease_t.c.holder == holder)
            .values(expires_at=now + timedelta(seconds=ttl_s))
        ).rowcount
        return bool(won)

    def release_lease(self, name: str, holder: str, now: datetime) -> None:
        self.conn.execute(
            update(lease_t)
            .where(lease_t.c.name == name, lease_t.c.holder == holder)
            .values(expires_at=now - timedelta(microseconds=1))
        )

    def lease_holder(self, name: str, now: datetime) -> str | None:
        r = self.conn.execute(
            select(lease_t.c.holder, lease_t.c.expires_at).where(lease_t.c.name == name)
        ).first()
        return None if r is None or r[1] < now else str(r[0])


class Store:
    """An engine plus the schema. ``url``: a SQLAlchemy URL (``sqlite:///path``,
    ``postgresql+psycopg://...``) or a plain file path for SQLite."""

    def __init__(self, url: str, *, create: bool = True) -> None:
        if "://" not in url:
            url = sqlite_url(url)
        self.url = url
        try:
            self.engine: Engine = self._engine(url)
            if create:
                meta.create_all(self.engine)
        except Exception as e:  # a driver or URL problem is a config error
            if isinstance(e, InputError):
                raise
            raise InputError("store_url", None, f"a reachable database URL ({e})", got=url) from e

    @staticmethod
    def _engine(url: str) -> Engine:
        if url.startswith("sqlite"):
            memory = url in ("sqlite://", "sqlite:///:memory:")
            eng = create_engine(
                url,
                # One shared connection for :memory: (else each thread sees its
                # own empty database); a 30 s busy timeout for files.
                poolclass=StaticPool if memory else None,
                connect_args={"check_same_thread": False, "timeout": 30.0},
            )

            @event.listens_for(eng, "connect")
            def _pragmas(dbapi_conn: Any, _record: Any) -> None:
                # We issue BEGIN ourselves (below), so the driver must not.
                dbapi_conn.isolation_level = None
                cur = dbapi_conn.cursor()
                if not memory:
                    # WAL: readers do not block the writer. synchronous=NORMAL
                    # (SQLite docs, "WAL mode"): a committed transaction
                    # survives a process kill; a power cut may lose the last
                    # ones, which the restart's listing by tags and its
                    # pending-key replay cover. It saves an fsync per commit.
                    cur.execute("PRAGMA journal_mode=WAL")
                    cur.execute("PRAGMA synchronous=NORMAL")
                cur.execute("PRAGMA foreign_keys=ON")
                cur.close()

            @event.listens_for(eng, "begin")
            def _begin(conn: Connection) -> None:
                # IMMEDIATE takes the write lock at BEGIN: two daemons racing
                # for the lease queue on the busy timeout instead of failing
                # when a read transaction tries to become a write one.
                conn.exec_driver_sql("BEGIN IMMEDIATE")

            return eng
        return create_engine(url, pool_pre_ping=True)

    @contextmanager
    def transaction(self) -> Iterator[Tx]:
        """One transaction: committed on exit, rolled back on an exception."""
        with self.engine.begin() as conn:
            yield Tx(conn)

    def close(self) -> None:
        self.engine.dispose()
