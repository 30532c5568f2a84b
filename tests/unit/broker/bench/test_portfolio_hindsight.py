"""The portfolio hindsight's spot market: every hour's capacity, not the first hour's."""

from __future__ import annotations

from datetime import timedelta

import numpy as np

from broker.bench.portfolio import hindsight_market
from broker.planning.optimizer.problem import PlanOptions, _capacity
from broker.whatif.run import _actuals
from markets.registry import open_market

HOURS, STEP = 48, 6


def test_a_pool_without_spot_in_the_first_hour_has_the_capacity_of_the_hours_after() -> None:
    """Seed 11's default market (the portfolio's seed 4): at hour 0 most
    pools offer no spot, and many do a few hours later. The hindsight used
    to take hour 0's capacity for the whole period, so it never used them
    while the loop, re-planning on each step's snapshot, did (and billed
    below the hindsight's bound)."""
    market = open_market("default", seed=11)
    first = market.snapshot(None)
    actuals = _actuals(market, first, first.at, HOURS)
    units = PlanOptions().spot_units_at_score_10
    whole, prices, caps = hindsight_market(market, first, actuals, HOURS, STEP, units)
    later = [
        {q.pool.key: q for q in market.snapshot(first.at + timedelta(hours=h)).pools}
        for h in range(HOURS)
    ]
    offered = {p.pool.key: p for p in whole.pools}
    found = 0
    for p in first.pools:
        key = p.pool.key
        now = np.array([_capacity(s[key], units) for s in later])
        if _capacity(p, units) > 0 or now.max() <= 0 or p.spot_usd_per_hour is None:
            continue
        found += 1
        # offered, at an hourly price, with each hour's capacity (at least
        # that hour's, and the step start's) times the share held
        assert offered[key].spot_available and offered[key].available_share == 1.0
        assert np.isfinite(prices[key]).all() and len(prices[key]) == HOURS
        held = np.nan_to_num(actuals.spot_available.get(key, np.ones(HOURS)), nan=1.0)
        step_start = now[np.arange(HOURS) // STEP * STEP]
        assert np.allclose(caps[key], np.maximum(now, step_start) * held)
        assert caps[key].max() > 0
    assert found >= 5, "the market should have pools that gain spot after hour 0"
