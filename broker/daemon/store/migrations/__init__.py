"""The store's schema version and its migrations (Alembic).

Owns: the revisions (``versions/``, ``r0001_baseline`` = the tables as main
83a16c0 created them), ``upgrade`` (bring a database to the newest revision
this code knows, in one transaction under an upgrade lock),
``current_revision``, ``history`` (the revisions, oldest first), ``downgrade``
(back to an earlier revision, for running an older spotfolio on the store)
and ``SchemaTooNewError``.

What ``upgrade`` does with each kind of database:

- *empty*: ``schema.meta.create_all`` and stamp the head (Alembic's recipe
  for a new database; ``tests/unit/broker/daemon/test_migrations.py`` checks
  that the revisions, run from nothing, give exactly ``schema.meta``);
- *made before migrations* (no ``alembic_version``, the baseline's tables):
  stamped 0001, then upgraded like any other;
- *older than head*: the missing revisions run (the daemon does this at
  start; ``spotfolio db upgrade`` does it ahead of a deploy);
- *newer than this code* (a revision it does not know, written by a later
  spotfolio): ``SchemaTooNewError`` (an ``InputError``: the CLI exits 2 with
  one line naming both revisions); nothing is changed;
- *something else* (tables, but not the baseline's): ``InputError``.

Two daemons starting at once do not both upgrade: PostgreSQL takes a
transaction-scoped advisory lock, SQLite's ``BEGIN IMMEDIATE`` (the store's
engine) holds the write lock; the revision is read again under the lock.

Must not: hold the store's queries or open engines of its own (callers pass
the store's engine, so SQLite's pragmas and transaction mode apply).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection, Engine

from broker.daemon.store.schema import meta
from markets.errors import InputError

__all__ = [
    "BASELINE",
    "SCRIPT_LOCATION",
    "Revision",
    "SchemaChange",
    "SchemaTooNewError",
    "alembic_config",
    "current_revision",
    "downgrade",
    "head_revision",
    "history",
    "upgrade",
]

SCRIPT_LOCATION = Path(__file__).resolve().parent
BASELINE = "0001"
# The tables a database made before migrations has (main 83a16c0).
_BASELINE_TABLES = frozenset(
    {"actions", "decisions", "fleet", "hook_results", "lease", "notices", "plans"}
)
# pg_advisory_xact_lock key: any fixed 64-bit number private to this use.
_PG_LOCK_KEY = 0x5350_4F54_4D49_4752  # "SPOTMIGR"


class SchemaTooNewError(InputError):
    """The store carries a revision this code does not know (a newer spotfolio
    wrote it): refuse to run rather than misread its tables."""

    def __init__(self, found: str, head: str) -> None:
        super().__init__("store_url", None, f"a schema revision up to {head}", got=found)
        self.found = found
        self.head = head
        # One line naming both revisions and what to do (the CLI prints str()).
        self.args = (
            f"store_url: schema revision {found} is newer than this spotfolio knows "
            f"(its newest is {head}): run the spotfolio that upgraded the store",
        )


@dataclass(frozen=True)
class SchemaChange:
    """What ``upgrade`` found and left: ``before`` None for an empty database,
    ``"unversioned"`` for one made before migrations."""

    before: str | None
    after: str

    @property
    def changed(self) -> bool:
        return self.before != self.after


def alembic_config(version_locations: Sequence[Path]) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(SCRIPT_LOCATION))
    # ";" between locations (path_separator): paths may hold spaces.
    cfg.set_main_option("path_separator", ";")
    dirs = [SCRIPT_LOCATION / "versions", *version_locations]
    cfg.set_main_option("version_locations", ";".join(str(d) for d in dirs))
    return cfg


@lru_cache(maxsize=8)
def _script(version_locations: tuple[Path, ...]) -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config(version_locations))


def head_revision(version_locations: Sequence[Path] = ()) -> str:
    """The newest revision this code (plus ``version_locations``) knows."""
    head = _script(tuple(version_locations)).get_current_head()
    assert head is not None, "the store's migrations have no revision"
    return head


def current_revision(conn: Connection) -> str | None:
    """The database's revision (None: no ``alembic_version`` row)."""
    return MigrationContext.configure(conn).get_current_revision()


def upgrade(engine: Engine, *, version_locations: Sequence[Path] = ()) -> SchemaChange:
    """Bring the database to the head revision (see the module docstring);
    ``version_locations``: further revision folders (tests add a demo one)."""
    locations = tuple(version_locations)
    script = _script(locations)
    head = head_revision(locations)
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK_KEY})
        found = current_revision(conn)
        if found is not None:
            if found == head:
                return SchemaChange(found, head)
            if found not in {s.revision for s in script.walk_revisions()}:
                raise SchemaTooNewError(found, head)
            before: str | None = found
        else:
            tables = set(inspect(conn).get_table_names())
            if not tables:
                meta.create_all(conn)
                MigrationContext.configure(conn).stamp(script, head)
                return SchemaChange(None, head)
            if not tables >= _BASELINE_TABLES:
                raise InputError(
                    "store_url",
                    None,
                    "an empty database or a spotfolio store (tables "
                    f"{', '.join(sorted(_BASELINE_TABLES))})",
                    got=", ".join(sorted(tables)),
                )
            MigrationContext.configure(conn).stamp(script, BASELINE)
            before = "unversioned"
        cfg = alembic_config(locations)
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
    return SchemaChange(before, head)


@dataclass(frozen=True)
class Revision:
    """One schema revision: its id, the one it follows, and what it changes."""

    revision: str
    down_revision: str | None
    doc: str


def history(version_locations: Sequence[Path] = ()) -> list[Revision]:
    """Every revision this code (plus ``version_locations``) knows, oldest first."""
    out = []
    for s in _script(tuple(version_locations)).walk_revisions():  # newest first
        down = s.down_revision
        out.append(
            Revision(
                s.revision, down if isinstance(down, str) else None, " ".join((s.doc or "").split())
            )
        )
    return out[::-1]


def downgrade(
    engine: Engine, target: str, *, version_locations: Sequence[Path] = ()
) -> SchemaChange:
    """Take the database back to ``target`` (a known revision at or before
    its own), running each later revision's ``downgrade`` in one transaction
    under the upgrade lock. What those revisions added (columns, tables and
    their rows) is dropped."""
    locations = tuple(version_locations)
    known = [r.revision for r in history(locations)]
    if target not in known:
        raise InputError("REVISION", None, f"one of {', '.join(known)}", got=target)
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK_KEY})
        found = current_revision(conn)
        if found is None:
            raise InputError(
                "store_url",
                None,
                "a store with a schema revision (spotfolio db upgrade stamps one)",
                got="unversioned",
            )
        if found not in known:
            raise SchemaTooNewError(found, head_revision(locations))
        if known.index(target) > known.index(found):
            raise InputError(
                "REVISION",
                None,
                f"a revision at or before the store's {found} (db upgrade goes up)",
                got=target,
            )
        if target == found:
            return SchemaChange(found, found)
        cfg = alembic_config(locations)
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, target)
    return SchemaChange(found, target)
