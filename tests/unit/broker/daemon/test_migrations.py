"""The store's migrations: a database made by main 83a16c0 (no schema version)
is recognised as revision 0001 and upgraded without losing rows, on a SQLite
file and on PostgreSQL; a demo revision 9001 (a test-only folder) adds a
column; a store newer than the code is refused with exit 2."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import Connection, Engine

from broker.cli import main
from broker.daemon.store.migrations import (
    BASELINE,
    SchemaTooNewError,
    alembic_config,
    current_revision,
    head_revision,
    history,
    upgrade,
)
from broker.daemon.store.schema import meta
from broker.daemon.store.store import Store
from markets.errors import InputError

HERE = Path(__file__).resolve().parent
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
# T0 as the text both databases read as a timestamp: a datetime passed to
# sqlite3 goes through its default adapter, deprecated on Python 3.12+ (a
# DeprecationWarning, an error under the suite's warnings filter)
_T0_TEXT = T0.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")

HEAD = head_revision()  # the newest revision this code ships
DEMO = "9001"  # a revision only the tests know, on top of HEAD
DEMO_REVISION = '''"""Demo: fleet.zone_hint (test only)."""
import sqlalchemy as sa
from alembic import op

revision = "9001"
down_revision = "{head}"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("fleet", sa.Column("zone_hint", sa.String(32), nullable=True))


def downgrade() -> None:
    op.drop_column("fleet", "zone_hint")
'''


@pytest.fixture
def engine(store_url: str) -> Iterator[Engine]:
    eng = create_engine(store_url)
    yield eng
    eng.dispose()


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    folder = tmp_path / "demo_versions"
    folder.mkdir()
    (folder / "r9001_demo.py").write_text(DEMO_REVISION.replace("{head}", HEAD))
    return folder


def _made_by_83a16c0(engine: Engine) -> None:
    """The tables as main 83a16c0's ``meta.create_all`` made them, with rows."""
    sql = (HERE / "schema_83a16c0" / f"{engine.dialect.name}.sql").read_text()
    ddl = "\n".join(line for line in sql.splitlines() if not line.startswith("--"))
    statements = [s for s in ddl.split(";") if s.strip()]
    with engine.begin() as conn:
        for stmt in statements:
            conn.exec_driver_sql(stmt)
        for i in range(3):
            conn.execute(
                text(
                    "INSERT INTO fleet (instance_id, owner, workload, pool_key, tier, units, "
                    "state, launched_at, action_key, updated_at) VALUES (:i, 'o', 'w', "
                    "'aws/us-east-1/g5.xlarge', 'spot', :u, 'running', :t, NULL, :t)"
                ),
                {"i": f"i-{i}", "u": i + 1, "t": _T0_TEXT},
            )
        conn.execute(
            text("INSERT INTO lease VALUES ('account/a', 'host:1', :t, :t)"),
            {"t": _T0_TEXT},
        )


def _revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return current_revision(conn)


def _shape(conn: Connection) -> dict[str, object]:
    """Tables, columns (type, nullable), indexes and unique constraints."""
    insp = inspect(conn)
    out: dict[str, object] = {}
    for t in sorted(n for n in insp.get_table_names() if n != "alembic_version"):
        cols = [(c["name"], str(c["type"]), c["nullable"]) for c in insp.get_columns(t)]
        ixs = sorted((i["name"], tuple(i["column_names"])) for i in insp.get_indexes(t))
        uqs = sorted(tuple(u["column_names"]) for u in insp.get_unique_constraints(t))
        out[t] = (sorted(cols), ixs, uqs, insp.get_pk_constraint(t)["constrained_columns"])
    return out


def test_a_store_made_by_83a16c0_goes_through_every_revision_and_keeps_its_rows(
    engine: Engine, demo: Path
) -> None:
    _made_by_83a16c0(engine)
    assert _revision(engine) is None
    change = upgrade(engine, version_locations=[demo])
    assert (change.before, change.after) == ("unversioned", DEMO)
    assert _revision(engine) == DEMO
    with engine.connect() as conn:
        cols = {c["name"] for c in inspect(conn).get_columns("fleet")}
        rows = conn.execute(text("SELECT instance_id, units, zone_hint FROM fleet")).all()
        # 0002: the lease row made before the fence holds epoch 0
        lease = conn.execute(text("SELECT holder, epoch FROM lease")).all()
        stamped = {c["name"] for c in inspect(conn).get_columns("actions")}
    assert lease == [("host:1", 0)] and "lease_epoch" in stamped
    assert "zone_hint" in cols
    assert sorted(rows) == [("i-0", 1, None), ("i-1", 2, None), ("i-2", 3, None)]
    # Again: already at head, nothing to do.
    assert not upgrade(engine, version_locations=[demo]).changed


