"""``spotfolio db``: the daemon's state store, its schema revision and upgrades.

- ``spotfolio db upgrade (--config FILE | --store-url URL)`` brings the store
  to the newest revision this spotfolio knows (``broker.daemon.store.migrations``;
  a database made before migrations is recognised as revision 0001) and prints
  ``store URL: BEFORE -> AFTER``. The daemon does the same at start; this
  command does it ahead of a deploy, or with a database role the daemon lacks.
- ``spotfolio db current (--config FILE | --store-url URL)`` prints the
  store's revision and the newest one this spotfolio knows.

A store written by a newer spotfolio exits 2 naming both revisions; the URL is
printed without its password. SQLAlchemy and Alembic are imported when a
command runs.

Must not: hold migration logic (the migrations package does).
"""

from __future__ import annotations

import click

from markets.errors import InputError

__all__ = ["group"]


def _store_url(config_path: str | None, store_url: str | None) -> str:
    if (config_path is None) == (store_url is None):
        raise InputError("--config/--store-url", None, "exactly one of --config FILE, --store-url")
    if store_url is not None:
        return store_url
    from broker.daemon.config import load_daemon_config  # pydantic and PyYAML: when run

    assert config_path is not None
    return load_daemon_config(config_path).store_url


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
    from sqlalchemy.exc import OperationalError

    from broker.daemon.store.migrations import current_revision, head_revision
    from broker.daemon.store.store import Store

    store = Store(_store_url(config_path, store_url), create=False)
    try:
        with store.engine.connect() as conn:
            found = current_revision(conn)
    except OperationalError as e:
        raise _unreachable(store.url, e) from e
    finally:
        store.close()
    click.echo(f"store {_shown(store.url)}: {found or 'unversioned'} (head {head_revision()})")
