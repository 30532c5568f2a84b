"""The daemon's store: the same tests on a SQLite file and on PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from broker.daemon.store.store import DecisionRecord, Store
from markets.cloud_fleet import OWNER_TAG, Instance, InstanceState
from markets.model import Tier

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = Store(store_url)
    yield s
    s.close()


def _inst(iid: str, state: InstanceState = InstanceState.RUNNING) -> Instance:
    return Instance(
        instance_id=iid,
        pool_key="aws/us-east-1/us-east-1a/p3.2xlarge",
        tier=Tier.SPOT,
        workload="w",
        state=state,
        units=1,
        launched_at=T0,
        tags={OWNER_TAG: "me"},
    )


def test_recording_an_action_twice_keeps_the_first_record(store: Store) -> None:
    with store.transaction() as tx:
        first = tx.record_action("sf-key-00000001", "me", "launch", {"count": 2}, T0)
    with store.transaction() as tx:
        again = tx.record_action("sf-key-00000001", "me", "launch", {"count": 99}, T0)
    assert first.created and not again.created
    assert again.payload == {"count": 2} and again.status == "pending"
    with store.transaction() as tx:
        assert [a.idempotency_key for a in tx.pending_actions("me")] == ["sf-key-00000001"]
        tx.finish_action("sf-key-00000001", "done", {"instance_ids": ["i-1"]}, T0)
    with store.transaction() as tx:
        assert tx.pending_actions("me") == []
        rec = tx.action("sf-key-00000001")
        assert rec is not None and rec.status == "done"
        assert rec.result == {"instance_ids": ["i-1"]}
        assert tx.count_actions("me") == 1


def test_a_failed_transaction_writes_nothing(store: Store) -> None:
    with pytest.raises(RuntimeError), store.transaction() as tx:
        tx.record_action("sf-key-00000002", "me", "launch", {}, T0)
        tx.record_notice("n-1", "interruption", "i-1", T0, T0)
        raise RuntimeError("crash between two writes")
    with store.transaction() as tx:
        assert tx.action("sf-key-00000002") is None
        assert tx.count_notices() == 0


def test_a_notice_is_new_once_and_gets_at_most_one_decision(store: Store) -> None:
    with store.transaction() as tx:
        assert tx.record_notice("n-1", "interruption", "i-1", T0, T0)
        assert not tx.record_notice("n-1", "interruption", "i-1", T0, T0)
        assert tx.count_notices(unhandled=True) == 1
    d = DecisionRecord("n-1", "replace", "w", "r", 0.01, 0.0, {"launches": []}, T0)
    with store.transaction() as tx:
        assert tx.record_decision("me", d)
        assert not tx.record_decision("me", d)
        # the daemon's own decisions (no notice) are never deduplicated
        own = DecisionRecord(None, "return_to_spot", "w", "calm", 0.0, 12.5, {}, T0)
        assert tx.record_decision("me", own) and tx.record_decision("me", own)
        tx.mark_notice_handled("n-1", T0)
    with store.transaction() as tx:
        assert tx.notice_handled("n-1") and tx.count_notices(unhandled=True) == 0
        assert tx.decision_counts("me") == {"replace": 1, "return_to_spot": 2}
        assert tx.break_glass_usd("me") == pytest.approx(25.0)
        assert [x.kind for x in tx.decisions("me", notice_id="n-1")] == ["replace"]


def test_fleet_rows_follow_the_instances_and_times_stay_utc(store: Store) -> None:
    with store.transaction() as tx:
        tx.upsert_instances("me", [_inst("i-1"), _inst("i-2")], T0, "sf-key-00000003")
        tx.upsert_instances("me", [_inst("i-1", InstanceState.STOPPING)], T0)
        tx.mark_instances(["i-2"], InstanceState.TERMINATED, T0)
    with store.transaction() as tx:
        alive = tx.fleet("me")
        assert [(r.instance_id, r.state) for r in alive] == [("i-1", "stopping")]
        assert alive[0].launched_at == T0 and alive[0].action_key == "sf-key-00000003"
        assert tx.known_instance_ids("me") == {"i-1", "i-2"}
        assert tx.fleet("someone-else") == []


def test_plan_generations_count_up_per_owner(store: Store) -> None:
    with store.transaction() as tx:
        assert tx.record_plan("me", {"a": 1}, T0) == 1
        assert tx.record_plan("me", {"a": 2}, T0 + timedelta(hours=1)) == 2
        assert tx.record_plan("other", {}, T0) == 1
    with store.transaction() as tx:
        latest = tx.latest_plan("me")
    assert latest is not None and latest[0] == 2 and latest[2] == {"a": 2}
    assert latest[1] == T0 + timedelta(hours=1)


def test_only_one_holder_has_the_lease_until_it_expires(store_url: str) -> None:
    a, b = Store(store_url), Store(store_url)  # two daemons, two engines
    try:
        with a.transaction() as tx:
            assert tx.acquire_lease("account/x", "daemon-a", 30, T0)
        with b.transaction() as tx:
            assert not tx.acquire_lease("account/x", "daemon-b", 30, T0 + timedelta(seconds=10))
            assert tx.lease_holder("account/x", T0 + timedelta(seconds=10)) == "daemon-a"
        with a.transaction() as tx:  # renewing keeps it
            assert tx.renew_lease("account/x", "daemon-a", 30, T0 + timedelta(seconds=20))
        with b.transaction() as tx:
            assert not tx.acquire_lease("account/x", "daemon-b", 30, T0 + timedelta(seconds=45))
            # a stopped renewing: expired at 50 s, b takes it
            assert tx.acquire_lease("account/x", "daemon-b", 30, T0 + timedelta(seconds=51))
        with a.transaction() as tx:
            assert not tx.renew_lease("account/x", "daemon-a", 30, T0 + timedelta(seconds=52))
        with b.transaction() as tx:
            tx.release_lease("account/x", "daemon-b", T0 + timedelta(seconds=53))
        with a.transaction() as tx:
            assert tx.acquire_lease("account/x", "daemon-a", 30, T0 + timedelta(seconds=53))
    finally:
        a.close()
        b.close()


def test_racing_daemons_get_exactly_one_lease(store_url: str) -> None:
    Store(store_url).close()  # schema first, so the racers only race for the row
    stores = [Store(store_url, create=False) for _ in range(6)]
    wins: list[str] = []
    barrier = threading.Barrier(len(stores))

    def race(i: int) -> None:
        barrier.wait()
        with stores[i].transaction() as tx:
            if tx.acquire_lease("account/race", f"d{i}", 30, T0):
                wins.append(f"d{i}")

    threads = [threading.Thread(target=race, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in stores:
        s.close()
    assert len(wins) == 1


def test_a_bad_url_is_an_input_error() -> None:
    from markets.errors import InputError

    with pytest.raises(InputError, match="store_url"):
        Store("nosuchdialect://x")


# --- store URLs: durable only, relative to the config file, redacted ---------------


def _daemon_yaml(path: Path, store_url: str) -> Path:
    import yaml

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        yaml.safe_dump(
            {
                "owner": "me",
                "store_url": store_url,
                "provider": "sim",
                "planner": "fast",
                "metrics_port": 0,
            }
        )
    )
    return path


@pytest.mark.parametrize(
    "url", ["", "sqlite://", "sqlite:///", ":memory:", "sqlite:///:memory:", "  "]
)
def test_the_daemon_refuses_an_in_memory_store_naming_the_file_and_store_url(
    tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from broker.cli import main

    cfg = _daemon_yaml(tmp_path / "daemon.yaml", url)
    assert main(["daemon", "--config", str(cfg), "--once"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert str(cfg) in err and "store_url" in err and "durable store" in err
    assert not list(tmp_path.glob("*.db"))  # nothing written anywhere


@pytest.mark.parametrize("url", ["sqlite:///state/daemon.db", "state/daemon.db"])
def test_a_relative_sqlite_path_is_relative_to_the_config_file_not_the_working_directory(
    tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from broker.daemon.config import load_daemon_config

    cfg = _daemon_yaml(tmp_path / "etc" / "daemon.yaml", url)
    (tmp_path / "etc" / "state").mkdir()
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    loaded = load_daemon_config(cfg)
    assert loaded.store_url.endswith(str(tmp_path / "etc" / "state" / "daemon.db"))
    Store(loaded.store_url).close()
    assert (tmp_path / "etc" / "state" / "daemon.db").exists()
    assert not list(elsewhere.rglob("*.db"))


def test_redact_url_hides_the_password_only() -> None:
    from broker.daemon.store.store import redact_url

    assert redact_url("postgresql://u:secret@h/db") == "postgresql://u:***@h/db"
    assert redact_url("postgresql+psycopg://u:s%40cr3t@h:5432/db?x=1") == (
        "postgresql+psycopg://u:***@h:5432/db?x=1"
    )
    assert redact_url("sqlite:////var/lib/x.db") == "sqlite:////var/lib/x.db"
    assert redact_url("not a url u:secret@h") == "not a url u:secret@h"  # no scheme: no userinfo
    assert "secret" not in redact_url("weird://u:secret@h/db/%%")


def test_a_store_connection_error_never_shows_the_password(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from broker.cli import main
    from markets.errors import InputError

    # Port 1 on the loopback: refused at once, no server needed.
    url = "postgresql+psycopg://u:secret@127.0.0.1:1/db"
    with pytest.raises(InputError) as e:
        Store(url)
    assert "secret" not in str(e.value) and "u:***@127.0.0.1:1/db" in str(e.value)
    assert e.value.__suppress_context__  # the driver's own text is not chained
    cfg = _daemon_yaml(tmp_path / "daemon.yaml", url)
    assert main(["daemon", "--config", str(cfg), "--once"]) == 2
    err = capsys.readouterr().err
    assert "secret" not in err and "u:***@" in err and len(err.strip().splitlines()) == 1
