"""A golden bill of 2025 replays on the embedded market moved to its dates."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from datetime import UTC, datetime, timedelta
from pathlib import Path

from broker.cli import main
from broker.cli._shifted import shifted, week_offset
from markets.protocols import RevocationSource
from markets.registry import open_market
from tests.fakes.bills import write_focus_bill


def test_a_2025_bill_replays_with_no_credentials(tmp_path: Path, monkeypatch) -> None:
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(k, raising=False)
    write_focus_bill(tmp_path / "f.csv", start=datetime(2025, 6, 2, tzinfo=UTC), days=4)
    buf = io.StringIO()
    with redirect_stdout(buf):
        code = main(
            [
                "whatif",
                "--json",
                "--usage",
                str(tmp_path / "f.csv"),
                "--days",
                "2",
                "--replan-hours",
                "24",
                "--scenarios",
                "0",
            ]
        )
    assert code == 0
    out = json.loads(buf.getvalue())
    assert out["start"].startswith("2025-06-04") and "shifted" in out["market"]
    assert all(s["total_cost_usd"] > 0 for s in out["scenarios"])


def test_the_shift_moves_times_not_prices() -> None:
    m = open_market("default")
    assert isinstance(m, RevocationSource)
    lo, _ = m.span()
    at = datetime(2025, 6, 2, tzinfo=UTC)
    off = week_offset(m.span(), at, 48)
    assert off.days % 7 == 0 and lo + off <= at < lo + off + timedelta(weeks=1)
    s = shifted(m, off)
    assert isinstance(s, RevocationSource)
    a, b = m.snapshot(lo + timedelta(days=3)), s.snapshot(lo + off + timedelta(days=3))
    assert b.at == a.at + off
    assert [p.spot_usd_per_hour for p in a.pools] == [p.spot_usd_per_hour for p in b.pools]
    assert week_offset(m.span(), lo + timedelta(days=1), 24) == timedelta(0)
