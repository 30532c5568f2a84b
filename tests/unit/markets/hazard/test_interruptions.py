"""The interruption model: hazard posterior, regimes, clustering, zone correlation.

Synthetic tests plant known rates and clusters; the real-trace tests read
``tests.paths.SHARED_DATA``'s spot-availability-traces through ``markets.files.traces``.
"""

from __future__ import annotations

import itertools
import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from numpy.typing import ArrayLike, NDArray

from markets.files.traces import SpotTrace, load_spot_traces
from markets.hazard.clustering import CLUSTER_WINDOW_S, clustering, co_revocation, zone_correlations
from markets.hazard.posterior import (
    Exposure,
    Overdispersion,
    estimate_from_revocations,
    estimate_hazard,
    gamma_cdf,
    gamma_log_hdi,
    gamma_quantile,
)
from markets.hazard.prior import (
    ADVISOR_BUCKET_SHARES,
    ASSUMED_PRIOR,
    DEFAULT_PRIOR_HOURS,
    HazardPrior,
    monthly_share_to_rate,
)
from markets.hazard.probes import (
    estimate_from_counts,
    estimate_from_trace,
    exposure_from_counts,
    regime_stats,
    revocation_times_s,
    trace_revocation_times_s,
)
from markets.model import HazardSource
from tests.paths import SHARED_DATA

DATA = SHARED_DATA
TRACES = DATA / "spot-availability-traces"
needs_traces = pytest.mark.skipif(not TRACES.is_dir(), reason=f"{TRACES} is not present")

WEAK = HazardPrior(rate_per_hour=0.1, pseudo_hours=1e-3)  # lets the data speak
DAY_S = 86_400.0


def _probe_series(
    rng: np.random.Generator, rate_per_hour: float, gap_s: float, probes: int, down_hours: float
) -> np.ndarray:
    """1/0 probes of a pool revoked at ``rate_per_hour`` while held, back after
    exponential ``down_hours``: alternating geometric spell lengths (in probes)."""
    gap_h = gap_s / 3600.0
    p_revoke = 1.0 - math.exp(-rate_per_hour * gap_h)
    p_return = 1.0 - math.exp(-gap_h / down_hours)
    spells = int(probes * (p_revoke + p_return)) + 200
    up = rng.geometric(p_revoke, spells)
    down = rng.geometric(p_return, spells)
    lengths = np.column_stack([up, down]).ravel()
    values = np.tile([1, 0], spells)
    series = np.repeat(values, lengths)
    assert series.size >= probes
    return series[:probes]


def _poisson_times(
    rng: np.random.Generator, rate_per_s: float, span_s: float
) -> NDArray[np.float64]:
    return np.sort(rng.uniform(0.0, span_s, rng.poisson(rate_per_s * span_s)))


# --- prior ------------------------------------------------------------------


def test_advisor_bucket_maps_to_a_monthly_survival_rate() -> None:
    for bucket, share in enumerate(ADVISOR_BUCKET_SHARES):
        prior = HazardPrior.from_advisor_bucket(bucket)
        # a month held at this rate is reclaimed with probability `share`
        assert 1.0 - math.exp(-730.0 * prior.rate_per_hour) == pytest.approx(share)
        assert prior.pseudo_hours == DEFAULT_PRIOR_HOURS
        assert prior.source is HazardSource.ADVISOR
    rates = [HazardPrior.from_advisor_bucket(b).rate_per_hour for b in range(5)]
    assert rates == sorted(rates)
    assert monthly_share_to_rate(0.25) == pytest.approx(-math.log(0.75) / 730.0)
    assert monthly_share_to_rate(0.0) == 0.0
    with pytest.raises(ValueError, match="0-4"):
        HazardPrior.from_advisor_bucket(5)
    with pytest.raises(ValueError):
        monthly_share_to_rate(1.0)


def test_gamma_quantile_agrees_with_sampling() -> None:
    rng = np.random.default_rng(7)
    for shape in (0.01, 0.3, 1.0, 4.0, 60.0, 2500.0):
        samples = rng.gamma(shape, size=200_000)
        for q in (0.05, 0.5, 0.95):
            below = float((samples < gamma_quantile(q, shape)).mean())
            assert below == pytest.approx(q, abs=0.005), (shape, q)


# --- posterior --------------------------------------------------------------


