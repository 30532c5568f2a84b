"""Break-even solvers, cross-checked against the forward cost model.

Each closed form is checked the honest way: plug the solution back into
``effective_cost`` and see spot cost exactly what on-demand costs.
"""

from __future__ import annotations

import contextlib
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from markets.errors import SpotNeverFinishesError
from policies.breakeven import (
    bisect_increasing,
    breakeven_checkpoint_window,
    breakeven_interruption_rate,
    breakeven_spot_price,
    price_ratio,
)
from policies.effective_cost import RateConvention, RateUnit, SpotRun, effective_cost


def _run(**kw: object) -> SpotRun:
    base: dict[str, object] = {
        "units": 4,
        "productive_hours": 50.0,
        "on_demand_usd_per_unit_hour": 2.0,
        "spot_usd_per_unit_hour": 0.7,
        "restart_hours": 0.5,
    }
    base.update(kw)
    return SpotRun.model_validate(base)


def _eff(run: SpotRun) -> float:
    return effective_cost(run).effective_usd_per_unit_hour


@pytest.mark.parametrize("conv", list(RateConvention))
def test_breakeven_spot_price_makes_spot_equal_on_demand(conv: RateConvention) -> None:
    run = _run(convention=conv, interruptions=0.1, checkpoint_overhead=0.05)
    price = breakeven_spot_price(run)
    at = run.model_copy(update={"spot_usd_per_unit_hour": price})
    assert _eff(at) == pytest.approx(2.0, rel=1e-12)
    assert _eff(run.model_copy(update={"spot_usd_per_unit_hour": price * 0.99})) < 2.0


@pytest.mark.parametrize("conv", list(RateConvention))
def test_breakeven_rate_makes_spot_equal_on_demand(conv: RateConvention) -> None:
    run = _run(convention=conv, interruptions=0.1, checkpoint_overhead=0.05)
    rate = breakeven_interruption_rate(run)
    assert rate.convention is conv
    at = run.model_copy(update={"interruptions": rate.interruptions_per_hour})
    assert _eff(at) == pytest.approx(2.0, rel=1e-12)
    assert rate.interruptions_per_day == pytest.approx(24 * rate.interruptions_per_hour)


def test_breakeven_rate_is_convention_specific() -> None:
    prod = breakeven_interruption_rate(_run(convention="productive", lost_work_hours=0.25))
    wall = breakeven_interruption_rate(_run(convention="wall", lost_work_hours=0.25))
    # k = 2/0.7; productive: (k - 1) / 0.75; wall: (1 - 1/k) / 0.75
    k = 2 / 0.7
    assert prod.interruptions_per_hour == pytest.approx((k - 1) / 0.75)
    assert wall.interruptions_per_hour == pytest.approx((1 - 1 / k) / 0.75)


def test_breakeven_rate_edges() -> None:
    # the overhead alone eats the discount: no rate pays
    assert breakeven_interruption_rate(_run(checkpoint_overhead=2.0)).interruptions_per_hour == 0
    # interruptions cost nothing: any rate pays
    free = breakeven_interruption_rate(_run(restart_hours=0.0))
    assert math.isinf(free.interruptions_per_hour)
    assert free.mean_minutes_between == 0.0
    # free spot in the wall convention: pays while it finishes, i.e. rate < 1 / (R + L)
    gift = breakeven_interruption_rate(_run(spot_usd_per_unit_hour=0.0))
    assert gift.interruptions_per_hour == pytest.approx(2.0)


