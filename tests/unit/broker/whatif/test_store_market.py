"""``--market store``: a daemon's store read as interruption history over
another market, its pools priced at the hazards the account lived through."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from broker.cli import main
from broker.daemon.store.store import Store
from markets.cloud_fleet import Instance, InstanceState, NoticeKind
from markets.protocols import HistorySource
from markets.registry import open_market

T0 = datetime(2026, 3, 2, tzinfo=UTC)


def _store(tmp_path: Path, pool: str, revocations: int) -> str:
    """A store where owner ``me`` held one spot instance of ``pool`` for 5 h
    and saw it revoked ``revocations`` times (each a notice on it)."""
    url = f"sqlite:///{tmp_path / 'state.db'}"
    store = Store(url)
    with store.transaction() as tx:
        inst = Instance(
            instance_id="i-1",
            pool_key=pool,
            tier="spot",
            workload="w",
            state=InstanceState.RUNNING,
            units=1,
            launched_at=T0,
        )
        tx.upsert_instances("me", [inst], T0)
        for i in range(revocations):
            at = T0 + timedelta(minutes=20 * i + 5)
            tx.record_notice(f"n{i}", NoticeKind.INTERRUPTION.value, "i-1", at, at)
        tx.count_experience("me", T0 + timedelta(hours=5), (NoticeKind.INTERRUPTION.value,))
    store.close()
    return url


def test_the_store_market_prices_the_pools_the_account_held_at_their_learned_hazard(
    tmp_path: Path,
) -> None:
    base = open_market("default")
    pool = base.pools()[0].key
    url = _store(tmp_path, pool, revocations=10)
    learned = open_market("store", url=url)
    assert isinstance(learned, HistorySource)  # what the what-if replays
    at = T0 + timedelta(hours=6)
    before, after = base.snapshot(at).get(pool).hazard, learned.snapshot(at).get(pool).hazard
    assert after.rate_per_hour > before.rate_per_hour + 0.3  # 10 in 5 h held, a day's prior
    assert after.observed_hours >= 5.0
    other = base.pools()[1].key
    assert learned.snapshot(at).get(other).hazard == base.snapshot(at).get(other).hazard
    # another owner's store rows are not this one's
    assert (
        open_market("store", url=url, owner="someone-else").snapshot(at).get(pool).hazard == before
    )


def test_a_missing_store_is_exit_2_naming_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.db"
    args = ["whatif", "--market", "store", "--market-option", f"url=sqlite:///{missing}"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--market-option url" in err and "existing daemon store" in err
    assert not missing.exists()  # nothing created


def test_whatif_runs_on_a_daemon_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = _store(tmp_path, open_market("default").pools()[0].key, revocations=3)
    args = ["whatif", "--market", "store", "--market-option", f"url={url}", "--days", "1", "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["hours"] == 24 and out["scenarios"]