def test_todays_store_upgrades_an_unversioned_database_and_reads_it(store_url: str) -> None:
    eng = create_engine(store_url)
    _made_by_83a16c0(eng)
    eng.dispose()
    store = Store(store_url)
    try:
        with store.transaction() as tx:
            assert tx.lease_holder("account/a", T0.replace(year=2025)) == "host:1"
            assert {r.instance_id for r in tx.fleet("o")} == {"i-0", "i-1", "i-2"}
        assert _revision(store.engine) == HEAD != BASELINE  # stamped 0001, then upgraded
    finally:
        store.close()


def test_revision_0001_is_exactly_the_83a16c0_schema(store_url: str, tmp_path: Path) -> None:
    old = create_engine(store_url)
    _made_by_83a16c0(old)
    migrated_url = (
        f"sqlite:///{tmp_path / 'migrated.db'}"
        if store_url.startswith("sqlite")
        else store_url + "_0001"
    )
    if not store_url.startswith("sqlite"):
        with old.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
            c.exec_driver_sql(f'CREATE DATABASE "{migrated_url.rsplit("/", 1)[1]}"')
    new = create_engine(migrated_url)
    try:
        with new.begin() as conn:
            cfg = alembic_config([])
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, BASELINE)
        with old.connect() as a, new.connect() as b:
            assert _shape(b) == _shape(a)
    finally:
        old.dispose()
        new.dispose()


def test_the_revisions_from_nothing_give_exactly_the_schema_module(engine: Engine) -> None:
    """If this fails, schema.py changed without a revision: write one in
    broker/daemon/store/migrations/versions (the diff below says what)."""
    with engine.begin() as conn:
        cfg = alembic_config([])
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), meta)
    assert diff == []


def test_a_new_store_is_created_at_head_matching_the_schema_module(store_url: str) -> None:
    store = Store(store_url)
    try:
        assert _revision(store.engine) == head_revision()
        with store.engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(ctx, meta) == []
    finally:
        store.close()


def test_a_store_newer_than_the_code_is_refused_and_left_unchanged(
    store_url: str, engine: Engine, demo: Path
) -> None:
    upgrade(engine, version_locations=[demo])
    with pytest.raises(SchemaTooNewError) as err:
        Store(store_url)
    assert str(err.value).count("\n") == 0
    assert DEMO in str(err.value) and HEAD in str(err.value)
    assert _revision(engine) == DEMO