def test_posterior_is_the_conjugate_update() -> None:
    # prior: 100 pseudo-hours at 0.01/h = 1 pseudo-event; evidence 19 in 900 h
    prior = HazardPrior(rate_per_hour=0.01, pseudo_hours=100.0)
    est = estimate_hazard(Exposure(19, 900.0), prior=prior)
    assert est.posterior_shape == pytest.approx(20.0)
    assert est.posterior_hours == pytest.approx(1000.0)
    assert est.rate_per_hour == pytest.approx(0.02)
    assert est.confidence == pytest.approx(0.9)
    z = est.confidence  # posterior mean = Z * observed + (1 - Z) * prior
    assert est.rate_per_hour == pytest.approx(z * 19 / 900 + (1 - z) * 0.01)
    assert est.ci_low_per_hour < est.rate_per_hour < est.ci_high_per_hour
    lo, hi = gamma_log_hdi(20.0, 0.9)
    assert (est.ci_low_per_hour, est.ci_high_per_hour) == pytest.approx((lo / 1000, hi / 1000))


@pytest.mark.parametrize("shape", [1e-6, 1e-4, 0.0094, 0.1, 1.0, 20.0, 2000.0])
def test_log_hdi_holds_its_mass_and_the_mean(shape: float) -> None:
    lo, hi = gamma_log_hdi(shape, 0.9)
    assert lo <= shape <= hi  # the density of log Y peaks at log(mean)
    if lo > 0:  # equal log-density at both ends: a highest-density interval
        dens = [shape * math.log(x) - x for x in (lo, hi)]
        assert dens[0] == pytest.approx(dens[1], abs=1e-6 * max(1.0, abs(dens[1])))
    # mass: P(lo <= Y <= hi) = 0.9, from the CDF (tiny shapes) and by sampling
    mass = gamma_cdf(hi, shape) - (gamma_cdf(lo, shape) if lo > 0 else 0.0)
    if shape >= 0.1:
        assert mass == pytest.approx(0.9, abs=1e-6)
        y = np.random.default_rng(3).gamma(shape, size=100_000)
        assert float(((y >= lo) & (y <= hi)).mean()) == pytest.approx(0.9, abs=0.005)


def test_advisor_prior_alone_reports_its_mean_inside_its_interval() -> None:
    # bucket 4 over one day: 0.0094 pseudo-events; the equal-tailed 90 % interval
    # of that Gamma lies below its mean (the mean is its 95.7 % quantile)
    prior = HazardPrior.from_advisor_bucket(4)
    est = estimate_hazard(prior=prior)
    assert gamma_quantile(0.95, prior.pseudo_events) / prior.pseudo_hours < est.rate_per_hour
    assert est.ci_low_per_hour <= est.rate_per_hour <= est.ci_high_per_hour


def test_overdispersion_keeps_the_mean_and_widens_the_interval() -> None:
    prior = HazardPrior.from_advisor_bucket(4)
    plain = estimate_hazard(Exposure(300, 600.0), prior=prior)
    bursty = estimate_hazard(
        Exposure(300, 600.0), prior=prior, dispersion=Overdispersion(size=0.5, period_hours=24.0)
    )
    assert bursty.rate_per_hour == pytest.approx(plain.rate_per_hour)
    assert bursty.confidence == pytest.approx(plain.confidence)
    # phi = 1 + 0.5/h * 24 h / 0.5 = 25: the interval ~ 5x wider (sqrt 25)
    assert bursty.evidence_divisor == pytest.approx(1 + plain.rate_per_hour * 24 / 0.5)
    ratio = (bursty.ci_high_per_hour - bursty.ci_low_per_hour) / (
        plain.ci_high_per_hour - plain.ci_low_per_hour
    )
    assert 4.0 < ratio < 6.0
    assert bursty.ci_low_per_hour <= bursty.rate_per_hour <= bursty.ci_high_per_hour


def test_evidence_from_several_sources_adds_up() -> None:
    a, b = Exposure(3, 10.0), Exposure(5, 30.0)
    both = estimate_hazard([a, b], prior=WEAK)
    assert (both.events, both.exposure_hours) == (8, 40.0)
    own = estimate_from_revocations(np.array(["2024-01-01T00:00", "2024-01-02T00:00"]), 40.0)
    assert (own.events, own.exposure_hours) == (2, 40.0)
    with pytest.raises(ValueError):
        Exposure(1, 0.0)


@pytest.mark.parametrize("rate", [0.02, 0.3, 2.0])
def test_credible_interval_covers_the_true_rate_in_most_trials(rate: float) -> None:
    rng = np.random.default_rng(int(rate * 1000))
    trials, hours = 200, 300.0
    covered = 0
    for k in rng.poisson(rate * hours, trials):
        est = estimate_hazard(Exposure(int(k), hours), prior=WEAK, level=0.9)
        covered += est.ci_low_per_hour <= rate <= est.ci_high_per_hour
    assert 0.82 <= covered / trials <= 0.97  # nominal 0.90


