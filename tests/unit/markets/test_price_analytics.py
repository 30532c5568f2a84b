"""Spot price movement: weekly volatility, regime shifts, the planning margin,
the spread across zones. Hand-built step series whose answers can be read off;
the change points are checked against ``ruptures``' PELT (the reference)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
import ruptures

from markets.model import InstanceType, Pool, PoolSnapshot, Provider
from markets.price_analytics import (
    MIN_REGIME_HOURS,
    REGIME_SHIFT,
    RISK_Z,
    WINDOW_HOURS,
    _breaks,
    price_risk,
    zone_spreads,
)

T0 = datetime(2026, 3, 2, tzinfo=UTC)
HOUR_NS = 3_600_000_000_000
AT = int(T0.timestamp()) * 1_000_000_000


def _steps(*points: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """(hours before AT, price) change points -> (t_ns, values)."""
    t = np.array([AT - int(h * HOUR_NS) for h, _ in points], dtype=np.int64)
    return t, np.array([v for _, v in points], dtype=np.float64)


def test_a_flat_price_has_no_volatility_no_shift_and_no_margin() -> None:
    risk = price_risk(*_steps((1000.0, 0.5)), AT)
    assert risk is not None
    assert (risk.shifts, risk.weekly_volatility, risk.margin_usd_per_hour) == (0, 0.0, 0.0)
    assert risk.regime_usd_per_hour == pytest.approx(0.5)
    assert risk.planning_usd_per_hour == pytest.approx(0.5)
    assert risk.window_hours == WINDOW_HOURS


def test_a_jump_held_for_days_starts_a_regime_priced_with_its_margin() -> None:
    # 0.20 for weeks, then +40 % three days ago
    risk = price_risk(*_steps((1000.0, 0.20), (72.0, 0.28)), AT)
    assert risk is not None and risk.shifts == 1
    assert risk.regime_since == T0 - timedelta(hours=72)
    assert risk.regime_usd_per_hour == pytest.approx(0.28)
    assert risk.last_shift == pytest.approx(0.4)
    # one log return of ln 1.4 in 672 hours: sqrt(168 * ln(1.4)^2 / 672)
    vol = math.sqrt(168 * math.log(1.4) ** 2 / WINDOW_HOURS)
    assert risk.weekly_volatility == pytest.approx(vol)
    assert risk.margin_usd_per_hour == pytest.approx(0.28 * math.expm1(RISK_Z * vol))


def test_slow_drift_is_priced_at_the_price_in_force_plus_its_volatility() -> None:
    # +0.5 % a day for four weeks (AWS-like drift, ~3.5 % a week)
    points = [(float(h), 1.01 * 1.005 ** (28 - h // 24)) for h in range(672, 0, -24)]
    risk = price_risk(*_steps(*points), AT)
    now = points[-1][1]
    assert risk is not None and risk.regime_usd_per_hour == pytest.approx(now)
    # daily steps of ln 1.005: weekly volatility sqrt(168 * 27 * ln(1.005)^2 / 672)
    vol = math.sqrt(168 * 27 * math.log(1.005) ** 2 / WINDOW_HOURS)
    assert risk.weekly_volatility == pytest.approx(vol)
    assert risk.planning_usd_per_hour == pytest.approx(now * math.exp(vol))


def test_a_dip_inside_a_dearer_regime_is_priced_at_the_regime() -> None:
    risk = price_risk(*_steps((1000.0, 0.20), (200.0, 0.30), (2.0, 0.25)), AT)
    assert risk is not None and risk.shifts == 1
    assert 0.29 < risk.regime_usd_per_hour < 0.30  # the regime's level, not the dip


def test_a_jump_younger_than_a_day_is_margin_not_yet_a_regime() -> None:
    risk = price_risk(*_steps((1000.0, 0.20), (6.0, 0.30)), AT)
    assert risk is not None and risk.shifts == 0 and risk.regime_since is None
    assert risk.regime_usd_per_hour == pytest.approx(0.30)  # the floor: the price in force
    assert risk.margin_usd_per_hour > 0.0


def test_no_price_in_force_gives_no_risk() -> None:
    t, v = _steps((-5.0, 0.3))  # first change point after AT
    assert price_risk(t, v, AT) is None
    assert price_risk(*_steps((10.0, float("nan"))), AT) is None


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_change_points_agree_with_ruptures_pelt(seed: int) -> None:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(30, 150, size=4)
    levels = rng.normal(0.0, 0.2, size=4)
    x = np.repeat(levels, lengths).astype(np.float64)
    ours = _breaks(x)
    pelt = ruptures.Pelt(model="l2", min_size=MIN_REGIME_HOURS, jump=1).fit(x.reshape(-1, 1))
    theirs = pelt.predict(pen=MIN_REGIME_HOURS * REGIME_SHIFT**2)[:-1]
    assert ours == theirs


def _snap(zone: str, itype: str, spot: float | None) -> PoolSnapshot:
    return PoolSnapshot(
        pool=Pool(provider=Provider.AWS, region=zone[:-1], zone=zone, instance_type=itype),
        instance=InstanceType(
            provider=Provider.AWS, name=itype, family="g", units=1, gpus=1, vcpus=4, memory_gib=16.0
        ),
        on_demand_usd_per_hour=1.0,
        spot_usd_per_hour=spot,
        observed_at=T0,
    )


def test_zone_spread_per_type_and_region() -> None:
    pools = [
        _snap("us-east-1a", "g1", 0.30),
        _snap("us-east-1b", "g1", 0.45),
        _snap("us-east-1c", "g1", None),
        _snap("us-west-2a", "g1", 0.20),  # alone in its region: no spread
        _snap("us-east-1a", "g2", 0.9),
    ]
    spreads = zone_spreads(pools)
    assert set(spreads) == {("aws", "us-east-1", "g1")}
    s = spreads[("aws", "us-east-1", "g1")]
    assert (s.zones, s.cheapest_zone) == (2, "us-east-1a")
    assert s.spread == pytest.approx(0.5)
    assert s.premium(0.45) == pytest.approx(0.5)
