"""Committed capacity: break-even occupancy, the quantile rule, level comparisons."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.reservations import (
    breakeven_occupancy,
    commitment_cost,
    committed_count,
    compare_commitment_levels,
    marginal_occupancy,
)


def _brute_force_cost(demand: list[int], k: int, p_r: float, p_alt: float) -> float:
    return k * len(demand) * p_r + p_alt * sum(max(d - k, 0) for d in demand)


def test_breakeven_occupancy_is_the_price_ratio() -> None:
    assert breakeven_occupancy(1.2, 2.0) == pytest.approx(0.6)
    with pytest.raises(ValueError):
        breakeven_occupancy(1.0, 0.0)
    with pytest.raises(ValueError):
        breakeven_occupancy(float("nan"), 1.0)


def test_forty_percent_discount_commits_the_40th_percentile() -> None:
    # demand 1..100 once each; p_R = 0.6 p_OD. Unit 40 is busy in 61 hours of 100
    # (> 60 %: pays); unit 41 in exactly 60 (a tie: not committed).
    demand = list(range(1, 101))
    p_od = 2.0
    assert committed_count(demand, (1 - 0.4) * p_od, p_od) == 40
    # shuffled order changes nothing
    rng = np.random.default_rng(7)
    assert committed_count(rng.permutation(demand), 1.2, 2.0) == 40


def test_quantile_rule_agrees_with_numpy_inverted_cdf() -> None:
    rng = np.random.default_rng(11)
    # 721 hours: d * n is never a whole number here, so numpy's float arithmetic
    # meets no exact tie (ties are covered by the 1..100 test and the brute force).
    demand = rng.integers(0, 300, size=24 * 30 + 1)
    for discount in (0.1, 0.25, 0.4, 0.55, 0.72):
        k = committed_count(demand, 1.0 - discount, 1.0)
        assert k == int(np.quantile(demand, discount, method="inverted_cdf"))


def test_no_commitment_when_it_never_pays() -> None:
    assert committed_count([5, 5, 5], 2.0, 2.0) == 0  # always busy, but only a tie
    assert committed_count([5, 5, 5], 1.99, 2.0) == 5
    assert committed_count([0, 0, 0], 0.1, 2.0) == 0


def test_fractional_demand_is_rounded_up_to_whole_units() -> None:
    assert committed_count([2.2, 2.2, 2.2], 1.0, 2.0) == 3
    # float noise is not a whole extra unit
    assert committed_count([3.0000000000001] * 3, 1.0, 2.0) == 3


def test_commitment_cost_by_hand() -> None:
    c = commitment_cost([1, 3, 5, 3], 3, 1.0, 2.0)
    assert c.committed_usd == 12.0  # 3 units x 4 hours x $1
    assert c.alternative_unit_hours == 2.0  # only hour 3 exceeds, by 2
    assert c.alternative_usd == 4.0
    assert c.total_usd == 16.0
    assert c.occupancy == pytest.approx((1 + 3 + 3 + 3) / 12)
    assert commitment_cost([1, 2], 0, 1.0, 2.0).occupancy is None


def test_raise_from_40_to_60_percent_of_peak() -> None:
    # a steady base of 60 most of the day plus a peak of 100 in 6 hours:
    # units 41..60 are busy 100 % of the time, far above 0.6 -> raising pays.
    demand = [60] * 18 + [100] * 6
    cmp = compare_commitment_levels(demand, [40, 60], 1.2, 2.0)
    assert cmp.breakeven_occupancy == pytest.approx(0.6)
    assert cmp.peak_units == 100
    low, high = cmp.levels
    assert low.total_usd == pytest.approx(_brute_force_cost(demand, 40, 1.2, 2.0))
    assert high.total_usd == pytest.approx(_brute_force_cost(demand, 60, 1.2, 2.0))
    (step,) = cmp.steps
    assert step.marginal_occupancy == pytest.approx(1.0)
    assert step.pays and step.delta_usd == pytest.approx(high.total_usd - low.total_usd)
    # the optimum: units 61..100 are busy 25 % < 60 %: stop at 60
    assert cmp.optimal.committed_units == 60


def test_marginal_occupancy_decides_the_step() -> None:
    demand = [10, 20, 30, 40]
    # units 11..30: busy 0 + 10 + 20 + 20 = 50 unit-hours of 80
    assert marginal_occupancy(demand, 10, 30) == pytest.approx(50 / 80)
    assert marginal_occupancy(demand, 30, 10) == pytest.approx(50 / 80)
    cmp = compare_commitment_levels(demand, [10, 30], 0.7, 1.0)
    assert cmp.steps[0].pays is (50 / 80 > 0.7)
    with pytest.raises(ValueError):
        marginal_occupancy(demand, 10, 10)


@pytest.mark.parametrize(
    "demand", [pytest.param([], id="empty"), [1, -1], [1.0, float("nan")], [[1, 2]]]
)
def test_bad_demand_is_rejected(demand: list[float]) -> None:
    with pytest.raises(ValueError, match="hourly_demand"):
        committed_count(demand, 1.0, 2.0)


@settings(deadline=None, max_examples=80)
@given(
    st.lists(st.integers(min_value=0, max_value=40), min_size=1, max_size=60),
    st.integers(min_value=0, max_value=120),
)
def test_committed_count_is_the_smallest_cost_minimiser(demand: list[int], p_r: int) -> None:
    # integer prices keep the brute-force costs exact, so ties are real ties
    p_alt = 100
    costs = [_brute_force_cost(demand, k, p_r, p_alt) for k in range(max(demand) + 2)]
    best = min(costs)
    assert committed_count(demand, float(p_r), float(p_alt)) == costs.index(best)
