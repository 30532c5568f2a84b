"""``spotfolio db``: the daemon's state store, its schema revision and upgrades.

- ``spotfolio db upgrade (--config FILE | --store-url URL)`` brings the store
  to the newest revision this spotfolio knows (``broker.daemon.store.migrations``;
  a database made before migrations is recognised as revision 0001) and prints
  ``store URL: BEFORE -> AFTER``. The daemon does the same at start; this
  command does it ahead of a deploy, or with a database role the daemon lacks.
- ``spotfolio db current (--config FILE | --store-url URL)`` prints the
  store's revision and the newest one this spotfolio knows.
- ``spotfolio db check (--config FILE | --store-url URL)`` exits 0 when the
  store is at the newest revision, 1 when it is behind (or unversioned), for
  a deploy pipeline's gate.
- ``spotfolio db history [--config FILE | --store-url URL]`` lists the
  revisions, oldest first, marking the head and the store's own.
- ``spotfolio db downgrade REV --yes (--config FILE | --store-url URL)``
  takes the store back to revision REV (to run an older spotfolio on it);
  what the later revisions added is dropped, so it needs ``--yes``.

Every command but ``upgrade`` reads an existing store: a SQLite path that
names no file exits 2 naming it (nothing is created). A store written by a
newer spotfolio exits 2 naming both revisions; the URL is printed without its
password. SQLAlchemy and Alembic are imported when a command runs.

Must not: hold migration logic (the migrations package does).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from markets.errors import InputError

if TYPE_CHECKING:
    from broker.daemon.store.store import Store

__all__ = ["group"]


def _store_url(config_path: str | None, store_url: str | None) -> str:
    if (config_path is None) == (store_url is None):
        raise InputError("--config/--store-url", None, "exactly one of --config FILE, --store-url")
    if store_url is not None:
        return store_url
    from broker.daemon.config import load_daemon_config  # pydantic and PyYAML: when run

    assert config_path is not None
    return load_daemon_config(config_path).store_url


def _existing(config_path: str | None, store_url: str | None) -> Store:
    """The store named, opened without creating or migrating anything: a
    SQLite path that names no file is an error, not a new empty database."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    from broker.daemon.store.store import Store, in_memory_url

    url = _store_url(config_path, store_url)
    source, field = ("--store-url", None) if store_url is not None else (config_path, "store_url")
    assert source is not None
    if not in_memory_url(url):
        try:
            parsed = make_url(url) if "://" in url else None
        except ArgumentError:
            parsed = None  # Store names what is wrong with it
        path = url if parsed is None and "://" not in url else None
        if parsed is not None and parsed.get_backend_name() == "sqlite":
            path = parsed.database
        if path is not None and not Path(path).is_file():
            raise InputError(
                source, field, "an existing SQLite store file (db upgrade makes one)", got=path
            )
    return Store(url, create=False)


def _shown(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def _unreachable(url: str, e: Exception) -> InputError:
    # The driver's first line says why (refused, unknown database); no password in it.
    why = str(getattr(e, "orig", e)).strip().splitlines()[0]
    return InputError("store_url", None, f"a reachable database ({why})", got=_shown(url))


_config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Daemon settings (YAML); its store_url is the store.",
)
_url_option = click.option(
    "--store-url", default=None, help="A SQLAlchemy URL (sqlite:///path, postgresql+psycopg://...)."
)


@click.group("db", help="The daemon's state store: schema revision and upgrades.")
def group() -> None:
    pass


@group.command("upgrade")
@_config_option
@_url_option
def upgrade_command(config_path: str | None, store_url: str | None) -> None:
    """Upgrade the store to the newest schema revision this spotfolio knows."""
    from sqlalchemy.exc import OperationalError

    from broker.daemon.store.migrations import upgrade
    from broker.daemon.store.store import Store

    store = Store(_store_url(config_path, store_url), create=False)
    try:
        change = upgrade(store.engine)
    except OperationalError as e:
        raise _unreachable(store.url, e) from e
    finally:
        store.close()
    before = change.before or "empty"
    note = "" if change.changed else " (already at head)"
    click.echo(f"store {_shown(store.url)}: {before} -> {change.after}{note}")


@group.command("current")
@_config_option
@_url_option
def current_command(config_path: str | None, store_url: str | None) -> None:
    """Print the store's schema revision and the newest this spotfolio knows."""
    from broker.daemon.store.migrations import head_revision

    store = _existing(config_path, store_url)
    found = _read_revision(store)
    click.echo(f"store {_shown(store.url)}: {found or 'unversioned'} (head {head_revision()})")


def _read_revision(store: Store) -> str | None:
    from sqlalchemy.exc import OperationalError

    from broker.daemon.store.migrations import current_revision

    try:
        with store.engine.connect() as conn:
            return current_revision(conn)
    except OperationalError as e:
        raise _unreachable(store.url, e) from e
    finally:
        store.close()


@group.command("check")
@_config_option
@_url_option
def check_command(config_path: str | None, store_url: str | None) -> None:
    """Exit 0 if the store is at the newest schema revision, 1 if it is behind."""
    from broker.daemon.store.migrations import SchemaTooNewError, head_revision, history

    store = _existing(config_path, store_url)
    found = _read_revision(store)
    head = head_revision()
    known = [r.revision for r in history()]
    if found == head:
        click.echo(f"store {_shown(store.url)}: {found}, at head")
        return
    if found is not None and found not in known:
        raise SchemaTooNewError(found, head)
    behind = len(known) - (known.index(found) + 1 if found is not None else 0)
    click.echo(
        f"store {_shown(store.url)}: {found or 'unversioned'}, {behind} revision(s) "
        f"behind head {head} (run spotfolio db upgrade)"
    )
    raise click.exceptions.Exit(1)


@group.command("history")
@_config_option
@_url_option
def history_command(config_path: str | None, store_url: str | None) -> None:
    """List the schema revisions, oldest first (with a store: which is its own)."""
    from broker.daemon.store.migrations import head_revision, history

    found = None
    if config_path is not None or store_url is not None:
        found = _read_revision(_existing(config_path, store_url))
    head = head_revision()
    for r in history():
        here = (("head", r.revision == head), ("store", r.revision == found))
        marks = [m for m, on in here if on]
        shown = f"  ({', '.join(marks)})" if marks else ""
        click.echo(f"{r.revision}  {r.doc}{shown}")


@group.command("downgrade")
@click.argument("revision")
@click.option("--yes", is_flag=True, help="Confirm: what later revisions added is dropped.")
@_config_option
@_url_option
def downgrade_command(
    revision: str, yes: bool, config_path: str | None, store_url: str | None
) -> None:
    """Take the store back to REVISION (to run an older spotfolio on it)."""
    from sqlalchemy.exc import OperationalError

    from broker.daemon.store.migrations import downgrade, history

    known = [r.revision for r in history()]
    if revision not in known:
        raise InputError("REVISION", None, f"one of {', '.join(known)}", got=revision)
    store = _existing(config_path, store_url)
    if not yes:
        found = _read_revision(store)
        undone = known[known.index(revision) + 1 : known.index(found) + 1] if found in known else []
        raise InputError(
            "--yes",
            None,
            f"--yes to confirm that downgrading to {revision} drops "
            f"what revisions {', '.join(undone) or '(none)'} added, rows included",
            got=found or "unversioned",
        )
    try:
        change = downgrade(store.engine, revision)
    except OperationalError as e:
        raise _unreachable(store.url, e) from e
    finally:
        store.close()
    note = "" if change.changed else " (already there)"
    click.echo(f"store {_shown(store.url)}: {change.before} -> {change.after}{note}")
