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
- *Fencing*: each acquisition adds one to the lease's ``epoch``. A daemon's
  store (``Store.fenced``) checks, at the start of every transaction, that
  the row still has its holder and epoch, with the row locked until commit,
  and stamps the epoch on the actions, plans and decisions it writes; a
  holder paused past a takeover writes nothing (``LeaseLostError``). Before
  each cloud call ``hold_lease`` checks and extends the lease; it and the
  renewal read the clock once the row is locked (a wait for the lock must
  not come off the TTL).
- Everything one step writes goes through one ``Tx`` (one transaction):
  nothing is half-written.

``Tx`` combines the query areas, each in its own module: the action log in
``broker.daemon.store.actions`` (``ActionRecord``), instances and plans in
``broker.daemon.store.instances`` (``FleetRow``), notices, decisions and hook results in
``broker.daemon.store.notices`` (``DecisionRecord``), the account's hazard
evidence in ``broker.daemon.store.experience``, the rebalance track record in
``broker.daemon.store.rebalance``, all over ``broker.daemon.store.tx``
(the connection and insert-or-ignore). Tables live in
``broker.daemon.store.schema``. Import the public names from here.

Times are stored as naive UTC and come back as aware UTC. Must not: call a
provider, decide, or read the wall clock (callers pass ``now`` from their
injected clock).
"""

from __future__ import annotations

import copy
import re
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import create_engine, event, select, update
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import ConnectionPoolEntry, StaticPool

from broker.daemon.store.actions import ActionRecord, ActionsTx
from broker.daemon.store.experience import ExperienceTx
from broker.daemon.store.instances import FleetRow, FleetTx
from broker.daemon.store.migrations import upgrade
from broker.daemon.store.notices import DecisionRecord, NoticesTx
from broker.daemon.store.rebalance import RebalanceTx
from broker.daemon.store.schema import lease_t
from markets.errors import FatalError, InputError
from markets.extras import MissingExtraError, extra_for

__all__ = [
    "ActionRecord",
    "DecisionRecord",
    "Fence",
    "FleetRow",
    "LeaseLostError",
    "Store",
    "Tx",
    "in_memory_url",
    "redact_url",
    "sqlite_url",
]

# user:password@ in a URL that SQLAlchemy cannot parse (the fallback of ``redact_url``).
_USERINFO = re.compile(r"(://[^:/@\s]*:)[^@/\s]*@")


def redact_url(url: str) -> str:
    """``url`` with its password shown as ``***`` (``postgresql://u:***@h/db``),
    for every message and log line that names a store."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return _USERINFO.sub(r"\1***@", url)
    if parsed.password is None:
        return url
    return parsed.render_as_string(hide_password=True)


def _redact_text(text: str, url: str) -> str:
    """A driver's message about ``url`` without the URL's password in it."""
    try:
        password = make_url(url).password
    except ArgumentError:
        password = None
    text = text.replace(url, redact_url(url))
    return text.replace(str(password), "***") if password else text


def _one_line(e: Exception) -> str:
    """A driver error as one line: the driver's own message (not SQLAlchemy's
    wrapper with its help link), whitespace collapsed."""
    orig = getattr(e, "orig", None)
    text = str(orig if isinstance(orig, BaseException) else e)
    return f"{type(orig or e).__name__}: {' '.join(text.split())}"


def in_memory_url(url: str) -> bool:
    """True for a store that lives only as long as the process: an empty URL,
    ``sqlite://``, ``sqlite:///``, ``:memory:`` and SQLite's memory modes."""
    text = url.strip()
    if text in ("", ":memory:"):
        return True
    if "://" not in text:
        return False  # a plain file path
    try:
        parsed = make_url(text)
    except ArgumentError:
        return False  # not a URL at all: the store's own error says so
    if not parsed.drivername.startswith("sqlite"):
        return False
    db = parsed.database or ""
    return db in ("", ":memory:") or ":memory:" in db or parsed.query.get("mode") == "memory"


def sqlite_url(path: str) -> str:
    """A SQLAlchemy URL for a SQLite file (or ``:memory:``)."""
    return "sqlite://" if path == ":memory:" else f"sqlite:///{path}"


class LeaseLostError(FatalError):
    """The lease this daemon held was taken over (its epoch is no longer the
    row's): it must stop, and nothing it still tries to write is written."""


@dataclass
class Fence:
    """The lease one daemon holds: its name, holder and fencing token
    (``epoch``: None until acquired, and then unfenced)."""

    name: str
    holder: str
    ttl_s: float
    epoch: int | None = None


class Tx(ActionsTx, FleetTx, NoticesTx, ExperienceTx, RebalanceTx):
    """Reads and writes inside one transaction (``Store.transaction``)."""

    # --- lease ---------------------------------------------------------------
    def acquire_lease(self, name: str, holder: str, ttl_s: float, now: datetime) -> int | None:
        """Take the lease unless another holder's is still live: the new
        epoch (one more than the last holder's), or None."""
        exp = now + timedelta(seconds=ttl_s)
        values = {"name": name, "holder": holder, "expires_at": exp, "acquired_at": now, "epoch": 1}
        if self._insert_ignore(lease_t, values, "name"):
            return 1
        won = self.conn.execute(
            update(lease_t)
            .where(
                lease_t.c.name == name,
                (lease_t.c.holder == holder) | (lease_t.c.expires_at < now),
            )
            .values(holder=holder, expires_at=exp, acquired_at=now, epoch=lease_t.c.epoch + 1)
        ).rowcount
        if not won:
            return None
        q = select(lease_t.c.epoch).where(lease_t.c.name == name)
        return int(self.conn.execute(q).scalar_one())

    def renew_lease(
        self, name: str, holder: str, ttl_s: float, now: datetime, epoch: int | None = None
    ) -> bool:
        """Extend our own lease (of ``epoch``, if given); False if someone
        else holds it now."""
        q = update(lease_t).where(lease_t.c.name == name, lease_t.c.holder == holder)
        if epoch is not None:
            q = q.where(lease_t.c.epoch == epoch)
        won = self.conn.execute(q.values(expires_at=now + timedelta(seconds=ttl_s))).rowcount
        return bool(won)

    def lock_lease(self, name: str) -> None:
        """Lock the lease row until this transaction ends (``FOR UPDATE`` on
        PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` holds the one write lock
        already): a renewal locks first and reads the clock after, so a wait
        for the row does not come off the TTL."""
        self.conn.execute(select(lease_t.c.name).where(lease_t.c.name == name).with_for_update())

    def check_lease(self, fence: Fence) -> None:
        """Raise ``LeaseLostError`` unless ``fence`` is the lease row as it is
        now. The row is locked (``FOR UPDATE`` on PostgreSQL; SQLite's
        ``BEGIN IMMEDIATE`` already holds the one write lock) until this
        transaction ends, so no takeover lands between the check and the
        writes that follow it."""
        r = self.conn.execute(
            select(lease_t.c.holder, lease_t.c.epoch)
            .where(lease_t.c.name == fence.name)
            .with_for_update()
        ).first()
        if r is None or str(r[0]) != fence.holder or int(r[1]) != fence.epoch:
            held = "nobody" if r is None else f"{r[0]} (epoch {r[1]})"
            raise LeaseLostError(
                f"lease {fence.name} epoch {fence.epoch} is no longer ours: held by {held}; "
                "nothing more is written"
            )

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
        self.fence: Fence | None = None
        try:
            self.engine: Engine = self._engine(url)
            # A Store dropped without close() (a crash path, a test) still
            # closes its pooled connections: Python 3.13 warns of each
            # sqlite3 connection left to the garbage collector.
            self._dispose = weakref.finalize(self, self.engine.dispose)
            if create:  # create, or migrate to the head revision (or refuse a newer one)
                try:
                    upgrade(self.engine)
                except BaseException:
                    self.engine.dispose()  # no pooled connection outlives the refusal
                    raise
        except Exception as e:  # a driver or URL problem is a config error
            if isinstance(e, InputError):
                raise
            extra = extra_for(e) if isinstance(e, ModuleNotFoundError) else None
            if extra:  # the URL's driver (psycopg) is not installed; only the scheme shown
                raise MissingExtraError("store_url", extra, got=url.partition("://")[0]) from e
            # Never the password: the message reaches the terminal and the log.
            detail = _redact_text(_one_line(e), url)
            raise InputError(
                "store_url", None, f"a reachable database URL ({detail})", got=redact_url(url)
            ) from None

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

    def fenced(self, fence: Fence) -> Store:
        """This store (the same engine) for the holder of ``fence``: once its
        epoch is set, every transaction first checks that the lease is still
        that epoch's (``Tx.check_lease``) and stamps it on what it writes."""
        other = copy.copy(self)
        other.fence = fence
        return other

    @contextmanager
    def transaction(self) -> Iterator[Tx]:
        """One transaction: committed on exit, rolled back on an exception
        (a lost lease included: nothing of it is written)."""
        fence = self.fence
        epoch = None if fence is None else fence.epoch
        with self.engine.begin() as conn:
            tx = Tx(conn, epoch)
            if fence is not None and epoch is not None:
                tx.check_lease(fence)
            yield tx

    def hold_lease(self, clock: Callable[[], datetime]) -> None:
        """Before a cloud call: check the fence and extend the lease to
        ``ttl_s`` past the moment the lease row is ours (``clock`` is read
        after the lock is taken), so no other daemon can take it over while
        the call is on its way (the call itself cannot carry the token). A
        time read before the lock would shorten the hold by the wait for
        it: with many daemons queued on the store, by most of the TTL."""
        fence = self.fence
        if fence is None or fence.epoch is None:
            return
        with self.transaction() as tx:
            tx.renew_lease(fence.name, fence.holder, fence.ttl_s, clock(), fence.epoch)

    def close(self) -> None:
        self._dispose()  # once: later calls do nothing
