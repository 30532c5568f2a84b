"""The live-demand rule by hand: forecast, margin, minimum, cooldown, and
how it degrades when the metric cannot be read."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

import pytest

from broker.planning.autoscale import LiveDemand, ReplicaRule, forecast_peak, replicas_for
from markets.errors import AuthError, SpotfolioError, TransientError
from policies.workloads.metric import DemandMetric

T = datetime(2026, 3, 2, 9, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


class Fn:
    """A MetricSource whose value at each minute is ``fn(t)``."""

    name = "fn"

    def __init__(self, fn: Callable[[datetime], float]) -> None:
        self.fn = fn
        self.fail: SpotfolioError | None = None
        self.calls = 0

    def series(
        self, query: str, start: datetime, end: datetime, step_s: float
    ) -> Sequence[tuple[datetime, float]]:
        self.calls += 1
        if self.fail is not None:
            raise self.fail
        out, t = [], start
        while t <= end:
            out.append((t, self.fn(t)))
            t += timedelta(seconds=step_s)
        return out


def _metric(**kw: object) -> DemandMetric:
    base: dict[str, object] = {
        "source": "prometheus",
        "url": "http://p:9090",
        "query": "q",
        "value_per_replica": 100.0,
    }
    return DemandMetric.model_validate(base | kw)


def _live(src: Fn, readiness_min: float = 3.0, **kw: object) -> LiveDemand:
    return LiveDemand([ReplicaRule.of("api", _metric(**kw), readiness_min)], {"api": src})


def test_forecast_is_the_latest_value_or_last_seasons_peak_in_the_lookahead() -> None:
    recent = [(T - MINUTE, 50.0), (T, 80.0)]
    assert forecast_peak(recent, [(T, 60.0), (T + MINUTE, 200.0)]) == 200.0
    assert forecast_peak(recent, []) == 80.0
    assert forecast_peak([], []) is None


@pytest.mark.parametrize(
    ("value", "margin", "expected"),
    [
        pytest.param(0.0, 0.2, 1, id="no-demand-still-one-replica"),
        pytest.param(100.0, 0.0, 1, id="exactly-one"),
        pytest.param(100.0, 0.2, 2, id="margin-adds-one"),
        pytest.param(250.0, 0.2, 3, id="300-over-100"),
        pytest.param(1e6, 0.2, 7, id="capped-at-max"),
    ],
)
def test_replicas_are_the_forecast_with_margin_clamped(
    value: float, margin: float, expected: int
) -> None:
    assert replicas_for(value, _metric(margin=margin, max_replicas=7)) == expected


def test_lookahead_defaults_to_readiness_plus_a_minute() -> None:
    assert ReplicaRule.of("api", _metric(), 3.0).lookahead_s == 240.0
    assert ReplicaRule.of("api", _metric(lookahead_minutes=10), 3.0).lookahead_s == 600.0


def test_yesterdays_step_is_ordered_lookahead_ahead_of_todays() -> None:
    # The metric steps 100 -> 300 at 09:00 every day.
    src = Fn(lambda t: 300.0 if t.hour >= 9 else 100.0)
    live = _live(src, margin=0.0)
    seen = {}
    for m in range(-7, 1):
        (target,) = live.sense(T + m * MINUTE)
        seen[m] = target.replicas
    assert seen == {-7: 1, -6: 1, -5: 1, -4: 3, -3: 3, -2: 3, -1: 3, 0: 3}


def test_a_step_down_is_held_for_the_cooldown_then_followed() -> None:
    src = Fn(lambda t: 300.0 if t < T else 100.0)
    live = _live(src, margin=0.0, season_hours=0, cooldown_minutes=15)
    got = {}
    for m in range(-2, 17):
        (target,) = live.sense(T + m * MINUTE)
        got[m] = (target.replicas, target.recommended, target.held_by_cooldown)
    assert got[-1] == (3, 3, False)
    assert got[0] == (3, 1, True) and got[14] == (3, 1, True)
    assert got[15] == (1, 1, False) and got[16] == (1, 1, False)
    assert live.units("api") == 1.0


def test_a_rise_during_the_cooldown_is_followed_at_once_and_restarts_it() -> None:
    values = {-60: 300.0, 1: 100.0, 5: 500.0, 6: 100.0}
    src = Fn(lambda t: values[max(k for k in values if T + k * MINUTE <= t)])
    live = _live(src, margin=0.0, season_hours=0, cooldown_minutes=10)
    reps = [live.sense(T + m * MINUTE)[0].replicas for m in range(0, 18)]
    assert reps[0:5] == [3] * 5
    assert reps[5] == 5  # up at once
    assert reps[15] == 5 and reps[16] == 1  # 10 min after the first lower reading (minute 6)


def test_a_failed_read_keeps_the_last_replicas_and_says_why() -> None:
    src = Fn(lambda t: 300.0)
    live = _live(src, margin=0.0, season_hours=0)
    assert live.sense(T)[0].replicas == 3
    src.fail = TransientError("prometheus http://p:9090: HTTP 503")
    (target,) = live.sense(T + MINUTE)
    assert target.replicas == 3 and not target.changed
    assert target.error is not None and "503" in target.error


def test_before_any_good_read_the_workload_holds_its_minimum() -> None:
    src = Fn(lambda t: 300.0)
    src.fail = TransientError("down")
    live = _live(src, min_replicas=2, units_per_replica=4)
    assert live.units("api") == 8.0
    (target,) = live.sense(T)
    assert target.replicas == 2 and target.units == 8.0 and target.error


def test_an_auth_error_is_not_swallowed() -> None:
    src = Fn(lambda t: 300.0)
    src.fail = AuthError("403")
    with pytest.raises(AuthError):
        _live(src).sense(T)


def test_a_workload_without_a_source_is_refused() -> None:
    with pytest.raises(ValueError, match="no metric source for api"):
        LiveDemand([ReplicaRule.of("api", _metric(), 3.0)], {})
