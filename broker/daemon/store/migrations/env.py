"""Alembic's environment for the store: run the revisions on one connection.

``broker.daemon.store.migrations.upgrade`` hands its connection (inside the
transaction that holds the upgrade lock) in ``config.attributes``; the
``alembic`` command line, for writing a revision, may give
``sqlalchemy.url`` (or ``SPOTFOLIO_STORE_URL``) instead.

Must not: decide whether a database needs upgrading (the package does).
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection

from broker.daemon.store.schema import meta


def _run(conn: Connection) -> None:
    context.configure(connection=conn, target_metadata=meta, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


_given = context.config.attributes.get("connection")
if isinstance(_given, Connection):
    _run(_given)
else:
    _url = context.config.get_main_option("sqlalchemy.url") or os.environ["SPOTFOLIO_STORE_URL"]
    with create_engine(_url).begin() as _conn:
        _run(_conn)
