"""Stress that stresses: the interruption and availability multipliers reach
the billed market (every scenario's bill), not only the plan, and the
what-if keeps the x1 market beside the stressed one."""

from __future__ import annotations

import math

import pytest

from broker.planning.optimizer.problem import PlanOptions
from broker.whatif.run import run_whatif
from broker.whatif.stress import X1, MarketStress, stressed
from markets.protocols import HistorySource
from policies.workloads.spec import WorkloadSet, parse_workloads
from tests.fakes.tiny_market import T0, TinyMarket, pool_key

A, B = pool_key("a"), pool_key("b")


def _workloads() -> WorkloadSet:
    return parse_workloads(
        {
            "workloads": [
                {
                    "name": "api",
                    "class": "serving",
                    "instance_types": ["p3.2xlarge"],
                    "max_spot_share": 0.5,
                    "demand": {"base_units": 4, "peak_units": 8},
                }
            ]
        }
    )


def test_the_stressed_frame_loses_the_added_revocations_and_the_availability() -> None:
    market = TinyMarket(share={A: 0.8})  # hazard 0.01 per hour held, every pool
    view = stressed(market, MarketStress(interruption_multiplier=5.0, availability_multiplier=0.6))
    assert isinstance(view, HistorySource)
    frame = view.hourly(T0, 3).set_index(["hour", "pool_key"])["spot_available"]
    hour = frame.index.get_level_values(0)[0]
    assert frame[(hour, A)] == pytest.approx(0.6 * 0.8 * math.exp(-4 * 0.01))
    assert frame[(hour, B)] == pytest.approx(0.6 * 1.0 * math.exp(-4 * 0.01))
    snap = view.snapshot(T0).by_key()
    assert snap[A].hazard.rate_per_hour == pytest.approx(0.05)
    assert snap[A].available_share == pytest.approx(0.48)
    assert snap[B].placement_score == 5  # 9 x 0.6, rounded
    assert stressed(market, X1) is market


def test_a_stress_changes_every_spot_scenarios_bill_and_keeps_x1_beside_it() -> None:
    # x40 on a 0.01/h hazard: each hour keeps exp(-0.39) = 68 % of its spot.
    ws = _workloads()
    x1 = run_whatif(TinyMarket(), ws, days=1)
    hot = run_whatif(TinyMarket(), ws, days=1, options=PlanOptions(interruption_multiplier=40))
    assert x1.unstressed is None and hot.unstressed is not None
    assert hot.stress == MarketStress(interruption_multiplier=40.0)
    for s in x1.scenarios:  # the x1 side is the plain what-if
        assert hot.unstressed.scenario(s.name).bill.total_usd == pytest.approx(s.bill.total_usd)
    # The static mix must not bill identically at x1 and under stress.
    calm, storm = x1.scenario("static_mix").bill, hot.scenario("static_mix").bill
    assert storm.total_usd > calm.total_usd
    assert storm.spot_instance_hours < calm.spot_instance_hours
    assert storm.expected_revocations > calm.expected_revocations
    # on-demand never held spot: the stress leaves it alone
    assert hot.scenario("on_demand").bill.total_usd == pytest.approx(
        x1.scenario("on_demand").bill.total_usd
    )


def test_less_availability_is_less_spot_held_in_the_bill() -> None:
    ws = _workloads()
    x1 = run_whatif(TinyMarket(), ws, days=1)
    half = run_whatif(TinyMarket(), ws, days=1, availability_multiplier=0.5)
    calm, thin = x1.scenario("static_mix").bill, half.scenario("static_mix").bill
    assert thin.spot_instance_hours < calm.spot_instance_hours
    assert thin.total_usd > calm.total_usd