def test_point_error_shrinks_with_exposure() -> None:
    rng = np.random.default_rng(11)
    rate = 0.4
    errors = []
    for hours in (50.0, 500.0, 5000.0):
        ks = rng.poisson(rate * hours, 100)
        est = [estimate_hazard(Exposure(int(k), hours), prior=WEAK).rate_per_hour for k in ks]
        err = float(np.mean(np.abs(np.array(est) - rate)))
        # Poisson: mean |error| ~ 0.8 * sqrt(rate / hours); allow 2x
        assert err <= 1.6 * math.sqrt(rate / hours), hours
        errors.append(err)
    assert errors[0] > errors[1] > errors[2]


@pytest.mark.parametrize(
    ("rate", "gap_s"), [(0.05, 195.0), (0.3, 195.0), (1.0, 32.0), (0.5, 600.0)]
)
def test_recovers_known_rate_from_a_synthetic_probe_series(rate: float, gap_s: float) -> None:
    rng = np.random.default_rng(int(rate * 100 + gap_s))
    probes = int(120 * DAY_S / gap_s)
    series = _probe_series(rng, rate, gap_s, probes, down_hours=1.0)
    est = estimate_from_counts(series, gap_s, prior=WEAK)
    # one revocation per interval at most: the estimate reads low by ~rate*gap/2
    bias = rate * gap_s / 3600.0 / 2.0
    tolerance = 4.0 * math.sqrt(rate / est.exposure_hours) + bias * rate
    assert est.rate_per_hour == pytest.approx(rate, abs=tolerance)
    assert est.available_share == pytest.approx(float(series.mean()))


def test_confidence_grows_with_observed_hours() -> None:
    prior = HazardPrior.from_advisor_bucket(2)
    hours = [0.0, 1.0, 12.0, DEFAULT_PRIOR_HOURS, 200.0, 5000.0]
    conf = [estimate_hazard(Exposure(0, h), prior=prior).confidence for h in hours]
    assert conf[0] == 0.0
    assert all(a < b for a, b in itertools.pairwise(conf))
    assert conf[3] == pytest.approx(0.5)
    assert 0.99 < conf[-1] < 1.0


def test_prior_dominates_little_data_and_washes_out_with_much() -> None:
    prior = HazardPrior.from_advisor_bucket(4)
    little = estimate_hazard(Exposure(0, 0.5), prior=prior)
    assert little.rate_per_hour == pytest.approx(prior.rate_per_hour, rel=0.05)
    assert little.confidence < 0.05
    true_rate = 0.2
    much = estimate_hazard(Exposure(int(true_rate * 20_000), 20_000.0), prior=prior)
    assert much.rate_per_hour == pytest.approx(true_rate, rel=0.01)
    assert much.confidence > 0.99


def test_hazard_carries_its_source() -> None:
    advisor = HazardPrior.from_advisor_bucket(1)
    assert estimate_hazard(prior=advisor).to_hazard().source is HazardSource.ADVISOR
    assert estimate_hazard().to_hazard().source is HazardSource.ASSUMED
    assert estimate_hazard().prior == ASSUMED_PRIOR
    hz = estimate_hazard(Exposure(4, 100.0), prior=advisor).to_hazard()
    assert hz.source is HazardSource.OBSERVED
    assert hz.observed_hours == 100.0
    assert 0.0 < hz.confidence < 1.0
    assert hz.rate_per_hour == pytest.approx((advisor.pseudo_events + 4) / (100.0 + 24.0))


# --- probe series -----------------------------------------------------------


def test_revocations_and_exposure_from_a_probe_series() -> None:
    one = [0, 1, 1, 0, 1, 0, 0]
    assert exposure_from_counts(one, 600.0) == Exposure(2, 0.5)
    np.testing.assert_array_equal(revocation_times_s(one, 600.0), [1800.0, 3000.0])
    many = [16, 16, 8, 0, 16]
    got = exposure_from_counts(many, 300.0, nodes=16)
    assert got == Exposure(16, (16 + 16 + 8 + 0) * 300.0 / 3600.0)
    times = revocation_times_s(many, 300.0, nodes=16)
    np.testing.assert_array_equal(times, [600.0] * 8 + [900.0] * 8)


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param([1, -1, 0], id="negative"),
        pytest.param([1, 0.5, 0], id="fractional"),
        pytest.param([[1, 0], [0, 1]], id="two-dimensional"),
        pytest.param([], id="empty"),
        pytest.param([1, 2, 0], id="more-than-nodes"),
        pytest.param([1, float("nan")], id="nan"),
    ],
)
def test_bad_probe_series_is_rejected(bad: ArrayLike) -> None:
    with pytest.raises(ValueError):
        exposure_from_counts(bad, 60.0)


