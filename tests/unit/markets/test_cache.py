"""markets.cache.TtlCache on its own: reuse, refetch, keep-last-good, no-data."""

from __future__ import annotations

import logging

import pytest

from markets.cache import TtlCache
from markets.clock import ManualClock
from markets.errors import AuthError, StaleDataError, ThrottledError, TransientError

TTL_S = 300.0
LOG = logging.getLogger("tests.unit.markets.test_cache")


class Fetcher:
    """Answers 1, 2, 3... or raises what it is told to, counting calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.fail: Exception | None = None

    def __call__(self) -> int:
        self.calls += 1
        if self.fail is not None:
            raise self.fail
        return self.calls


def _cache(clock: ManualClock) -> TtlCache:
    return TtlCache(clock, source="aws", answer_from="AWS", log=LOG)


def test_a_value_younger_than_its_ttl_is_reused() -> None:
    clock = ManualClock()
    cache, fetch = _cache(clock), Fetcher()
    first = cache.get("zones", TTL_S, fetch)
    clock.advance(TTL_S - 1)
    again = cache.get("zones", TTL_S, fetch)
    assert again is first and again.value == 1 and fetch.calls == 1
    assert cache.stale_keys == frozenset()


def test_a_value_as_old_as_its_ttl_is_refetched() -> None:
    clock = ManualClock()
    cache, fetch = _cache(clock), Fetcher()
    cache.get("zones", TTL_S, fetch)
    clock.advance(TTL_S)
    fresh = cache.get("zones", TTL_S, fetch)
    assert fresh.value == 2 and fetch.calls == 2
    assert fresh.fetched_mono == clock.monotonic() and fresh.fetched_at == clock.now()


def test_keys_age_independently_with_their_own_ttl() -> None:
    clock = ManualClock()
    cache, fetch = _cache(clock), Fetcher()
    cache.get("short", 60.0, fetch)
    cache.get("long", 3600.0, fetch)
    clock.advance(120.0)
    assert cache.get("short", 60.0, fetch).value == 3
    assert cache.get("long", 3600.0, fetch).value == 2


def test_age_counts_from_the_start_of_the_fetch_observed_time_from_its_end() -> None:
    clock = ManualClock()
    cache = _cache(clock)
    started_mono, started_at = clock.monotonic(), clock.now()

    def slow() -> str:
        clock.advance(30.0)  # the call itself takes 30 s
        return "answer"

    entry = cache.get("spot", TTL_S, slow)
    assert entry.fetched_mono == started_mono
    assert (entry.fetched_at - started_at).total_seconds() == 30.0
    clock.advance(TTL_S - 30.0)  # TTL_S after the fetch began
    assert cache.get("spot", TTL_S, lambda: "next").value == "next"


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(TransientError("503 from the endpoint"), id="transient"),
        pytest.param(ThrottledError("Throttling: rate exceeded"), id="throttled"),
    ],
)
def test_keeps_the_last_good_value_and_marks_the_key_stale_on_a_transient_failure(
    error: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock()
    cache, fetch = _cache(clock), Fetcher()
    good = cache.get("prices", TTL_S, fetch)
    clock.advance(TTL_S + 1)
    fetch.fail = error
    with caplog.at_level(logging.WARNING, logger=LOG.name):
        kept = cache.get("prices", TTL_S, fetch)
    assert kept is good and fetch.calls == 2
    assert cache.stale_keys == {"prices"}
    [record] = [r for r in caplog.records if r.name == LOG.name]
    assert record.levelno == logging.WARNING
    assert record.getMessage().startswith("aws prices: refresh failed (")
    assert str(good.fetched_at) in record.getMessage()


def test_a_kept_value_is_tried_again_on_the_next_call_and_recovers() -> None:
    clock = ManualClock()
    cache, fetch = _cache(clock), Fetcher()
    cache.get("prices", TTL_S, fetch)
    clock.advance(TTL_S)
    fetch.fail = TransientError("timeout")
    cache.get("prices", TTL_S, fetch)
    fetch.fail = None
    assert cache.get("prices", TTL_S, fetch).value == 3  # no wait for another TTL
    cache.clear_stale()
    assert cache.stale_keys == frozenset()


def test_clear_stale_forgets_only_the_marks_not_the_values() -> None:
    clock = ManualClock()
    cache, fetch = _cache(clock), Fetcher()
    cache.get("a", TTL_S, fetch)
    clock.advance(TTL_S)
    fetch.fail = TransientError("timeout")
    kept = cache.get("a", TTL_S, fetch)
    cache.clear_stale()
    assert cache.stale_keys == frozenset()
    assert cache.get("a", TTL_S, fetch) is kept  # still old, marked again
    assert cache.stale_keys == {"a"}


def test_no_old_value_and_a_transient_failure_is_stale_data() -> None:
    cache = TtlCache(ManualClock(), source="gcp", answer_from="Compute Engine", log=LOG)
    cause = TransientError("connection reset")

    def fail() -> int:
        raise cause

    with pytest.raises(StaleDataError) as info:
        cache.get("zones", TTL_S, fail)
    err = info.value
    assert err.__cause__ is cause
    assert (err.source, err.field, err.got) == ("gcp zones", None, "connection reset")
    assert err.expected == "one successful answer from Compute Engine"
    assert str(err) == (
        "gcp zones: expected one successful answer from Compute Engine, got 'connection reset'"
    )
    assert cache.stale_keys == frozenset()


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(AuthError("UnauthorizedOperation"), id="auth"),
        pytest.param(ValueError("a bug in the parser"), id="bug"),
    ],
)
@pytest.mark.parametrize("with_old_value", [False, True], ids=["empty", "old-value"])
def test_non_transient_errors_propagate_and_are_never_masked_as_stale(
    error: Exception, with_old_value: bool
) -> None:
    clock = ManualClock()
    cache, fetch = _cache(clock), Fetcher()
    if with_old_value:
        cache.get("types", TTL_S, fetch)
        clock.advance(TTL_S)
    fetch.fail = error
    with pytest.raises(type(error)) as info:
        cache.get("types", TTL_S, fetch)
    assert info.value is error
    assert cache.stale_keys == frozenset()


def test_a_failed_fetch_does_not_restart_the_ttl() -> None:
    clock = ManualClock()
    cache, fetch = _cache(clock), Fetcher()
    cache.get("types", TTL_S, fetch)
    clock.advance(TTL_S)
    fetch.fail = TransientError("503")
    cache.get("types", TTL_S, fetch)
    cache.get("types", TTL_S, fetch)
    assert fetch.calls == 3  # every call past the TTL tries again
