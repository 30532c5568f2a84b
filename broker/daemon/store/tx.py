"""The base of every store transaction: its connection and the insert-or-ignore
statements the query areas share.

Owns: ``TxBase`` (the connection of one transaction, ``_insert_ignore`` for a
single row, ``_insert_many_ignore`` for a batch: ``INSERT ... ON CONFLICT DO
NOTHING`` on SQLite and PostgreSQL, a savepoint elsewhere) and ``jsonable``
(how a JSON column's value is stored). The queries themselves live in
``broker.daemon.store.actions``, ``broker.daemon.store.instances`` and
``broker.daemon.store.notices``; ``broker.daemon.store.store.Tx`` combines them.

Must not: know any table in particular, open or commit transactions (that is
``broker.daemon.store.store.Store``), decide, or read the clock.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Table, insert, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql.expression import Executable

__all__ = ["Json", "Row", "TxBase", "jsonable"]

# A JSON object as the store's JSON columns give it back: ``json.loads`` and
# SQLAlchemy's JSON type return untyped values, so its values are ``Any``
# (the reader knows the shape it wrote). What goes in is any Mapping[str, object].
Json = dict[str, Any]
# A row's column values for an INSERT (SQLAlchemy takes any Python value).
Row = Mapping[str, object]


def jsonable(obj: Mapping[str, object]) -> Json:
    # Round-trip through json so datetimes and enums are stored as strings.
    out: Json = json.loads(json.dumps(dict(obj), default=str))
    return out


# Compiled statements, built once per (dialect, table).
_INSERT_IGNORE: dict[tuple[str, str], Executable] = {}
_INSERT_MANY: dict[tuple[str, str], Executable] = {}


class TxBase:
    """A connection inside one transaction (``Store.transaction``)."""

    def __init__(self, conn: Connection, lease_epoch: int | None = None) -> None:
        self.conn = conn
        # The fencing token of the lease this transaction was checked
        # against (``Store.fenced``), stamped on the action, plan and
        # decision rows it writes; None: an unfenced transaction.
        self.lease_epoch = lease_epoch

    def _insert_ignore(self, table: Table, values: Row, key: str) -> bool:
        """Insert unless a row with the same ``key`` exists; True if inserted."""
        name = self.conn.dialect.name
        if name in ("sqlite", "postgresql"):
            # RETURNING, not rowcount: drivers disagree on rowcount here. The
            # statement carries no values (they are parameters), so it is built
            # and compiled once per table.
            stmt = _INSERT_IGNORE.get((name, table.name))
            if stmt is None:
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

    def _insert_many_ignore(self, table: Table, rows: Sequence[Row], key: str) -> None:
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
            d_insert = sqlite.insert if name == "sqlite" else postgresql.insert
            stmt = d_insert(table).on_conflict_do_nothing(index_elements=[key])
            _INSERT_MANY[(name, table.name)] = stmt
        self.conn.execute(stmt, list(rows))
