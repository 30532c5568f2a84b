"""The embedded default market: deterministic, calibrated, and a valid HistorySource.

Calibration checks compare generated statistics with the figures stated in
``markets.default.calibration`` (and docs/concepts/market.md), with tolerances from
the sampling noise of a few months of history.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from markets.catalog import CATALOG, committed_price, list_price
from markets.default import calibration as cal
from markets.default import market as dm
from markets.errors import InputError
from markets.model import HazardSource, Provider
from markets.protocols import HistorySource
from markets.registry import open_market

DAYS = 120


@pytest.fixture(scope="module")
def market() -> dm.DefaultMarket:
    return dm.open_default_market(seed=7, days=DAYS)


@pytest.fixture(scope="module")
def frame(market: dm.DefaultMarket) -> pd.DataFrame:
    start, _ = market.span()
    return market.hourly(start, DAYS * 24)


def _zone_of(pool_key: str) -> str:
    return pool_key.rsplit("/", 1)[0]


# --- protocol and registry -------------------------------------------------------


def test_registered_as_default_and_is_a_history_source() -> None:
    m = open_market("default", seed=3, days=2, path="ignored")
    assert isinstance(m, dm.DefaultMarket)
    assert isinstance(m, HistorySource)
    assert m.name == "default"


def test_pools_cover_the_catalog_zones(market: dm.DefaultMarket) -> None:
    pools = market.pools()
    assert len({p.key for p in pools}) == len(pools)
    assert {p.instance_type for p in pools} == set(CATALOG)
    assert {t.name for t in market.instance_types()} == set(CATALOG)
    assert {p.provider for p in pools} == {Provider.AWS, Provider.GCP}


def test_span_starts_at_the_stated_default_not_the_wall_clock(market: dm.DefaultMarket) -> None:
    assert market.span() == (dm.DEFAULT_START, dm.DEFAULT_START + timedelta(days=DAYS))


# --- determinism ---------------------------------------------------------------


def test_same_seed_gives_identical_history() -> None:
    a, b = dm.open_default_market(seed=11, days=20), dm.open_default_market(seed=11, days=20)
    start, end = a.span()
    pd.testing.assert_frame_equal(a.hourly(start, 20 * 24), b.hourly(start, 20 * 24))
    key = a.pools()[0].key
    assert a.revocation_events(key, start, end).equals(b.revocation_events(key, start, end))
    assert a.snapshot(start + timedelta(days=3)) == b.snapshot(start + timedelta(days=3))


def test_different_seed_gives_a_different_history() -> None:
    a, b = dm.open_default_market(seed=11, days=20), dm.open_default_market(seed=12, days=20)
    start, _ = a.span()
    fa, fb = a.hourly(start, 20 * 24), b.hourly(start, 20 * 24)
    assert not np.allclose(fa["spot_usd_per_hour"], fb["spot_usd_per_hour"])
    assert not np.allclose(fa["spot_available"], fb["spot_available"])


def test_an_instance_type_filter_shows_the_same_histories() -> None:
    full = dm.open_default_market(seed=5, days=10)
    some = dm.open_default_market(seed=5, days=10, instance_types=["p3.2xlarge", "g2-standard-4"])
    assert {p.instance_type for p in some.pools()} == {"p3.2xlarge", "g2-standard-4"}
    start, _ = full.span()
    f_full, f_some = full.hourly(start, 240), some.hourly(start, 240)
    f_full = f_full[f_full["pool_key"].isin(set(f_some["pool_key"]))].reset_index(drop=True)
    pd.testing.assert_frame_equal(f_full, f_some)


# --- hourly() --------------------------------------------------------------------


def test_hourly_schema_and_shape(market: dm.DefaultMarket, frame: pd.DataFrame) -> None:
    n_pools = len(market.pools())
    assert list(frame.columns) == [
        "hour",
        "pool_key",
        "spot_usd_per_hour",
        "on_demand_usd_per_hour",
        "spot_available",
        "revocations",
    ]
    assert len(frame) == DAYS * 24 * n_pools
    assert str(frame["hour"].dt.tz) == "UTC"
    assert frame["hour"].is_monotonic_increasing  # hour-major
    assert frame.groupby("hour").size().eq(n_pools).all()
    assert frame["spot_available"].between(0.0, 1.0).all()
    assert pd.api.types.is_integer_dtype(frame["revocations"])
    assert (frame["revocations"] >= 0).all()
    assert (frame["spot_usd_per_hour"] < frame["on_demand_usd_per_hour"]).all()


def test_hourly_counts_are_the_sub_hour_events(market: dm.DefaultMarket) -> None:
    start, _ = market.span()
    window = market.hourly(start + timedelta(days=10), 72)
    for key, counts in window.groupby("pool_key")["revocations"].sum().items():
        events = market.revocation_events(
            str(key), start + timedelta(days=10), start + timedelta(days=13)
        )
        assert counts == len(events)


def test_hourly_window_is_a_slice_of_the_whole(
    market: dm.DefaultMarket, frame: pd.DataFrame
) -> None:
    start, _ = market.span()
    part = market.hourly(start + timedelta(hours=100, minutes=30), 5)  # floored to the hour
    expect = frame[
        frame["hour"].between(start + timedelta(hours=100), start + timedelta(hours=104))
    ]
    pd.testing.assert_frame_equal(part, expect.reset_index(drop=True))


def test_hourly_outside_the_span_is_an_input_error(market: dm.DefaultMarket) -> None:
    start, end = market.span()
    with pytest.raises(InputError, match="span"):
        market.hourly(start - timedelta(days=1), 24)
    with pytest.raises(InputError, match="hours"):
        market.hourly(end - timedelta(hours=2), 3)


# --- calibration: prices ---------------------------------------------------------


def test_discounts_stay_in_the_stated_band(frame: pd.DataFrame) -> None:
    discount = 1.0 - frame["spot_usd_per_hour"] / frame["on_demand_usd_per_hour"]
    assert discount.min() >= cal.SPOT_DISCOUNT_MIN - 1e-9
    assert discount.max() <= cal.SPOT_DISCOUNT_MAX + 1e-9
    per_pool = discount.groupby(frame["pool_key"]).mean()
    # Beta(2, 3) over the band: mean 0.72; both halves of the band are used.
    assert per_pool.mean() == pytest.approx(0.72, abs=0.02)
    assert per_pool.min() < 0.66 and per_pool.max() > 0.80


def test_aws_prices_drift_a_few_percent_a_week(frame: pd.DataFrame) -> None:
    prices = frame.pivot(index="hour", columns="pool_key", values="spot_usd_per_hour")
    od = frame.pivot(index="hour", columns="pool_key", values="on_demand_usd_per_hour")
    discount = 1.0 - prices / od
    free = [  # AWS pools that never touch the band's edges (clipping damps drift)
        c
        for c in prices.columns
        if c.startswith("aws/")
        and discount[c].between(cal.SPOT_DISCOUNT_MIN + 1e-6, cal.SPOT_DISCOUNT_MAX - 1e-6).all()
    ]
    assert len(free) > 100
    logp = np.log(prices[free].to_numpy())
    weekly = logp[168:] - logp[:-168]
    assert weekly.std() == pytest.approx(cal.PRICE_WEEKLY_SD, rel=0.2)
    assert np.abs(np.diff(logp, axis=0)).max() < 0.05  # no hourly jumps


def test_gcp_spot_price_is_per_region_and_holds_thirty_days(frame: pd.DataFrame) -> None:
    gcp = frame[frame["pool_key"].str.startswith("gcp/us-central1/")]
    prices = gcp.pivot(index="hour", columns="pool_key", values="spot_usd_per_hour")
    by_type = defaultdict(list)
    for c in prices.columns:
        by_type[c.rsplit("/", 1)[1]].append(c)
    for cols in by_type.values():
        assert np.allclose(prices[cols].to_numpy(), prices[cols[0]].to_numpy()[:, None])
    changes = (prices.diff().abs() > 0).sum(axis=0)
    assert changes.max() <= DAYS * 24 // cal.GCP_PRICE_HOLD_HOURS + 1


# --- calibration: availability ---------------------------------------------------


def test_time_available_share_spreads_across_zones(
    market: dm.DefaultMarket, frame: pd.DataFrame
) -> None:
    per_pool = frame.groupby("pool_key")["spot_available"].mean()
    per_zone = per_pool.groupby(per_pool.index.map(_zone_of)).mean()
    # docs/concepts/market.md: 0.17 to 0.91 across zones.
    assert per_zone.min() < 0.3
    assert per_zone.max() > 0.8
    assert per_pool.min() > 0.1
    # Each pool realises its long-run share (tens of crunch spells in 120 days).
    expected = np.array([market.expected_available_share(str(k)) for k in per_pool.index])
    assert np.abs(per_pool.to_numpy() - expected).max() < 0.12


def test_pools_of_a_zone_are_short_together(frame: pd.DataFrame) -> None:
    avail = frame.pivot(index="hour", columns="pool_key", values="spot_available")
    corr = np.corrcoef(avail.to_numpy().T)
    zones = np.array([_zone_of(c) for c in avail.columns])
    same = zones[:, None] == zones[None, :]
    off_diag = ~np.eye(len(zones), dtype=bool)
    assert corr[same & off_diag].mean() > 0.6
    assert abs(corr[~same].mean()) < 0.1


# --- calibration: revocations ----------------------------------------------------


def _zone_events(market: dm.DefaultMarket) -> dict[str, np.ndarray]:
    start, end = market.span()
    out: dict[str, list[np.ndarray]] = defaultdict(list)
    for p in market.pools():
        out[_zone_of(p.key)].append(market.revocation_events(p.key, start, end).asi8)
    return {z: np.sort(np.concatenate(v)) for z, v in out.items()}


def test_revocations_cluster_within_five_minutes_in_a_zone(market: dm.DefaultMarket) -> None:
    followed = total = 0
    for ns in _zone_events(market).values():
        gaps_s = np.diff(ns) / 1e9
        followed += int((gaps_s <= cal.CLUSTER_WINDOW_S).sum())
        total += len(ns)
    assert total > 2000
    # SkyServe (EuroSys 2025): 83-97 % are followed by another within 5 minutes.
    assert 0.83 <= followed / total <= 0.97


def test_revocation_rates_match_the_advisor_buckets(market: dm.DefaultMarket) -> None:
    start, end = market.span()
    hours = DAYS * 24.0
    count: dict[int, int] = defaultdict(int)
    expected: dict[int, float] = defaultdict(float)
    pool_hours: dict[int, float] = defaultdict(float)
    for p in market.pools():
        m = market.pool_model(p.key)
        lo, hi = cal.bucket_hazard_band(m.bucket)
        assert lo <= m.hazard_per_hour <= hi
        count[m.bucket] += len(market.revocation_events(p.key, start, end))
        expected[m.bucket] += m.hazard_per_hour * hours
        pool_hours[m.bucket] += hours
    top = len(cal.BUCKET_WEIGHTS) - 1
    assert count[top] == pytest.approx(expected[top], rel=0.15)
    assert count[top] / pool_hours[top] > cal.bucket_hazard_band(top)[0]
    for b in range(top):  # few events: within 4 Poisson sds of the bucket's edges
        lo, hi = (r * pool_hours[b] for r in cal.bucket_hazard_band(b))
        assert lo - 4 * np.sqrt(lo) - 1 <= count[b] <= hi + 4 * np.sqrt(hi) + 1, b
    # GPU types are mostly in the top bucket, as in the advisor snapshot.
    buckets = [market.pool_model(p.key).bucket for p in market.pools()]
    assert buckets.count(top) / len(buckets) > 0.6


def test_revocations_come_more_often_in_a_capacity_crunch(
    market: dm.DefaultMarket, frame: pd.DataFrame
) -> None:
    short = frame["spot_available"] < 0.5
    rate_short = frame.loc[short, "revocations"].mean()
    rate_calm = frame.loc[~short, "revocations"].mean()
    assert rate_short > 1.5 * rate_calm


# --- snapshot --------------------------------------------------------------------


def test_snapshot_defaults_to_the_start_and_is_valid(market: dm.DefaultMarket) -> None:
    snap = market.snapshot()
    start, _ = market.span()
    assert snap.at == start
    assert len(snap.pools) == len(market.pools())
    for ps in snap.pools:
        p = ps.pool
        assert ps.on_demand_usd_per_hour == pytest.approx(
            list_price(p.provider, p.region, p.instance_type)
        )
        assert ps.spot_discount is not None
        assert cal.SPOT_DISCOUNT_MIN - 1e-9 <= ps.spot_discount <= cal.SPOT_DISCOUNT_MAX + 1e-9
        assert ps.committed_1y_usd_per_hour == committed_price(
            p.provider, p.region, p.instance_type, 1
        )
        if ps.committed_1y_usd_per_hour is not None:
            assert ps.committed_3y_usd_per_hour is not None
            assert (
                ps.committed_3y_usd_per_hour
                < ps.committed_1y_usd_per_hour
                < ps.on_demand_usd_per_hour
            )
        assert ps.placement_score is not None and 1 <= ps.placement_score <= 10
        assert ps.hazard.source is HazardSource.MODEL
        assert ps.hazard.rate_per_hour == market.pool_model(p.key).hazard_per_hour
        assert ps.available_share is not None and 0.0 <= ps.available_share <= 1.0
        assert ps.observed_at == start


def test_snapshot_is_as_of_the_hourly_history(
    market: dm.DefaultMarket, frame: pd.DataFrame
) -> None:
    start, _ = market.span()
    at = start + timedelta(days=30, minutes=20)
    snap = market.snapshot(at)
    rows = frame[frame["hour"] == start + timedelta(days=30)].set_index("pool_key")
    for ps in snap.pools:
        assert ps.spot_usd_per_hour == rows.loc[ps.pool.key, "spot_usd_per_hour"]
        trailing = market.available_share(ps.pool.key, at - timedelta(days=7), at)
        assert ps.available_share == pytest.approx(trailing)


def test_placement_follows_availability_not_hazard(market: dm.DefaultMarket) -> None:
    start, _ = market.span()
    scores, avail, hazard = [], [], []
    for day in range(5, DAYS, 10):
        for ps in market.snapshot(start + timedelta(days=day, hours=7)).pools:
            scores.append(ps.placement_score)
            avail.append(ps.spot_available)
            hazard.append(np.log(ps.hazard.rate_per_hour))
    s, a = np.array(scores, dtype=float), np.array(avail)
    assert s[a].mean() > s[~a].mean() + 3
    assert abs(np.corrcoef(s, hazard)[0, 1]) < 0.2


def test_snapshot_outside_the_span_is_an_input_error(market: dm.DefaultMarket) -> None:
    _, end = market.span()
    with pytest.raises(InputError, match="--at"):
        market.snapshot(end + timedelta(hours=1))
    with pytest.raises(InputError, match="--at"):
        market.snapshot(datetime(2020, 1, 1, tzinfo=UTC))


# --- bad input -------------------------------------------------------------------


def test_bad_options_are_input_errors(market: dm.DefaultMarket) -> None:
    with pytest.raises(InputError, match="--days"):
        dm.open_default_market(days=0)
    with pytest.raises(InputError, match=r"p3\.2xlarge"):
        dm.open_default_market(instance_types=["p3.2xlarg"])
    with pytest.raises(InputError, match="pool"):
        market.pool_model("aws/us-east-1/us-east-1a/nope")
