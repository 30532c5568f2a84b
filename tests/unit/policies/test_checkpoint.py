"""Checkpoint intervals (Young 1974, Daly 2006) and the notice-checkpoint rule."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.checkpoint import (
    NOTICE_SECONDS,
    daly_interval,
    mean_hours_between,
    notice_checkpoint_fits,
    productive_fraction,
    young_interval,
)


def test_young_interval_by_hand() -> None:
    # delta = 0.5 h, M = 100 h: sqrt(2 * 0.5 * 100) = 10 h
    assert young_interval(0.5, 100.0) == pytest.approx(10.0)


def test_daly_interval_by_hand() -> None:
    # delta = 0.5, M = 100: x^2 = delta/(2M) = 1/400, x = 1/20
    # 10 * (1 + 1/60 + 1/3600) - 0.5 = 10 + 1/6 + 1/360 - 0.5
    expected = 10.0 + 1.0 / 6.0 + 1.0 / 360.0 - 0.5
    assert daly_interval(0.5, 100.0) == pytest.approx(expected, rel=1e-12)


def test_daly_is_m_when_the_write_takes_twice_the_mtbi_or_more() -> None:
    assert daly_interval(2.0, 1.0) == 1.0
    assert daly_interval(5.0, 1.0) == 1.0
    # just below the threshold the formula applies and stays positive
    assert daly_interval(1.999, 1.0) > 0


def test_no_interruptions_means_never_checkpoint() -> None:
    assert math.isinf(young_interval(0.1, math.inf))
    assert math.isinf(daly_interval(0.1, math.inf))
    assert mean_hours_between(0.0) == math.inf
    assert mean_hours_between(0.25) == 4.0


@settings(deadline=None, max_examples=60)
@given(st.floats(min_value=1e-9, max_value=1e-4), st.floats(min_value=0.1, max_value=1e4))
def test_daly_tends_to_young_as_delta_over_m_vanishes(ratio: float, m: float) -> None:
    delta = ratio * m
    young = young_interval(delta, m)
    daly = daly_interval(delta, m)
    # Daly / Young = 1 - (2/3) x + x^2/9 with x = sqrt(delta / 2M): the gap is
    # below x, which itself vanishes as delta / M -> 0.
    x = math.sqrt(delta / (2 * m))
    assert abs(daly / young - 1.0) <= x
    assert x < 0.008


def test_daly_young_gap_shrinks_monotonically() -> None:
    gaps = [abs(daly_interval(r, 1.0) / young_interval(r, 1.0) - 1) for r in (1e-1, 1e-3, 1e-5)]
    assert gaps[0] > gaps[1] > gaps[2]
    assert gaps[2] < 0.003


def test_daly_optimum_beats_its_neighbours_in_the_exact_wall_model() -> None:
    # The exact wall-convention time factor (1 + delta/tau) / (1 - lam (R + tau/2))
    # should be (near-)minimal at Daly's interval.
    delta, lam, r = 0.05, 0.1, 0.2

    def factor(tau: float) -> float:
        return (1 + delta / tau) / (1 - lam * (r + tau / 2))

    tau = daly_interval(delta, 1 / lam)
    assert factor(tau) <= factor(tau * 0.8)
    assert factor(tau) <= factor(tau * 1.25)


def test_productive_fraction_by_hand() -> None:
    # 1 - 0.1/2 - 0.05 * (1 + 0.5) = 1 - 0.05 - 0.075
    assert productive_fraction(0.1, 2.0, 0.05, 0.5) == pytest.approx(0.875)


def test_productive_fraction_is_first_order_of_the_exact_fraction() -> None:
    delta, tau, lam, r = 0.01, 1.0, 0.001, 0.1
    exact = (1 - lam * (r + tau / 2)) / (1 + delta / tau)
    assert productive_fraction(delta, tau, lam, r) == pytest.approx(exact, abs=1e-3)


def test_productive_fraction_floors_at_zero() -> None:
    assert productive_fraction(1.0, 0.5, 1.0, 1.0) == 0.0
    assert productive_fraction(0.0, math.inf, 0.0, 0.0) == 1.0


def test_notice_windows_are_stated_once() -> None:
    assert NOTICE_SECONDS["aws"] == 120
    assert NOTICE_SECONDS["gcp"] == 30


def test_a_175b_checkpoint_does_not_fit_in_gcp_notice() -> None:
    # docs/concepts/notice-window.md: a 175B checkpoint takes 3-5 minutes.
    for minutes in (3, 4, 5):
        assert not notice_checkpoint_fits(minutes * 60, NOTICE_SECONDS["gcp"])
        assert not notice_checkpoint_fits(minutes * 60, NOTICE_SECONDS["aws"])
    assert notice_checkpoint_fits(20, NOTICE_SECONDS["gcp"])
    assert notice_checkpoint_fits(120, NOTICE_SECONDS["aws"])  # completes exactly at the end
    assert not notice_checkpoint_fits(115, NOTICE_SECONDS["aws"], margin_seconds=10)


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda: young_interval(-1.0, 10.0), id="negative-write"),
        pytest.param(lambda: daly_interval(float("nan"), 10.0), id="nan-write"),
        pytest.param(lambda: daly_interval(1.0, 0.0), id="zero-mtbi"),
        pytest.param(lambda: productive_fraction(0.1, 0.0, 0.1, 0.1), id="zero-interval"),
        pytest.param(lambda: notice_checkpoint_fits(-1.0, 30.0), id="negative-notice-write"),
        pytest.param(lambda: mean_hours_between(float("nan")), id="nan-rate"),
    ],
)
def test_nonsense_is_rejected(call: object) -> None:
    with pytest.raises(ValueError):
        call()  # type: ignore[operator]
