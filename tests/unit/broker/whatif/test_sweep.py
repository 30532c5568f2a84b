"""The committed sweep's verdict is its own totals': a level "pays" iff its
billed total is below the previous level's, and the break-even it prints is
against the spot/on-demand mix the workload would otherwise run."""

from __future__ import annotations

import itertools

import pytest

import broker.scale.pool as pool
from broker.whatif.run import run_whatif
from policies.workloads.spec import WorkloadSet, parse_workloads
from tests.fakes.tiny_market import TinyMarket, pool_key


def _workloads() -> WorkloadSet:
    return parse_workloads(
        {
            "workloads": [
                {
                    "name": "api",
                    "class": "serving",
                    "instance_types": ["p3.2xlarge"],
                    "max_spot_share": 0.5,
                    "demand": {"base_units": 2, "peak_units": 6},
                }
            ]
        }
    )


def test_each_level_says_pays_iff_its_total_falls() -> None:
    result = run_whatif(TinyMarket(), _workloads(), days=1, committed_levels=(0.2, 0.5, 1.0))
    points = result.sweep
    assert points[0].pays is None
    for before, after in itertools.pairwise(points):
        delta = after.scenario.bill.total_usd - before.scenario.bill.total_usd
        assert after.delta_usd == pytest.approx(delta)
        assert after.pays is (delta < 0)
    # The committed price over the whole term, and a verdict that is not
    # against on-demand alone: spot is cheaper, so the mix's break-even is higher.
    assert result.breakeven_occupancy is not None
    assert result.breakeven_occupancy_on_demand is not None
    assert result.breakeven_occupancy > result.breakeven_occupancy_on_demand
    for p in points:
        assert p.obligation_usd == pytest.approx(
            p.instances * p.scenario.plan.committed_usd_per_hour() / max(p.instances, 1) * 8760
        )


def test_the_levels_on_worker_processes_are_the_levels_solved_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The levels are independent plans of one problem: on two worker
    processes (``broker.scale.pool``) they are the same plans and bills."""
    levels = (0.2, 0.5, 1.0)
    here = run_whatif(TinyMarket(), _workloads(), days=1, committed_levels=levels, workers=1)
    monkeypatch.setattr(pool, "POOL_MIN_S", 0.0)  # a day's levels are too quick to pay for them
    apart = run_whatif(TinyMarket(), _workloads(), days=1, committed_levels=levels, workers=2)
    assert [p.instances for p in apart.sweep] == [p.instances for p in here.sweep]
    for a, b in zip(apart.sweep, here.sweep, strict=True):
        assert a.scenario.name == b.scenario.name
        assert a.scenario.bill.total_usd == b.scenario.bill.total_usd
        assert a.scenario.plan.objective_usd == b.scenario.plan.objective_usd
        assert a.delta_usd == b.delta_usd and a.obligation_usd == b.obligation_usd


def test_occupancy_counts_only_the_demand_that_can_use_the_commitment() -> None:
    """Two serving workloads of equal, flat demand on two types: the sweep
    commits to one type, which the other workload cannot use, so no level's
    added instances are busier than that type's own demand fills them (the
    whole fleet's demand would count them 100 % busy)."""
    market = TinyMarket(
        [pool_key("a"), pool_key("b"), pool_key("a", "g5.xlarge"), pool_key("b", "g5.xlarge")]
    )
    ws = parse_workloads(
        {
            "workloads": [
                {
                    "name": "api",
                    "class": "serving",
                    "instance_types": ["p3.2xlarge"],
                    "max_spot_share": 0.5,
                    "demand": {"base_units": 4, "peak_units": 4},
                },
                {
                    "name": "web",
                    "class": "serving",
                    "instance_types": ["g5.xlarge"],
                    "max_spot_share": 0.5,
                    "demand": {"base_units": 4, "peak_units": 4},
                },
            ]
        }
    )
    result = run_whatif(market, ws, days=1, committed_levels=(0.25, 0.5, 0.75, 1.0), workers=1)
    occ = [p.marginal_occupancy for p in result.sweep[1:] if p.marginal_occupancy is not None]
    assert occ
    # The group's own workload needs at most half the fleet's units: the
    # levels above half of the fleet's peak add instances nobody can fill.
    by_share = {p.share_of_peak: p.marginal_occupancy for p in result.sweep}
    assert by_share[1.0] is not None and by_share[1.0] < 0.5
