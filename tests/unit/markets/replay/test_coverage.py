"""``ReplayMarket.coverage``: where recorded prices and availability overlap,
and the window a what-if replays by default."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from markets.replay import open_replay_market
from tests.fakes.replay_data import AVAIL_2A, T0, write_mini, write_trace
from tests.paths import SHARED_DATA


def test_the_window_is_where_a_pool_has_both_a_recorded_spot_price_and_a_trace(
    tmp_path: Path,
) -> None:
    # only the preemption trace carries prices: its 10 hourly ticks from T0
    cov = open_replay_market(path=write_mini(tmp_path)).coverage()
    assert cov.how == "overlap"
    assert cov.window == (T0, T0 + timedelta(hours=10))
    assert cov.window_pools == 1
    assert cov.window_sources == ("aws traces", "trace-prices")
    assert cov.disjoint == ()  # the 2023-01 AWS history spans the traces' hours
    start, days, lines = cov.replay(30)
    assert (start, days) == (T0, 1)
    assert lines[0].startswith("replaying 2023-01-10 00:00 .. 2023-01-10 10:00 UTC")
    assert lines[-1] == "hours past the window are billed at the planned prices, spot held"


def test_prices_and_traces_that_never_overlap_replay_the_traces_and_say_so(
    tmp_path: Path,
) -> None:
    root = write_mini(tmp_path, traces=False)
    later = datetime(2023, 3, 1, tzinfo=UTC)  # after the AWS history ends (T0 + 10 d)
    write_trace(root, "availability", 1, "aws-03-01-2023", "us-west-2a_v100_1.json", AVAIL_2A)
    cov = open_replay_market(path=root).coverage()
    assert cov.how == "availability"
    assert cov.window == (later, later + timedelta(hours=len(AVAIL_2A)))
    assert cov.window_sources == ("aws traces",)
    assert cov.disjoint == (
        "aws-history spot prices (2022-12-31 .. 2023-01-20) and the aws availability "
        "traces (2023-03-01 .. 2023-03-01) do not overlap",
    )
    assert cov.lines()[0].startswith("prices and availability on hand do not overlap")


def test_without_traces_the_recorded_prices_span_is_replayed(tmp_path: Path) -> None:
    cov = open_replay_market(path=write_mini(tmp_path, traces=False)).coverage()
    assert cov.how == "prices"
    assert cov.window[0] == T0 - timedelta(days=10)  # the first recorded spot price
    start, days, lines = cov.replay(7)
    assert days == 7 and start == cov.window[0]
    assert lines[0].startswith("no availability traces: replaying the recorded prices'")


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"{SHARED_DATA} (the public traces) absent")
def test_shared_data_says_the_2021_aws_history_never_meets_the_traces() -> None:
    cov = open_replay_market(path=SHARED_DATA).coverage()
    history = next(p for p in cov.prices if p.source == "aws-history")
    traces = next(a for a in cov.availability if a.provider == "aws")
    assert history.end < traces.start  # 2021 prices, 2022-23 traces
    assert any(line.startswith("aws-history spot prices (2021-") for line in cov.disjoint)
    # the preemption traces' own prices overlap their traces: that is the window
    assert cov.how == "overlap" and "trace-prices" in cov.window_sources
    assert traces.start <= cov.window[0] < cov.window[1] <= traces.end
