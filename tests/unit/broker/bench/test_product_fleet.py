"""The fleet bench's ``spotfolio`` entry: the daemon's plan and lifecycle
manager behind the fleet engine's rule protocol.

A hand-made hour: ticks of 300 s, cold start 180 s, AWS notice 120 s, N = 2,
spot at $1/3 per hour. Both zones held spot all week before; zone A loses it
in ticks 6-8, zone B never does. Under a spread contract (zone share 0.5)
the plan spreads the replicas evenly over the zones (it holds more than N:
the fast path sizes spot by its hazard factor and reconcile rounds each
serving pool up); A's notice comes
120 s before tick 6, and the manager replaces each of A's replicas in B (A's
pool breaker is open; B is over its zone share, the best pool left), ready
60 s after the loss. The window is an hour: no second plan.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from broker.bench.fleet import POLICIES, decided_by
from broker.bench.product.fleet import DECIDED_BY, FleetRun, ProductFleet, fleet_workloads
from broker.daemon.plan_job import spot_returned
from broker.planning.optimizer.fast import fast_plan
from broker.planning.optimizer.problem import build_problem
from broker.simulate.fleet import FleetSetting, FleetWindow, fleet_spec, simulate_fleet
from policies.online.fleet import FleetPlan, FleetSpec, FleetView
from policies.online.registry import fleet_policy

SETTING = FleetSetting(replicas=2, cold_start_s=180, notice_s=120, price_ratio=3.0)
TICKS = 12
HELD = np.ones((2, TICKS), dtype=bool)
HELD[0, 6:9] = False
PAST = np.ones((2, 2016), dtype=bool)  # a week of 300 s ticks, spot all the time


def _window(held: np.ndarray = HELD) -> FleetWindow:
    return FleetWindow(
        group="aws/replica/test",
        zones=("us-west-2a", "us-west-2b"),
        tick_s=300,
        held=held,
        past=PAST,
        notice_s=120,
        provider="aws",
    )


class _Recording(ProductFleet):
    """The adapter, remembering each plan it handed the engine."""

    def __init__(self, **contract: float) -> None:
        super().__init__(**contract)  # type: ignore[arg-type]
        self.plans: list[tuple[float, bool, FleetPlan]] = []

    def decide(
        self, spec: FleetSpec, view: FleetView, memory: FleetRun
    ) -> tuple[FleetPlan, FleetRun]:
        plan, run = super().decide(spec, view, memory)
        self.plans.append((view.elapsed_hours * 3600.0, view.at_notice, plan))
        return plan, run


def test_a_revocation_moves_the_replica_to_the_other_zone_through_handle() -> None:
    rule = _Recording(max_zone_share=0.5, max_pool_share=0.5)  # a spread contract
    out = simulate_fleet(SETTING, _window(), rule)
    first = rule.plans[0][2]
    a, b = first.spot
    assert a == b >= SETTING.replicas / 2 and first.on_demand == 0  # spread, all spot
    notice = [(t, p) for t, at_notice, p in rule.plans if at_notice]
    assert [t for t, _ in notice] == [6 * 300 - 120]
    # at the notice A's replicas still serve and their replacements start in B
    assert notice[0][1] == FleetPlan((a, a + b), 0)
    after = [p for t, at_notice, p in rule.plans if t >= 6 * 300 and not at_notice]
    assert after and all(p == FleetPlan((0, a + b), 0) for p in after)
    assert out.revocations == a and out.launches == 2 * a + b
    assert out.on_demand_hours == 0.0
    # from the loss (1800 s) until the replacements are ready (1680 + 180 =
    # 1860 s) only B's replicas serve: 60 s short of N unless they are N
    short = 0.0 if b >= SETTING.replicas else 60.0
    assert out.hours * 3600 - out.available_hours * 3600 == pytest.approx(short, abs=1e-6)


def test_the_fleet_bench_names_the_daemon_code_for_spotfolio() -> None:
    assert isinstance(fleet_policy("spotfolio"), ProductFleet)
    assert decided_by("spotfolio") == DECIDED_BY == "broker.lifecycle.manager:LifecycleManager"
    assert decided_by("spothedge") == "policies.online.fleet:SpotHedge"
    assert decided_by("omniscient") == "broker.simulate.omniscient:omniscient_fleet"
    assert "spotfolio" in POLICIES


def test_both_zones_lost_break_glass_then_back_to_spot() -> None:
    # both zones lose spot in ticks 6-8: the notices find no spot pool left
    # (A's replacements went to B, noticed too), so the manager breaks glass;
    # spot is back from tick 9, and by the end the fleet is all spot again
    held = np.ones((2, 18), dtype=bool)
    held[:, 6:9] = False
    window = _window(held)
    rule = _Recording()
    out = simulate_fleet(SETTING, window, rule)
    outage = [p for t, at_notice, p in rule.plans if 6 * 300 <= t < 9 * 300 and not at_notice]
    assert outage and all(p.spot == (0, 0) and p.on_demand >= SETTING.replicas for p in outage)
    last = rule.plans[-1][2]
    assert last.on_demand == 0 and sum(last.spot) >= SETTING.replicas
    assert out.on_demand_hours > 0.0 and out.revocations > 0


def test_the_bench_contract_puts_spot_where_it_is_cheapest_in_one_zone() -> None:
    # the SkyServe setting: no zone cap, so no on-demand while one zone has spot
    rule = _Recording()
    simulate_fleet(SETTING, _window(), rule)
    first = rule.plans[0][2]
    assert first.on_demand == 0 and sorted(first.spot)[0] == 0
    assert sum(first.spot) >= SETTING.replicas


def test_going_back_to_spot_keeps_on_demand_until_the_spot_is_ready() -> None:
    # both zones out in ticks 6-8: break-glass on-demand; spot is back from
    # tick 9 and the return launches it while the on-demand still serves
    # (make before break), so the only shortfall is the loss itself: from
    # the revocation (1800 s) to the on-demand launched at the notice being
    # ready (1680 + 180 = 1860 s), N replicas short
    held = np.ones((2, 24), dtype=bool)
    held[:, 6:9] = False
    window = _window(held)
    rule = _Recording()
    out = simulate_fleet(SETTING, window, rule)
    back = [p for t, at_notice, p in rule.plans if t >= 9 * 300 and not at_notice]
    # on-demand and spot side by side at some tick after the outage, and all
    # spot by the end
    assert any(p.on_demand > 0 and sum(p.spot) > 0 for p in back)
    assert back[-1].on_demand == 0 and sum(back[-1].spot) >= SETTING.replicas
    short_s = out.hours * 3600 - out.available_hours * 3600
    assert short_s == pytest.approx(60.0, abs=1e-6)


def test_a_plan_made_without_spot_is_remade_when_spot_comes_back() -> None:
    # both zones out for the window's first two ticks: the first plan (the
    # daemon's start) can only put the replicas on on-demand, and no stretch
    # is open (no notice made it). Spot is back at tick 2: the market refresh
    # that shows it replans (broker.daemon.plan_job.spot_returned), and the fleet
    # is on spot from then on, not from the next hourly plan (tick 12).
    held = np.ones((2, 18), dtype=bool)
    held[:, :2] = False
    rule = _Recording()
    out = simulate_fleet(SETTING, _window(held), rule)
    first = rule.plans[0][2]
    assert first.spot == (0, 0) and first.on_demand >= SETTING.replicas
    at = {t: p for t, at_notice, p in rule.plans if not at_notice}
    assert sum(at[2 * 300].spot) >= SETTING.replicas  # launched at once
    assert at[2 * 300].on_demand >= SETTING.replicas  # make before break
    assert all(p.on_demand == 0 for t, p in at.items() if t >= 3 * 300)
    # on-demand: the two ticks without spot and the tick the spot warms up in
    assert out.on_demand_hours == pytest.approx(SETTING.replicas * 3 * 300 / 3600 - 2 * 180 / 3600)
    assert out.available_hours == pytest.approx(out.hours)


def test_spot_back_replans_only_a_plan_that_holds_on_demand() -> None:
    rule = ProductFleet()
    run = rule.start(fleet_spec(SETTING, _window()))
    now = datetime(2026, 1, 1, tzinfo=UTC)
    run.avail = (False, True)
    before = rule._market(run, 0.0)  # zone A out, B in
    run.avail = (True, True)
    after = rule._market(run, 300.0)
    ws = fleet_workloads(SETTING.replicas)
    demand = {"fleet": np.full(1, float(SETTING.replicas))}
    spot_plan = fast_plan(build_problem(after, ws, demand, hours=1))
    assert spot_returned(before, after, spot_plan, now, ws) == ()
    no_spot = {p.pool.key: np.zeros(1) for p in after.pools}
    od_plan = fast_plan(build_problem(after, ws, demand, hours=1, spot_capacity_instances=no_spot))
    assert spot_returned(before, after, od_plan, now, ws) == (after.pools[0].pool.key,)
    assert spot_returned(after, after, od_plan, now, ws) == ()
    assert spot_returned(None, after, od_plan, now, ws) == ()
