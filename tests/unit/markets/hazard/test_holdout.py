"""Hazard calibration: fit on the first part of each trace, score the rest.

Synthetic traces plant a known rate per pool, steady (Poisson) or varying from
day to day (bursty); the real-trace test reads ``tests.paths.SHARED_DATA``.
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from markets.files.traces import load_spot_traces
from markets.hazard.holdout import (
    CalibrationTrace,
    calibrate,
    fit_overdispersion,
    period_counts,
)
from markets.hazard.prior import ASSUMED_PRIOR, HazardPrior
from tests.paths import SHARED_DATA

TRACES = SHARED_DATA / "spot-availability-traces"
needs_traces = pytest.mark.skipif(not TRACES.is_dir(), reason=f"{TRACES} is not present")
GAP_S = 600.0
TICKS_PER_DAY = 144


def _trace(rng: np.random.Generator, daily_rates: NDArray[np.float64]) -> NDArray[np.int64]:
    """One node held throughout, a revocation seen as one tick at 0; each
    day's revocations Poisson at that day's rate per hour held."""
    ticks = []
    for rate in daily_rates:
        day = np.ones(TICKS_PER_DAY, dtype=np.int64)
        k = min(rng.poisson(rate * 24.0), TICKS_PER_DAY // 2)
        day[rng.choice(np.arange(1, TICKS_PER_DAY, 2), size=k, replace=False)] = 0
        ticks.append(day)
    return np.concatenate(ticks)


def _pools(
    rng: np.random.Generator, rates: list[float], days: int, size: float | None
) -> list[CalibrationTrace]:
    out = []
    for i, rate in enumerate(rates):
        daily = (
            np.full(days, rate) if size is None else rate * rng.gamma(size, 1.0 / size, size=days)
        )
        out.append(CalibrationTrace(f"pool-{i}", f"t{i}", _trace(rng, daily), GAP_S, ASSUMED_PRIOR))
    return out


def test_period_counts_counts_drops_and_held_hours_per_period() -> None:
    # 1-hour ticks, 2-hour periods: [2, 1 | 2, 0 | 2]; the last period is one
    # tick, half a period, and kept
    counts = np.array([2, 1, 2, 0, 2], dtype=np.int64)
    got = period_counts(counts, 3600.0, 0, 5, 2.0)
    assert [(e.events, e.hours) for e in got] == [(1, 3.0), (2, 2.0), (0, 2.0)]
    # a part starting mid-trace sees the drop at its first tick
    assert [(e.events, e.hours) for e in period_counts(counts, 3600.0, 3, 5, 2.0)] == [(2, 2.0)]


def test_fit_recovers_the_negative_binomial_size() -> None:
    rng = np.random.default_rng(5)
    mean = rng.uniform(2.0, 20.0, size=3000)
    size = 0.8
    k = rng.negative_binomial(size, size / (size + mean))
    fit = fit_overdispersion(list(zip(k.tolist(), mean.tolist(), strict=True)), 24.0)
    assert fit.size == pytest.approx(size, rel=0.15)


def test_steady_rates_are_calibrated_and_beat_the_pooled_rate() -> None:
    rng = np.random.default_rng(1)
    report = calibrate(_pools(rng, [0.05, 0.2, 0.8, 1.5], days=60, size=None))
    assert report.dispersion_size > 20  # type: ignore[operator]  # Poisson counts: no over-dispersion found
    assert report.coverage is not None and 0.85 <= report.coverage <= 0.97
    ll = report.log_likelihood
    # rates 30x apart: one pooled rate predicts each pool's days worse
    assert ll["posterior"] > ll["pooled_rate"] > ll["advisor_prior"]
    for p in report.pools:
        assert p.ci_low_per_hour <= p.rate_per_hour <= p.ci_high_per_hour


def test_bursty_rates_need_the_over_dispersion_to_be_calibrated() -> None:
    rng = np.random.default_rng(2)
    report = calibrate(_pools(rng, [0.2, 0.5, 1.0], days=60, size=0.7))
    assert 0.35 <= report.dispersion_size <= 1.4  # type: ignore[operator]  # planted 0.7
    assert report.coverage_plain is not None and report.coverage_plain < 0.7
    assert report.coverage_target_met is True
    assert report.log_likelihood["posterior"] > report.log_likelihood["posterior_plain"]


def test_prior_of_a_pool_enters_its_posterior_only() -> None:
    rng = np.random.default_rng(3)
    pools = _pools(rng, [0.3, 0.3], days=10, size=None)
    strong = HazardPrior(rate_per_hour=5.0, pseudo_hours=10_000.0)
    pools[0] = CalibrationTrace("pool-0", "t0", pools[0].counts, GAP_S, strong)
    report = calibrate(pools)
    by = {p.pool_key: p for p in report.pools}
    assert by["pool-0"].rate_per_hour > 3.0 > 1.0 > by["pool-1"].rate_per_hour


def test_traces_shorter_than_a_period_measure_nothing() -> None:
    short = CalibrationTrace("p", "t", np.ones(30, dtype=np.int64), GAP_S, ASSUMED_PRIOR)
    report = calibrate([short])  # 5 hours: no pool-day to fit or score
    assert (report.test_periods, report.coverage, report.coverage_target_met) == (0, None, None)
    assert report.to_json()["dispersion_size"] is None


def test_calibration_refuses_no_traces() -> None:
    with pytest.raises(ValueError, match="at least one trace"):
        calibrate([])


@needs_traces
def test_real_traces_meet_the_coverage_target() -> None:
    prior = HazardPrior.from_advisor_bucket(4)  # p2/p3 in us-west-2 (2025 snapshot)
    traces = [CalibrationTrace.from_spot_trace(t, prior) for t in load_spot_traces(TRACES)]
    report = calibrate(traces)
    assert report.test_periods >= 100
    assert report.coverage is not None and 0.85 <= report.coverage <= 0.95
    assert report.coverage_plain is not None and report.coverage_plain < 0.6
    ll = report.log_likelihood
    assert ll["posterior"] > ll["pooled_rate"] > ll["advisor_prior"]
    assert ll["posterior"] > ll["posterior_plain"]
