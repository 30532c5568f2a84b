"""Fixtures of the daemon's store tests: a store URL per backend (a SQLite
file, and a fresh database on the session's PostgreSQL server)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

_db_names = itertools.count()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'state.db'}"
        return
    base = request.getfixturevalue("postgres_server")
    import psycopg  # the postgres extra: only when a test asks for that backend

    name = f"t{next(_db_names)}_{abs(hash(request.node.name)) % 10**8}"
    dsn = base.replace("postgresql+psycopg", "postgresql") + "/postgres"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield f"{base}/{name}"