def test_regime_stats_of_a_hand_series() -> None:
    series = [1, 1, 1, 0, 0, 1, 1, 1, 1, 0]
    r = regime_stats(series, 1800.0)
    assert r.available_share == pytest.approx(0.7)
    assert (r.up_spells, r.down_spells) == (2, 2)
    assert r.mean_up_hours == pytest.approx(3.5 * 0.5)
    assert r.mean_down_hours == pytest.approx(1.5 * 0.5)
    gang = regime_stats([4, 4, 0, 2, 4, 0], 60.0, nodes=4)
    assert gang.all_share == pytest.approx(3 / 6)
    assert gang.none_share == pytest.approx(2 / 6)
    assert gang.all_or_none_share == pytest.approx(5 / 6)
    assert gang.any_share == pytest.approx(4 / 6)
    assert gang.available_share == pytest.approx(14 / 24)
    assert regime_stats([1, 1], 60.0).mean_down_hours is None


# --- clustering and zone correlation ----------------------------------------


def _bursts(rng: np.random.Generator, span_s: float, shocks_per_day: float) -> NDArray[np.float64]:
    """Planted clusters: each shock brings 2-6 revocations within 60 s."""
    shocks = _poisson_times(rng, shocks_per_day / DAY_S, span_s)
    sizes = rng.integers(2, 7, shocks.size)
    times: NDArray[np.float64] = np.repeat(shocks, sizes) + rng.uniform(0, 60.0, sizes.sum())
    return times


def test_clustering_detects_planted_bursts_and_not_independent_events() -> None:
    rng = np.random.default_rng(3)
    span = 30 * DAY_S
    planted = clustering(_bursts(rng, span, 4.0), span_s=span)
    assert planted.probability is not None and planted.probability > 0.6
    assert planted.baseline is not None and planted.baseline < 0.1
    independent = clustering(_poisson_times(rng, 16 / DAY_S, span), span_s=span)
    assert independent.probability is not None and independent.probability < 0.1
    assert independent.baseline is not None
    assert independent.probability == pytest.approx(independent.baseline, abs=0.04)
    assert independent.window_s == CLUSTER_WINDOW_S


def test_clustering_reports_the_window_it_could_resolve() -> None:
    times = [0.0, 600.0, 5000.0]
    fine = clustering(times, window_s=300.0)
    assert (fine.followed, fine.effective_window_s) == (0, 300.0)
    coarse = clustering(times, window_s=300.0, resolution_s=600.0)
    assert (coarse.followed, coarse.effective_window_s) == (1, 600.0)
    assert clustering([]).probability is None


def test_simultaneous_revocations_count_unless_distinct() -> None:
    drop = [900.0] * 16 + [50_000.0]  # a 16-node gang lost at once, later one more
    assert clustering(drop).followed == 16
    episodes = clustering(drop, distinct=True)
    assert (episodes.events, episodes.followed) == (2, 0)


def test_zone_correlation_detects_planted_co_revocation() -> None:
    rng = np.random.default_rng(5)
    span = 30 * DAY_S
    shocks = _poisson_times(rng, 3 / DAY_S, span)
    events: dict[str, np.ndarray] = {}
    for name in ("p3.2xlarge", "p3.8xlarge", "g4dn.xlarge"):
        # zone a: each pool joins 70 % of the zone's shocks, within 60 s
        joined = shocks[rng.random(shocks.size) < 0.7]
        events[f"aws/us-east-1/us-east-1a/{name}"] = joined + rng.uniform(0, 60, joined.size)
        # zone b: the same rates, independently
        events[f"aws/us-east-1/us-east-1b/{name}"] = _poisson_times(rng, 2.1 / DAY_S, span)
    zones = zone_correlations(events, span_s=span)
    a, b = zones["us-east-1a"], zones["us-east-1b"]
    assert a.pools == b.pools == 3
    assert a.share is not None and a.baseline is not None and b.share is not None
    assert a.share > 0.8 and a.share > 5 * a.baseline
    assert b.baseline is not None and b.share == pytest.approx(b.baseline, abs=0.05)
    assert a.mean_pairwise_corr is not None and a.mean_pairwise_corr > 0.3
    assert b.mean_pairwise_corr is not None and abs(b.mean_pairwise_corr) < 0.1


