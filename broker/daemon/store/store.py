"""The daemon's durable state: fleet, plans, actions, notices, decisions,
checkpoint-hook results, lease.

Owns: ``Store`` (engine, schema, transactions), ``Tx`` (every read and write,
inside one transaction; SQLAlchemy Core, so the same statements run on
SQLite, the default file store, and on PostgreSQL by URL), the lease queries
and ``sqlite_url``.

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

``Tx`` combines the query areas, each in its own module: the action log in
``broker.daemon.store.actions`` (``ActionRecord``), instances and plans in
``broker.daemon.store.fleet`` (``FleetRow``), notices, decisions and hook results in
``broker.daemon.store.notices`` (``DecisionRecord``), all over ``broker.daemon.store.tx``
(the connection and insert-or-ignore). Tables live in
``broker.daemon.store.schema``. Import the public names from here.

Times are stored as naive UTC and come back as aware UTC. Must not: call a
provider, decide, or read the wall clock (callers pass ``now`` from their
injected clock).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from sqlalchemy import create_engine, event, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.pool import ConnectionPoolEntry, StaticPool

from broker.daemon.store.actions import ActionRecord, ActionsTx
from broker.daemon.store.fleet import FleetRow, FleetTx
from broker.daemon.store.notices import DecisionRecord, NoticesTx
from broker.daemon.store.schema import lease_t, meta
from markets.errors import InputError
from markets.extras import MissingExtraError, extra_for

__all__ = ["ActionRecord", "DecisionRecord", "FleetRow", "Store", "Tx", "sqlite_url"]


def sqlite_url(path: str) -> str:
    """A SQLAlchemy URL for a SQLite file (or ``:memory:``)."""
    return "sqlite://" if path == ":memory:" else f"sqlite:///{path}"


class Tx(ActionsTx, FleetTx, NoticesTx):
    """Reads and writes inside one transaction (``Store.transaction``)."""

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
            # A Store dropped without close() (a crash path, a test) still
            # closes its pooled connections: Python 3.13 warns of each
            # sqlite3 connection left to the garbage collector.
            self._dispose = weakref.finalize(self, self.engine.dispose)
            if create:
                meta.create_all(self.engine)
        except Exception as e:  # a driver or URL problem is a config error
            if isinstance(e, InputError):
                raise
            extra = extra_for(e) if isinstance(e, ModuleNotFoundError) else None
            if extra:  # the URL's driver (psycopg) is not installed; only the scheme shown
                raise MissingExtraError("store_url", extra, got=url.partition("://")[0]) from e
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
            def _pragmas(dbapi_conn: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
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
        self._dispose()  # once: later calls do nothing
