"""Break-glass rules: breakers, churn and resize budgets, the dollar ledger,
return-to-spot hysteresis and rebalance precision (policies.breakglass)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from policies.breakglass import (
    BreakerSettings,
    BreakGlassLedger,
    ChurnBudget,
    CircuitBreakers,
    RebalancePrecision,
    resize_block_reason,
    return_to_spot_verdict,
)

# --- circuit breakers -------------------------------------------------------------


def test_pool_breaker_opens_on_the_first_revocation_and_closes_after_cooldown() -> None:
    b = CircuitBreakers(BreakerSettings(open_after=1, cooldown_s=900.0))
    assert not b.is_open("p", 0.0)
    assert b.record("p", 100.0) is True
    assert b.is_open("p", 100.0)
    assert b.is_open("p", 999.9)
    assert not b.is_open("p", 1000.0)  # 100 + 900
    assert not b.is_open("other", 500.0)


def test_zone_breaker_needs_two_revocations_inside_the_window() -> None:
    b = CircuitBreakers(BreakerSettings(open_after=2, window_s=300.0, cooldown_s=600.0))
    assert b.record("z", 0.0) is False
    assert not b.is_open("z", 1.0)
    # The second lands 301 s later: outside the 5-minute clustering window.
    assert b.record("z", 301.0) is False
    assert not b.is_open("z", 302.0)
    # A third 100 s after the second: two within 300 s, open for 600 s from it.
    assert b.record("z", 401.0) is True
    assert b.is_open("z", 1000.0)
    assert not b.is_open("z", 1001.0)


def test_a_storm_keeps_the_breaker_open_until_cooldown_after_the_last_revocation() -> None:
    b = CircuitBreakers(BreakerSettings(open_after=2, window_s=300.0, cooldown_s=600.0))
    opened = [b.record("z", float(t)) for t in range(0, 3000, 10)]
    assert opened.count(True) == 1  # opened once, then only extended
    assert b.is_open("z", 2990.0 + 599.0)
    assert not b.is_open("z", 2990.0 + 600.0)


def test_a_retrip_soon_after_closing_doubles_the_cooldown_up_to_the_cap() -> None:
    s = BreakerSettings(open_after=1, cooldown_s=100.0, max_cooldown_s=350.0, memory_s=1000.0)
    b = CircuitBreakers(s)
    b.record("p", 0.0)
    assert b.open_until_s("p") == 100.0
    b.record("p", 200.0)  # closed at 100, re-trips 100 s later: within memory
    assert b.open_until_s("p") == 400.0  # 200 s cooldown
    b.record("p", 500.0)
    assert b.open_until_s("p") == 850.0  # 400 s, capped at 350
    b.record("p", 5000.0)  # long after closing: memory forgotten
    assert b.open_until_s("p") == 5100.0


def test_out_of_order_revocations_still_count_inside_the_window() -> None:
    b = CircuitBreakers(BreakerSettings(open_after=2, window_s=300.0, cooldown_s=600.0))
    b.record("z", 1000.0)
    assert b.record("z", 900.0) is True  # arrived late, 100 s earlier
    assert b.open_keys(950.0) == ["z"]


# --- churn and resize budgets -----------------------------------------------------


def test_churn_budget_is_five_percent_of_capacity_per_ten_minutes() -> None:
    c = ChurnBudget(window_s=600.0, max_share=0.05, floor_units=0.0)
    # 1,000 units of capacity: 50 units per window.
    assert c.allows(50, 1000, 0.0)
    assert not c.allows(51, 1000, 0.0)
    c.record(40, 0.0)
    assert c.allows(10, 1000, 100.0)
    assert not c.allows(11, 1000, 100.0)
    # The 40 leave the window at t = 600.
    assert not c.allows(11, 1000, 599.0)
    assert c.allows(50, 1000, 600.0)


def test_churn_floor_lets_a_small_fleet_replace_one_node() -> None:
    c = ChurnBudget(window_s=600.0, max_share=0.05, floor_units=8.0)
    assert c.limit_units(80) == 8.0  # 5 % of 80 is 4
    assert c.allows(8, 80, 0.0)
    c.record(8, 0.0)
    assert not c.allows(8, 80, 1.0)


def test_a_whole_move_larger_than_the_limit_takes_an_empty_window_alone() -> None:
    c = ChurnBudget(window_s=600.0, max_share=0.05, floor_units=8.0)
    assert not c.allows(24, 160, 0.0)  # three 8-GPU nodes, limit 8
    assert c.allows(24, 160, 0.0, whole=True)  # a gang's nodes: together or not at all
    c.record(24, 0.0)
    assert not c.allows(8, 160, 1.0, whole=True)  # the window is spent
    assert not c.allows(24, 160, 599.0, whole=True)
    assert c.allows(24, 160, 600.0, whole=True)
    c.record(4, 600.0)
    assert not c.allows(24, 160, 601.0, whole=True)  # only into an empty window
    assert c.allows(4, 160, 601.0, whole=True)  # within the limit as before


@pytest.mark.parametrize(
    ("last_s", "now_s", "dwell_s", "budget_s", "blocked_by"),
    [
        pytest.param(None, 0.0, 3600.0, 3600.0, None, id="never-resized"),
        pytest.param(0.0, 1800.0, 3600.0, 0.0, "dwell", id="inside-dwell"),
        pytest.param(0.0, 1800.0, 600.0, 3600.0, "budget", id="dwell-done-budget-not"),
        pytest.param(0.0, 3600.0, 600.0, 3600.0, None, id="both-done"),
    ],
)
def test_resize_block_reason(
    last_s: float | None, now_s: float, dwell_s: float, budget_s: float, blocked_by: str | None
) -> None:
    why = resize_block_reason(last_s, now_s, dwell_s, budget_s)
    if blocked_by is None:
        assert why is None
    else:
        assert why is not None
        assert ("dwell" in why) == (blocked_by == "dwell")
        assert ("budget" in why) == (blocked_by == "budget")


# --- the dollar ledger ------------------------------------------------------------


def test_ledger_refuses_a_commitment_beyond_the_cap_whole() -> None:
    led = BreakGlassLedger(100.0)
    assert led.try_commit("a", 60.0)
    assert not led.try_commit("b", 41.0)  # refused, not trimmed
    assert led.committed_usd == 60.0
    assert led.try_commit("b", 40.0)
    assert led.remaining_usd == 0.0


def test_settling_charges_what_was_spent_and_releases_the_rest() -> None:
    led = BreakGlassLedger(100.0)
    led.try_commit("a", 80.0)
    assert led.settle("a", 30.0) == 50.0
    assert led.committed_usd == 30.0
    assert led.try_commit("b", 70.0)
    assert not led.try_commit("c", 0.01)


def test_no_cap_is_unbounded_and_zero_disables() -> None:
    assert BreakGlassLedger(None).try_commit("a", 1e9)
    assert math.isinf(BreakGlassLedger(None).remaining_usd)
    zero = BreakGlassLedger(0.0)
    assert zero.try_commit("a", 0.0)
    assert not zero.try_commit("b", 0.01)


@settings(deadline=None, max_examples=100)
@given(
    cap=st.floats(min_value=0.0, max_value=1e4),
    ops=st.lists(
        st.tuples(
            st.sampled_from(["commit", "settle"]),
            st.integers(0, 5),
            st.floats(min_value=0.0, max_value=5e3),
        ),
        max_size=60,
    ),
)
def test_ledger_never_exceeds_its_cap(cap: float, ops: list[tuple[str, int, float]]) -> None:
    led = BreakGlassLedger(cap)
    for op, key, usd in ops:
        if op == "commit":
            led.try_commit(str(key), usd)
        else:
            # Spend at most what was committed (the book settles so).
            led.settle(str(key), min(usd, led.open_usd(str(key))))
        assert led.committed_usd <= cap + 1e-6


# --- return-to-spot hysteresis ------------------------------------------------------


def _verdict(**kw: float) -> bool:
    args = {
        "held_s": 3600.0,
        "min_dwell_s": 1800.0,
        "on_demand_usd_per_hour": 32.77,
        "spot_usd_per_hour": 10.0,
        "spot_hazard_per_hour": 0.1,  # expected 10 h on spot
        "switching_cost_usd": 100.0,
        "max_lifetime_hours": 168.0,
    }
    args.update(kw)
    return return_to_spot_verdict(**args).go


def test_no_return_before_the_dwell_however_large_the_saving() -> None:
    assert not _verdict(held_s=1799.0, spot_usd_per_hour=0.0)
    assert _verdict(held_s=1800.0)


def test_return_only_when_savings_over_the_expected_lifetime_beat_switching() -> None:
    # saving 22.77 $/h x 10 h = $227.7
    assert _verdict(switching_cost_usd=227.0)
    assert not _verdict(switching_cost_usd=228.0)
    # a jumpier pool (one interruption every 4 h): $91 no longer pays for $100
    assert not _verdict(spot_hazard_per_hour=0.25)


def test_a_pool_that_never_revokes_is_credited_the_lifetime_cap() -> None:
    v = return_to_spot_verdict(
        held_s=1e9,
        min_dwell_s=0.0,
        on_demand_usd_per_hour=2.0,
        spot_usd_per_hour=1.0,
        spot_hazard_per_hour=0.0,
        switching_cost_usd=100.0,
        max_lifetime_hours=168.0,
    )
    assert v.expected_lifetime_hours == 168.0
    assert v.go  # $168 > $100


# --- rebalance precision ------------------------------------------------------------


def test_rebalance_precision_counts_only_resolved_recommendations() -> None:
    r = RebalancePrecision(window_s=600.0, min_samples=3, min_precision=0.6)
    r.record_rebalance("i-1", "p", 0.0)
    r.record_rebalance("i-2", "p", 0.0)
    r.record_rebalance("i-3", "p", 0.0)
    assert r.counts("p") == (0, 0)
    r.record_interruption("i-1", 100.0)  # hit
    r.record_interruption("i-2", 700.0)  # too late: a miss
    assert r.counts("p") == (1, 2)
    r.expire(601.0)  # i-3's window passed without an interruption
    assert r.counts("p") == (1, 3)
    assert r.precision("p") == pytest.approx(1 / 3)
    assert not r.predictive("p")


def test_rebalance_is_predictive_with_enough_samples_and_precision() -> None:
    r = RebalancePrecision(window_s=600.0, min_samples=10, min_precision=0.5)
    r.seed("p", hits=4, resolved=9)
    assert not r.predictive("p")  # 9 samples < 10
    r.record_rebalance("i-1", "p", 0.0)
    r.record_interruption("i-1", 60.0)
    assert r.counts("p") == (5, 10)
    assert r.predictive("p")
    assert not r.predictive("q")


@pytest.mark.parametrize(
    "bad",
    [
        {"open_after": True},  # a boolean is not a count
        {"open_after": 0},
        {"window_s": math.inf},
        {"cooldown_s": math.nan},
        {"max_cooldown_s": 1e30},
        {"memory_s": -1.0},
    ],
)
def test_breaker_settings_are_finite_bounded_numbers(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError, match=r"finite|whole"):
        BreakerSettings.model_validate(bad)