def test_a_database_holding_other_tables_is_refused(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    with pytest.raises(InputError, match="invoices"):
        upgrade(engine)
    assert _revision(engine) is None


# -- the command line ----------------------------------------------------------


def _config(tmp_path: Path, store: str) -> Path:
    cfg = tmp_path / "daemon.yaml"
    cfg.write_text(f"owner: team-a\nstore_url: {store}\nplanner: fast\nmetrics_port: 0\n")
    return cfg


def test_db_upgrade_recognises_an_unversioned_store_then_says_it_is_at_head(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    eng = create_engine(f"sqlite:///{tmp_path / 'state.db'}")
    _made_by_83a16c0(eng)
    cfg = _config(tmp_path, "sqlite:///state.db")  # relative to the config file
    assert main(["db", "current", "--config", str(cfg)]) == 0
    assert f"unversioned (head {HEAD})" in capsys.readouterr().out
    assert main(["db", "upgrade", "--config", str(cfg)]) == 0
    assert capsys.readouterr().out.strip().endswith(f": unversioned -> {HEAD}")
    assert _revision(eng) == HEAD
    assert main(["db", "upgrade", "--store-url", f"sqlite:///{tmp_path / 'state.db'}"]) == 0
    assert f"{HEAD} -> {HEAD} (already at head)" in capsys.readouterr().out
    eng.dispose()


def test_db_upgrade_hides_the_password_and_names_an_unreachable_store(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Port 1 on loopback: nothing listens, the connection is refused at once.
    url = "postgresql+psycopg://spot:s3cret@127.0.0.1:1/state"
    assert main(["db", "upgrade", "--store-url", url]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "store_url" in err and "127.0.0.1:1" in err
    assert "s3cret" not in err


def test_db_upgrade_needs_exactly_one_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["db", "upgrade"]) == 2
    cfg = _config(tmp_path, "sqlite:///state.db")
    assert main(["db", "upgrade", "--config", str(cfg), "--store-url", "sqlite://"]) == 2
    assert capsys.readouterr().err.count("--config/--store-url") == 2


def test_the_daemon_exits_2_naming_both_revisions_on_a_newer_store(
    tmp_path: Path, demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    eng = create_engine(f"sqlite:///{tmp_path / 'state.db'}")
    upgrade(eng, version_locations=[demo])
    cfg = _config(tmp_path, "sqlite:///state.db")
    assert main(["daemon", "--config", str(cfg), "--once"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert f"schema revision {DEMO} is newer" in err and f"newest is {HEAD}" in err
    assert main(["db", "upgrade", "--config", str(cfg)]) == 2
    assert _revision(eng) == DEMO
    eng.dispose()


# -- an operator's commands: current, check, history, downgrade -----------------


def test_db_current_on_a_mistyped_sqlite_path_exits_2_naming_it_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for url in (f"sqlite:///{tmp_path / 'stat.db'}", "stat.db", "sqlite:///stat.db"):
        for verb in ("current", "check", "history"):
            assert main(["db", verb, "--store-url", url]) == 2, (verb, url)
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and "--store-url" in err and "stat.db" in err
    cfg = _config(tmp_path, "sqlite:///stat.db")
    assert main(["db", "current", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert f"{cfg}: store_url:" in err and str(tmp_path / "stat.db") in err
    assert main(["db", "downgrade", BASELINE, "--yes", "--config", str(cfg)]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["daemon.yaml"]


def _to(store_url: str, revision: str) -> None:
    """A store at ``revision``: made at head, then taken back."""
    eng = create_engine(store_url)
    try:
        upgrade(eng)
        if revision != HEAD:
            cfg = alembic_config(())
            with eng.begin() as conn:
                cfg.attributes["connection"] = conn
                command.downgrade(cfg, revision)
    finally:
        eng.dispose()


def test_db_check_exits_0_at_head_and_1_behind(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _to(store_url, HEAD)
    assert main(["db", "check", "--store-url", store_url]) == 0
    assert f": {HEAD}, at head" in capsys.readouterr().out
    _to(store_url, BASELINE)
    assert main(["db", "check", "--store-url", store_url]) == 1
    out = capsys.readouterr().out
    behind = len([r for r in history() if r.revision != BASELINE])
    assert f": {BASELINE}, {behind} revision(s) behind head {HEAD}" in out and "upgrade" in out
    assert main(["db", "upgrade", "--store-url", store_url]) == 0
    assert main(["db", "check", "--store-url", store_url]) == 0


def test_db_check_on_a_newer_store_exits_2_naming_both(
    tmp_path: Path, demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    eng = create_engine(f"sqlite:///{tmp_path / 'state.db'}")
    upgrade(eng, version_locations=[demo])
    eng.dispose()
    assert main(["db", "check", "--store-url", f"sqlite:///{tmp_path / 'state.db'}"]) == 2
    err = capsys.readouterr().err
    assert f"schema revision {DEMO} is newer" in err and err.count("\n") == 1


def test_db_history_lists_every_revision_oldest_first_marking_head_and_store(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["db", "history"]) == 0
    lines = capsys.readouterr().out.splitlines()
    revisions = [line.split()[0] for line in lines]
    assert revisions == [r.revision for r in history()] and revisions[0] == BASELINE
    assert revisions[-1] == HEAD and lines[-1].endswith("(head)")
    _to(store_url, "0003")
    assert main(["db", "history", "--store-url", store_url]) == 0
    marked = [line for line in capsys.readouterr().out.splitlines() if "(" in line.split("  ")[-1]]
    assert [m.split()[0] for m in marked] == ["0003", HEAD]
    assert marked[0].endswith("(store)") and marked[1].endswith("(head)")


def test_db_downgrade_needs_yes_then_drops_what_later_revisions_added(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _to(store_url, HEAD)
    assert main(["db", "downgrade", "0003", "--store-url", store_url]) == 2
    err = capsys.readouterr().err
    assert "--yes" in err and "0004, 0005" in err and err.count("\n") == 1
    eng = create_engine(store_url)
    try:
        assert _revision(eng) == HEAD  # nothing done without --yes
        assert main(["db", "downgrade", "0003", "--yes", "--store-url", store_url]) == 0
        assert capsys.readouterr().out.strip().endswith(f": {HEAD} -> 0003")
        assert _revision(eng) == "0003"
        with eng.connect() as conn:
            tables = set(inspect(conn).get_table_names())
        assert "pool_experience" not in tables and "rebalance_record" not in tables
        assert "notices" in tables
        # up is upgrade's job, and an unknown revision is named
        assert main(["db", "downgrade", HEAD, "--yes", "--store-url", store_url]) == 2
        assert main(["db", "downgrade", "9999", "--yes", "--store-url", store_url]) == 2
        err = capsys.readouterr().err
        assert "REVISION" in err and "before the store's 0003" in err and "9999" in err
        assert _revision(eng) == "0003"
        # and the store comes back up whole: the daemon's own check passes
        assert main(["db", "upgrade", "--store-url", store_url]) == 0
        with eng.connect() as conn:
            assert not compare_metadata(MigrationContext.configure(conn), meta)
    finally:
        eng.dispose()