@pytest.mark.parametrize("conv", list(RateConvention))
def test_breakeven_rate_with_daly_interval_is_found_by_bisection(conv: RateConvention) -> None:
    # tau follows the rate (Daly): no closed form; the bisection answer must still
    # put spot exactly at on-demand.
    run = _run(convention=conv, checkpoint_write_hours=0.05, interruptions=0.1)
    rate = breakeven_interruption_rate(run)
    at = run.model_copy(update={"interruptions": rate.interruptions_per_hour, "per": RateUnit.HOUR})
    assert _eff(at) == pytest.approx(2.0, rel=1e-9)
    a_bit_more = at.model_copy(update={"interruptions": rate.interruptions_per_hour * 1.01})
    with contextlib.suppress(SpotNeverFinishesError):  # never finishing is also "loses"
        assert _eff(a_bit_more) > 2.0


@pytest.mark.parametrize("conv", list(RateConvention))
def test_checkpoint_window_edges_put_spot_at_on_demand(conv: RateConvention) -> None:
    run = _run(convention=conv, checkpoint_write_hours=0.02, interruptions=0.1)
    window = breakeven_checkpoint_window(run)
    assert window is not None
    for tau in (window.min_interval_hours, window.max_interval_hours):
        at = run.model_copy(update={"checkpoint_interval_hours": tau})
        assert _eff(at) == pytest.approx(2.0, rel=1e-9)
    mid = math.sqrt(window.min_interval_hours * window.max_interval_hours)
    assert window.pays(mid)
    assert _eff(run.model_copy(update={"checkpoint_interval_hours": mid})) < 2.0
    assert window.min_interval_s == pytest.approx(window.min_interval_hours * 3600)


def test_checkpoint_window_without_growing_lost_work_has_no_upper_edge() -> None:
    run = _run(
        checkpoint_write_hours=0.02,
        interruptions=0.1,
        notice_seconds=120,
        notice_checkpoint_write_seconds=60,
    )
    window = breakeven_checkpoint_window(run)
    assert window is not None
    assert math.isinf(window.max_interval_hours)
    at = run.model_copy(update={"checkpoint_interval_hours": window.min_interval_hours})
    assert _eff(at) == pytest.approx(2.0, rel=1e-9)


def test_checkpoint_window_none_when_no_interval_pays() -> None:
    # restarts alone nearly exhaust the discount: no interval leaves room for writes
    run = _run(checkpoint_write_hours=0.5, interruptions=1.0, restart_hours=0.6)
    assert breakeven_checkpoint_window(run) is None
    with pytest.raises(ValueError, match="checkpoint_write_hours"):
        breakeven_checkpoint_window(_run(checkpoint_overhead=0.05))


def test_checkpoint_window_for_free_spot() -> None:
    run = _run(spot_usd_per_unit_hour=0.0, checkpoint_write_hours=0.1, interruptions=0.5)
    window = breakeven_checkpoint_window(run)
    assert window is not None
    # wall: finishes iff 0.5 * (0.5 + tau / 2) < 1, i.e. tau < 3
    assert window.max_interval_hours == pytest.approx(3.0)
    assert price_ratio(run) == math.inf


def test_bisection_finds_a_known_root_and_refuses_an_unbracketed_one() -> None:
    assert bisect_increasing(lambda x: x * x - 2.0, 0.0, 2.0) == pytest.approx(math.sqrt(2))
    with pytest.raises(ValueError, match="bracketed"):
        bisect_increasing(lambda x: x + 1.0, 0.0, 1.0)


@settings(deadline=None, max_examples=60)
@given(
    st.sampled_from(list(RateConvention)),
    st.floats(min_value=0.0, max_value=0.3),
    st.floats(min_value=0.0, max_value=0.2),
    st.floats(min_value=0.05, max_value=1.9),
)
def test_breakeven_price_round_trips(
    conv: RateConvention, rate: float, overhead: float, spot: float
) -> None:
    run = _run(
        convention=conv,
        interruptions=rate,
        checkpoint_overhead=overhead,
        spot_usd_per_unit_hour=spot,
    )
    price = breakeven_spot_price(run)
    assert 0 < price <= 2.0
    # spot pays iff its price is below the break-even price
    assert effective_cost(run).spot_worth_it == (spot < price)
