"""PrometheusReader against a real Prometheus server (Debian's package)
holding a backfilled history, and how it degrades."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from markets.errors import InputError, TransientError
from markets.protocols import MetricSource
from markets.signals import BadReplyError
from markets.signals.prometheus import PrometheusReader
from tests.fakes.prometheus import PROMETHEUS_ABSENT, daily_steps, free_port, prometheus_with

pytestmark = pytest.mark.skipif(
    PROMETHEUS_ABSENT, reason="prometheus/promtool not on PATH (Debian's prometheus package)"
)

DAY0 = datetime(2026, 3, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    history = daily_steps(DAY0, 2, up_hour=9, down_hour=12, low=100.0, high=300.0)
    other = [(t, 1.0) for t, _ in history]
    series = [('rps{job="api"}', history), ('rps{job="web"}', other)]
    with prometheus_with(series, tmp_path_factory.mktemp("prom")) as url:
        yield url


def test_reads_the_backfilled_history_at_its_own_times(prom: str) -> None:
    reader = PrometheusReader(prom)
    assert isinstance(reader, MetricSource)
    at = DAY0 + timedelta(hours=9)
    got = reader.series('rps{job="api"}', at - timedelta(minutes=3), at + timedelta(minutes=1), 60)
    assert [v for _, v in got] == [100.0, 100.0, 100.0, 300.0, 300.0]
    assert got[3][0] == at


def test_an_empty_result_is_no_samples(prom: str) -> None:
    at = DAY0 + timedelta(hours=9)
    assert PrometheusReader(prom).series("nothing_here", at, at, 60) == []


def test_a_query_the_server_refuses_is_an_input_error_naming_the_query(prom: str) -> None:
    at = DAY0 + timedelta(hours=9)
    with pytest.raises(InputError, match=r"demand_metric.query.*sum\(\(") as e:
        PrometheusReader(prom).series("sum((", at, at, 60)
    assert "PromQL" in str(e.value)


def test_several_series_are_refused_with_the_fix_in_the_message(prom: str) -> None:
    at = DAY0 + timedelta(hours=9)
    with pytest.raises(BadReplyError, match=r"got 2 \(wrap it in sum"):
        PrometheusReader(prom).series("rps", at, at, 60)
    got = PrometheusReader(prom).series("sum(rps)", at, at, 60)
    assert [v for _, v in got] == [301.0]


def test_a_negative_value_is_a_bad_reply_and_nan_is_a_gap(prom: str) -> None:
    at = DAY0 + timedelta(hours=9)
    with pytest.raises(BadReplyError, match="a value in"):
        PrometheusReader(prom).series('-rps{job="api"}', at, at, 60)
    assert PrometheusReader(prom).series("vector(0) / 0", at, at, 60) == []


def test_a_reply_larger_than_the_bound_is_refused_unread(prom: str) -> None:
    at = DAY0 + timedelta(hours=9)
    reader = PrometheusReader(prom, max_reply_bytes=200)
    with pytest.raises(BadReplyError, match="at most 200 bytes"):
        reader.series('rps{job="api"}', at - timedelta(hours=1), at, 60)


def test_a_server_that_is_not_there_is_transient_and_the_url_password_is_not_shown() -> None:
    port = free_port()
    reader = PrometheusReader(f"http://me:hunter2@127.0.0.1:{port}", timeout_s=2)
    at = DAY0
    with pytest.raises(TransientError) as e:
        reader.series("up", at, at, 60)
    assert "hunter2" not in str(e.value) and "127.0.0.1" in str(e.value)


def test_too_many_points_and_a_reversed_window_are_refused_before_any_call() -> None:
    reader = PrometheusReader("http://127.0.0.1:9")
    with pytest.raises(ValueError, match="at most 11000"):
        reader.series("up", DAY0, DAY0 + timedelta(days=30), 60)
    with pytest.raises(ValueError, match="end >= start"):
        reader.series("up", DAY0, DAY0 - timedelta(minutes=1), 60)


def test_a_url_that_is_not_http_is_an_input_error() -> None:
    with pytest.raises(InputError, match=r"demand_metric\.url"):
        PrometheusReader("file:///etc/passwd")