def test_co_revocation_needs_two_pools() -> None:
    alone = co_revocation([[10.0, 20.0]], span_s=100.0)
    assert alone.share is None and alone.mean_pairwise_corr is None
    with pytest.raises(ValueError):
        co_revocation([[1.0]], span_s=0.0)


def test_times_may_be_datetimes() -> None:
    t0 = datetime(2023, 2, 15, tzinfo=UTC)
    got = clustering([t0, t0 + timedelta(minutes=4), t0 + timedelta(hours=2)])
    assert (got.events, got.followed) == (3, 1)


# --- the real traces ---------------------------------------------------------


@pytest.fixture(scope="module")
def real_traces() -> list[SpotTrace]:
    return load_spot_traces(TRACES)


@needs_traces
def test_real_traces_hazard_and_held_share_are_plausible(real_traces: list[SpotTrace]) -> None:
    prior = HazardPrior.from_advisor_bucket(4)  # p2/p3 in us-west-2: bucket 4 (2025 snapshot)
    shares = []
    for tr in real_traces:
        est = estimate_from_trace(tr, prior=prior)
        assert est.available_share is not None and 0.0 <= est.available_share <= 1.0
        if tr.kind == "availability" and tr.nodes == 1:
            shares.append(est.available_share)
        assert est.ci_low_per_hour <= est.ci_high_per_hour
        # (the log-density interval holds the mean even at the prior's 0.009
        # pseudo-events, whose equal-tailed interval lies below it)
        assert est.ci_low_per_hour <= est.rate_per_hour <= est.ci_high_per_hour
        if est.exposure_hours >= 24.0:
            observed = est.observed_rate_per_hour
            assert observed is not None and observed < 5.0, tr.path
            assert est.confidence > 0.5
            if est.events:  # GCP us-central1-a held 45 h without a preemption
                assert observed > 0.01, tr.path
                assert observed > 50 * prior.rate_per_hour  # the advisor prior is a floor
    # data/README: the share of time spot could be held spreads from ~0.17 to ~0.91
    assert min(shares) < 0.2 and max(shares) > 0.8


@needs_traces
def test_real_gang_trace_is_all_or_none_and_clustered(real_traces: list[SpotTrace]) -> None:
    gangs = [t for t in real_traces if t.nodes > 1]
    assert gangs
    for tr in gangs:
        available = tr.frame["available"].to_numpy()
        regime = regime_stats(available, tr.gap_seconds, nodes=tr.nodes)
        # SkyPilot: > 94 % of the time all or none of a 16-node cluster available
        assert regime.all_or_none_share > 0.94
        times = trace_revocation_times_s(tr)
        span = tr.hours * 3600.0
        node_level = clustering(times, resolution_s=tr.gap_seconds, span_s=span)
        # SkyServe: 83-97 % of preemptions followed by another within 5 minutes
        assert node_level.probability is not None and node_level.probability >= 0.83
        episodes = clustering(times, resolution_s=tr.gap_seconds, span_s=span, distinct=True)
        assert episodes.probability is not None
        assert episodes.probability < node_level.probability


@needs_traces
def test_real_zones_report_co_revocation(real_traces: list[SpotTrace]) -> None:
    same_start = [t for t in real_traces if t.kind == "availability" and t.nodes == 1]
    by_start: dict[datetime, list[SpotTrace]] = {}
    for t in same_start:
        by_start.setdefault(t.start, []).append(t)
    for start, group in by_start.items():
        events = {t.pool_key: trace_revocation_times_s(t) for t in group}
        zones = zone_correlations(
            events,
            span_s=group[0].hours * 3600.0,
            start_s=start.timestamp(),
            resolution_s=group[0].gap_seconds,
        )
        assert set(zones) == {t.zone for t in group}
        for zone, co in zones.items():
            pools_here = [t for t in group if t.zone == zone]
            assert co.pools == len(pools_here)
            assert co.events == sum(len(events[t.pool_key]) for t in pools_here)
            if co.pools > 1:
                assert co.share is not None and co.baseline is not None
                assert 0.0 <= co.share <= 1.0 and 0.0 < co.baseline < 1.0
                assert co.effective_window_s == max(CLUSTER_WINDOW_S, group[0].gap_seconds)
