"""Effective cost of spot: the model, its validation and its monotonicity.

The worked examples of docs/concepts/effective-cost.md live in
tests/unit/policies/test_golden_economics.py.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from markets.errors import SpotNeverFinishesError
from policies.checkpoint import NOTICE_SECONDS, daly_interval
from policies.effective_cost import (
    RateConvention,
    RateUnit,
    SpotRun,
    effective_cost,
    spot_time_factor,
    time_factor,
)


def _run(**kw: Any) -> SpotRun:
    base: dict[str, Any] = {
        "units": 8,
        "productive_hours": 100.0,
        "on_demand_usd_per_unit_hour": 3.0,
        "spot_usd_per_unit_hour": 1.0,
    }
    base.update(kw)
    return SpotRun(**base)


def test_nothing_interrupts_nothing_checkpointed_costs_the_spot_price() -> None:
    b = effective_cost(_run())
    assert b.effective_usd_per_unit_hour == 1.0
    assert b.total_hours == b.base_hours == 100.0
    assert b.calendar_stretch == 0.0
    assert b.spot_total_usd == 8 * 100 * 1.0
    assert b.saving_usd == 8 * 100 * 2.0
    assert b.spot_worth_it


def test_wall_convention_by_hand() -> None:
    # c = 0.1/1 = 0.1, L = tau/2 = 0.5, R = 0.5, lambda = 0.2/h:
    # T = 100 * 1.1 / (1 - 0.2 * 1.0) = 137.5
    b = effective_cost(
        _run(
            checkpoint_write_hours=0.1,
            checkpoint_interval_hours=1.0,
            interruptions=0.2,
            restart_hours=0.5,
        )
    )
    assert b.convention is RateConvention.WALL
    assert b.total_hours == pytest.approx(137.5)
    assert b.checkpoint_hours == pytest.approx(10.0)
    assert b.interruptions_expected == pytest.approx(0.2 * 137.5)
    assert b.lost_work_hours == pytest.approx(27.5 * 0.5)
    assert b.restart_hours == pytest.approx(27.5 * 0.5)
    parts = b.base_hours + b.checkpoint_hours + b.lost_work_hours + b.restart_hours
    assert parts == pytest.approx(b.total_hours)
    assert b.effective_usd_per_unit_hour == pytest.approx(1.375)


def test_per_day_is_per_24_hours() -> None:
    day = _run(interruptions=4.8, per=RateUnit.DAY, restart_hours=1.0)
    hour = _run(interruptions=0.2, per=RateUnit.HOUR, restart_hours=1.0)
    assert day.interruptions_per_hour == pytest.approx(0.2)
    assert effective_cost(day).total_hours == pytest.approx(effective_cost(hour).total_hours)


def test_wall_never_finishes_is_an_explained_error() -> None:
    run = _run(interruptions=2.0, restart_hours=0.5)  # 2/h x 0.5 h = 1
    with pytest.raises(SpotNeverFinishesError, match="never finishes"):
        effective_cost(run)
    # The productive convention has no such wall: the count is per productive hour.
    assert math.isfinite(
        effective_cost(run.model_copy(update={"convention": "productive"})).total_hours
    )


def test_hidden_premium_is_reported_not_hidden() -> None:
    b = effective_cost(_run(interruptions=0.5, restart_hours=1.5, convention="productive"))
    # factor 1 + 0.75 = 1.75 < 3: still pays; raise the restarts past on-demand
    assert b.spot_worth_it
    worse = effective_cost(_run(interruptions=0.5, restart_hours=5.0, convention="productive"))
    assert worse.effective_usd_per_unit_hour == pytest.approx(3.5)
    assert not worse.spot_worth_it
    assert worse.saving_usd < 0 and worse.saving_fraction < 0


def test_lost_work_defaults() -> None:
    # only c known: lost work is taken as included in the restart (example A)
    assert _run(checkpoint_overhead=0.05).resolved_lost_work_hours == 0.0
    # tau known: tau / 2
    run = _run(checkpoint_write_hours=0.1, checkpoint_interval_hours=2.0)
    assert run.resolved_lost_work_hours == 1.0
    # explicit wins over everything
    assert run.model_copy(update={"lost_work_hours": 0.3}).resolved_lost_work_hours == 0.3


def test_notice_checkpoint_removes_lost_work_only_when_it_fits() -> None:
    kw: dict[str, Any] = {
        "checkpoint_write_hours": 0.1,
        "checkpoint_interval_hours": 2.0,
        "interruptions": 0.1,
        "restart_hours": 0.2,
    }
    fits = _run(**kw, notice_seconds=NOTICE_SECONDS["aws"], notice_checkpoint_write_seconds=90)
    too_big = _run(**kw, notice_seconds=NOTICE_SECONDS["gcp"], notice_checkpoint_write_seconds=90)
    assert fits.resolved_lost_work_hours == 0.0
    assert too_big.resolved_lost_work_hours == 1.0  # falls back to tau / 2
    assert effective_cost(fits).total_hours < effective_cost(too_big).total_hours


def test_interval_defaults_to_daly_for_the_rate() -> None:
    run = _run(checkpoint_write_hours=0.05, interruptions=0.1)
    assert run.resolved_checkpoint_interval_hours == pytest.approx(daly_interval(0.05, 10.0))
    # and the breakdown equals the cheap optimizer factor
    b = effective_cost(run)
    assert b.total_hours / b.base_hours == pytest.approx(spot_time_factor(0.1, 0.0, 0.05))


def test_spot_time_factor_by_hand_and_notice() -> None:
    # tau given: (1 + 0.1/1) / (1 - 0.2 * (0.5 + 0.5)) = 1.375
    assert spot_time_factor(0.2, 0.5, 0.1, 1.0) == pytest.approx(1.375)
    # a 60 s notice checkpoint fits in AWS's 120 s: no lost work
    assert spot_time_factor(0.2, 0.5, 0.1, 1.0, 120, 60) == pytest.approx(1.1 / 0.9)
    # ... but not in GCP's 30 s
    assert spot_time_factor(0.2, 0.5, 0.1, 1.0, NOTICE_SECONDS["gcp"], 60) == pytest.approx(1.375)
    assert spot_time_factor(0.0, 5.0, 0.2) == 1.0
    with pytest.raises(SpotNeverFinishesError):
        spot_time_factor(1.0, 1.0, 0.0)
    with pytest.raises(ValueError):
        spot_time_factor(float("nan"), 1.0, 0.0)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("spot_usd_per_unit_hour", -0.1),
        ("spot_usd_per_unit_hour", float("nan")),
        ("on_demand_usd_per_unit_hour", 0.0),
        ("productive_hours", float("inf")),
        ("restart_hours", -1.0),
        ("interruptions", float("nan")),
        ("checkpoint_overhead", -0.01),
        ("units", 0),
    ],
)
def test_bad_values_are_rejected_naming_the_field(field: str, value: float) -> None:
    with pytest.raises(ValidationError) as info:
        _run(**{field: value})
    assert info.value.errors()[0]["loc"] == (field,)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"checkpoint_overhead": 0.05, "checkpoint_write_hours": 0.1}, "not both"),
        ({"checkpoint_interval_hours": 1.0}, "needs checkpoint_write_hours"),
        ({"notice_checkpoint_write_seconds": 10.0}, "needs notice_seconds"),
        ({"convention": "hazard"}, "wall"),
    ],
)
def test_inconsistent_descriptions_are_rejected(kw: dict[str, Any], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        _run(**kw)


def test_time_factor_conventions() -> None:
    assert time_factor(0.0, 0.5, 0.75, RateConvention.PRODUCTIVE) == pytest.approx(1.375)
    assert time_factor(0.0, 0.5, 0.75, RateConvention.WALL) == pytest.approx(1.6)


# -- properties --------------------------------------------------------------------

_rate = st.floats(min_value=0.0, max_value=0.4)
_hours = st.floats(min_value=0.0, max_value=1.0)
_conv = st.sampled_from(list(RateConvention))


def _cost(conv: RateConvention, rate: float, restart: float, write: float) -> float:
    run = _run(
        convention=conv,
        interruptions=rate,
        restart_hours=restart,
        checkpoint_write_hours=write,
        checkpoint_interval_hours=1.0,
    )
    return effective_cost(run).effective_usd_per_unit_hour


@settings(deadline=None, max_examples=80)
@given(_conv, _rate, _rate, _hours, _hours)
def test_cost_is_non_decreasing_in_the_interruption_rate(
    conv: RateConvention, r1: float, r2: float, restart: float, write: float
) -> None:
    lo, hi = sorted((r1, r2))
    assert _cost(conv, lo, restart, write) <= _cost(conv, hi, restart, write)


@settings(deadline=None, max_examples=80)
@given(_conv, _rate, _hours, _hours, _hours)
def test_cost_is_non_decreasing_in_restart_time(
    conv: RateConvention, rate: float, a: float, b: float, write: float
) -> None:
    lo, hi = sorted((a, b))
    assert _cost(conv, rate, lo, write) <= _cost(conv, rate, hi, write)


@settings(deadline=None, max_examples=80)
@given(_conv, _rate, _hours, _hours, _hours)
def test_cost_is_non_decreasing_in_write_time(
    conv: RateConvention, rate: float, restart: float, a: float, b: float
) -> None:
    lo, hi = sorted((a, b))
    assert _cost(conv, rate, restart, lo) <= _cost(conv, rate, restart, hi)


@settings(deadline=None, max_examples=60)
@given(_conv, st.floats(min_value=0.0, max_value=100.0), st.floats(min_value=0.1, max_value=1e4))
def test_cost_is_the_spot_price_without_interruptions_or_checkpoints(
    conv: RateConvention, spot: float, hours: float
) -> None:
    run = _run(convention=conv, spot_usd_per_unit_hour=spot, productive_hours=hours)
    b = effective_cost(run)
    assert b.effective_usd_per_unit_hour == spot
    assert b.total_hours == hours


@settings(deadline=None, max_examples=60)
@given(st.floats(min_value=0.0, max_value=5.0), st.floats(min_value=0.0, max_value=5.0))
def test_never_negative_or_infinite_silently(rate: float, restart: float) -> None:
    run = _run(interruptions=rate, restart_hours=restart, checkpoint_write_hours=0.05)
    try:
        b = effective_cost(run)
    except SpotNeverFinishesError:
        return
    for value in (b.total_hours, b.spot_total_usd, b.effective_usd_per_unit_hour):
        assert math.isfinite(value) and value >= 0
