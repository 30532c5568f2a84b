"""SpotHedge (policies.online.fleet) on hand-made fleet views: its zone lists,
where it places new spot replicas, and how much on-demand it holds.

Three zones, spot prices a $0.30, b $0.20, c $0.25 (cheapest first: b, c, a);
N = 2, N_EXTRA = 2: 4 spot replicas wanted.
"""

from __future__ import annotations

from policies.online.fleet import FleetSpec, FleetView, HedgeMemory, SpotHedge, ZoneView

SPEC = FleetSpec(
    replicas=2,
    zones=("a", "b", "c"),
    cold_start_hours=0.05,
    notice_hours=2 / 60,
    tick_hours=5 / 60,
    on_demand_usd_per_hour=1.0,
    spot_usd_per_hour=(0.30, 0.20, 0.25),
)


def _zone(
    available: bool = True, ready: int = 0, warming: int = 0, noticed: bool = False
) -> ZoneView:
    return ZoneView(available=available, noticed=noticed, spot_ready=ready, spot_warming=warming)


def _view(*zones: ZoneView, at_notice: bool = False) -> FleetView:
    return FleetView(0.0, zones, on_demand_ready=0, on_demand_warming=0, at_notice=at_notice)


def test_spothedge_places_new_replicas_in_cheapest_free_zones_then_cheapest_active() -> None:
    rule = SpotHedge()
    plan, mem = rule.decide(SPEC, _view(_zone(), _zone(), _zone()), rule.start(SPEC))
    # b, c, a each once (cheapest zone not in use), then b (cheapest active)
    assert plan.spot == (1, 2, 1)
    assert plan.on_demand == 2  # min(2, 0 + max(0, 4 - 0 - 0 ready))
    assert mem.active == (True, True, True)


def test_spothedge_preemption_moves_a_zone_to_preempted_and_refills_active_zones() -> None:
    rule = SpotHedge()
    mem = HedgeMemory(active=(True, True, True), placed=(1, 2, 1))
    # b lost spot and its 2 replicas with it: b preempted; a and c hold 1 each,
    # both in use, so the 2 replacements go to the cheapest active zone, c
    plan, mem = rule.decide(
        SPEC, _view(_zone(ready=1), _zone(available=False), _zone(ready=1)), mem
    )
    assert mem.active == (True, False, True)
    assert plan.spot == (1, 0, 3)
    assert plan.on_demand == 2  # min(2, 4 - 2 ready)


def test_spothedge_fewer_than_two_active_makes_all_active_and_a_launch_brings_a_zone_back() -> None:
    rule = SpotHedge()
    mem = HedgeMemory(active=(True, False, True), placed=(1, 0, 3))
    # notice on c: c preempted leaves only a active -> all active again. The 3
    # replacements: b is active and not in use (launch succeeds: b stays
    # active), then b twice more as the cheapest active; c's replicas serve
    # until taken and their ready one does not count for on-demand.
    view = _view(_zone(ready=1), _zone(), _zone(ready=1, warming=2, noticed=True), at_notice=True)
    plan, mem = rule.decide(SPEC, view, mem)
    assert mem.active == (True, True, True)
    assert plan.spot == (1, 3, 3)  # c: the 3 under notice, kept until revoked
    assert mem.placed == (1, 3, 0)
    assert plan.on_demand == 2  # min(2, 4 - 1 ready outside c)


def test_spothedge_a_refused_launch_preempts_the_zone_and_places_elsewhere() -> None:
    rule = SpotHedge()
    # b (cheapest) has no spot now: the launch fails there, b goes to the
    # preempted list, the four replicas go c, a, then c, c
    plan, mem = rule.decide(SPEC, _view(_zone(), _zone(available=False), _zone()), rule.start(SPEC))
    assert mem.active == (True, False, True)
    assert plan.spot == (1, 0, 3)


def test_spothedge_scales_on_demand_down_as_spot_becomes_ready() -> None:
    rule = SpotHedge()
    mem = HedgeMemory(active=(True, True, True), placed=(1, 2, 1))
    # the 4 spot replicas placed (a 1, b 2, c 1) turning ready one by one:
    # on-demand min(N, max(0, N + N_EXTRA - ready)) = 2, 2, 2, 1, 0
    ready_per_zone = [(0, 0, 0), (1, 0, 0), (1, 1, 0), (1, 2, 0), (1, 2, 1)]
    wanted = []
    for ready in ready_per_zone:
        zones = [_zone(ready=r, warming=h - r) for r, h in zip(ready, (1, 2, 1), strict=True)]
        plan, _ = rule.decide(SPEC, _view(*zones), mem)
        assert plan.spot == (1, 2, 1)  # held where they are
        wanted.append(plan.on_demand)
    assert wanted == [2, 2, 2, 1, 0]
