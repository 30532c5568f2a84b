"""Lost spot in the what-if goes through the lifecycle manager
(``broker.whatif.reaction``) and the bill prices what it bought
(``broker.whatif.billing.bill_reacted``).

A hand-made market: one serving workload on ``g1`` in two zones of one
region, spot $0.20 in zone a and $0.30 in zone b, on-demand $1.00, no
hazard. The plan holds four spot instances in zone a every hour and nothing
else; demand is exactly their work.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from broker.planning.plan import ALLOCATION_COLUMNS, Plan
from broker.whatif.billing import Bill, MarketActuals, bill_plan, bill_reacted, bill_reaction
from broker.whatif.reaction import DECIDED_BY, Reactor, react
from markets.model import (
    Hazard,
    HazardSource,
    InstanceType,
    MarketSnapshot,
    Pool,
    PoolSnapshot,
    Provider,
    Tier,
)
from policies.cost_table import CostTable
from policies.workloads.spec import WorkloadSet, parse_workloads

T0 = datetime(2026, 3, 2, tzinfo=UTC)
A = "aws/us-east-1/us-east-1a/g1"
B = "aws/us-east-1/us-east-1b/g1"
HOURS = 24
LOST = range(6, 12)  # the hours zone a cannot hold spot
N = 4  # spot instances the plan holds in zone a
SPOT_USD = {A: 0.2, B: 0.3}
OD_USD = 1.0


def _pool(zone: str, spot_usd: float) -> PoolSnapshot:
    inst = InstanceType(
        provider=Provider.AWS, name="g1", family="g", units=1, gpus=1, vcpus=4, memory_gib=16.0
    )
    return PoolSnapshot(
        pool=Pool(provider=Provider.AWS, region="us-east-1", zone=zone, instance_type="g1"),
        instance=inst,
        on_demand_usd_per_hour=OD_USD,
        spot_usd_per_hour=spot_usd,
        committed_1y_usd_per_hour=None,
        placement_score=None,
        hazard=Hazard(rate_per_hour=0.0, source=HazardSource.ASSUMED),
        available_share=None,
        observed_at=T0,
    )


def _snapshot() -> MarketSnapshot:
    pools = (_pool("us-east-1a", SPOT_USD[A]), _pool("us-east-1b", SPOT_USD[B]))
    return MarketSnapshot(at=T0, pools=pools, source="test")


def _workloads(cap_usd: float | None = None) -> WorkloadSet:
    doc: dict[str, object] = {
        "workloads": [
            {
                "name": "api",
                "class": "serving",
                "instance_types": ["g1"],
                "max_spot_share": 1.0,
                "max_zone_share": 1.0,
                "max_pool_share": 1.0,
                "demand": {"base_units": N, "peak_units": N},
            },
        ]
    }
    if cap_usd is not None:
        doc["break_glass_cap_usd"] = cap_usd
    return parse_workloads(doc)


def _plan(costs: CostTable) -> Plan:
    e = costs.entry("api", A)
    assert e is not None and e.spot_factor is not None
    work = N * e.work_per_instance_hour / e.spot_factor
    rows = [(0, 0, HOURS, "api", Tier.SPOT.value, A, float(N), float(N), work, SPOT_USD[A])]
    return Plan(
        start=T0,
        hours=HOURS,
        period_hours=HOURS,
        commitments=(),
        allocations=pd.DataFrame(rows, columns=ALLOCATION_COLUMNS),
        objective_usd=0.0,
        status="hand-made",
        solver="none",
        solve_time_s=0.0,
        integral=True,
    )


def _actuals(held_b: float) -> MarketActuals:
    held_a = np.ones(HOURS)
    held_a[list(LOST)] = 0.0
    return MarketActuals(
        {k: np.full(HOURS, usd) for k, usd in SPOT_USD.items()},
        {A: held_a, B: np.full(HOURS, held_b)},
    )


def _inputs(
    cap_usd: float | None = None, held_b: float = 1.0
) -> tuple[Plan, WorkloadSet, dict[str, np.ndarray], MarketSnapshot, MarketActuals, CostTable]:
    ws = _workloads(cap_usd)
    snap = _snapshot()
    costs = CostTable.compute(snap, ws)
    plan = _plan(costs)
    demand = {"api": np.full(HOURS, float(plan.allocations["work_per_hour"].iloc[0]))}
    return plan, ws, demand, snap, _actuals(held_b), costs


def test_lost_spot_is_replaced_in_the_other_pool_and_billed_at_its_price() -> None:
    plan, ws, demand, snap, actuals, costs = _inputs()
    bill = bill_reacted(plan, ws, demand, snap, actuals, costs=costs)
    lost_hours = len(LOST)
    assert bill.decisions is not None
    assert bill.decisions.get("replace") == N * lost_hours
    assert bill.decided_by == DECIDED_BY == "broker.lifecycle.manager:LifecycleManager"
    held_a = (HOURS - lost_hours) * N * SPOT_USD[A]
    in_b = lost_hours * N * SPOT_USD[B]
    assert bill.by_tier_usd["spot"] == pytest.approx(held_a + in_b)
    assert bill.by_tier_usd["on_demand"] == pytest.approx(0.0)
    assert bill.break_glass_usd == pytest.approx(0.0)
    assert bill.unmet_unit_hours["api"] == pytest.approx(0.0, abs=1e-9)
    # The autoscaler's rule (the baselines' bill) tops the same hours up on
    # on-demand instead: it is not what the daemon does.
    topped = bill_plan(plan, ws, demand, snap, actuals, costs=costs)
    assert topped.by_tier_usd["on_demand"] == pytest.approx(lost_hours * N * OD_USD)
    assert topped.total_usd != pytest.approx(bill.total_usd)


def test_the_replay_holds_the_replacements_only_in_the_lost_hours() -> None:
    plan, ws, _, snap, actuals, costs = _inputs()
    r = react(plan, ws, snap, actuals, costs=costs)
    held = r.held()
    for h in range(HOURS):
        in_a = held.get((h, "api", A, "spot"), 0.0)
        in_b = held.get((h, "api", B, "spot"), 0.0)
        assert (in_a, in_b) == ((0.0, N) if h in LOST else (N, 0.0)), h
    assert all(r.plan_instances[(h, "api", A, "spot")] == N for h in range(HOURS))


def test_a_replacement_pool_that_refuses_capacity_leaves_the_lifecycle_to_break_glass() -> None:
    """Zone b holds no spot either: the launch is refused, the manager is
    told, and the next notices break glass (serving: replace, else on-demand)."""
    plan, ws, demand, snap, actuals, costs = _inputs(held_b=0.0)
    bill = bill_reacted(plan, ws, demand, snap, actuals, costs=costs)
    assert bill.decisions is not None
    assert bill.decisions.get("break_glass", 0) > 0
    assert bill.refused_launches > 0
    # b never held: spot is zone a's hours only
    assert bill.by_tier_usd["spot"] == pytest.approx((HOURS - len(LOST)) * N * SPOT_USD[A])
    assert bill.break_glass_usd > 0
    assert bill.by_tier_usd["on_demand"] >= bill.break_glass_usd


def _all_lost(cap_usd: float | None) -> tuple[float, Plan, Bill, MarketActuals]:
    """Both zones lose spot all day: (on-demand instance-hours the lifecycle
    bought, the plan, its bill, the actuals)."""
    plan, ws, demand, snap, actuals, costs = _inputs(cap_usd, held_b=0.0)
    none = np.zeros(HOURS)
    actuals = MarketActuals(actuals.spot_usd_per_hour, {A: none, B: none})
    r = react(plan, ws, snap, actuals, costs=costs)
    bill = bill_reaction(plan, r, ws, demand, snap, actuals, costs=costs)
    od_hours = sum(v for k, v in r.launched.items() if k[3] == Tier.ON_DEMAND.value)
    assert bill.break_glass_usd == pytest.approx(od_hours * OD_USD)
    return od_hours, plan, bill, actuals


@pytest.mark.parametrize("cap_usd", [0.0, 1.5, 4.0])
def test_the_bill_never_charges_break_glass_beyond_the_cap(cap_usd: float) -> None:
    """Break-glass extra dollars (on-demand over the lost spot price) stay
    within the fleet's cap; what the cap does not pay for is unmet, not
    topped up on on-demand."""
    uncapped, *_ = _all_lost(None)
    od_hours, plan, bill, _ = _all_lost(cap_usd)
    assert od_hours < uncapped  # the cap binds
    assert od_hours * (OD_USD - SPOT_USD[A]) <= cap_usd + 1e-6
    assert bill.break_glass_committed_usd is not None
    assert bill.break_glass_committed_usd <= cap_usd + 1e-6
    uncovered = HOURS * N - od_hours  # instance-hours neither spot nor on-demand held
    unmet = bill.unmet_unit_hours["api"]
    assert unmet == pytest.approx(uncovered * _work_per_instance(plan))
    tiers = bill.by_tier_usd
    assert tiers["on_demand"] == pytest.approx(od_hours * OD_USD)
    assert tiers["spot"] == pytest.approx(0.0)


def _work_per_instance(plan: Plan) -> float:
    row = plan.allocations.iloc[0]
    return float(row["work_per_hour"] / row["instances"])


def test_on_demand_the_manager_kept_instead_of_launching_is_launched_here() -> None:
    """A serving break-glass can take back on-demand a return retired that
    still runs (``Decision.kept``). The replay ends a return's on-demand at
    once, so the instance the manager names is one the plan's slots hold
    (``_terminate`` ended its twin): the daemon's reconcile makes up the
    kept count with a launch, and so does the replay (without it the lost
    spot would go uncovered: the default what-if would bill $19 less for
    it)."""
    from broker.lifecycle import Decision, DecisionKind, LaunchIntent
    from broker.whatif.reaction import Reactor

    plan, ws, _, snap, actuals, costs = _inputs()
    reactor = Reactor(T0, ws, snap, actuals, costs=costs)
    reactor.run(plan, 0, 1)
    replay = reactor._replay
    assert replay is not None
    kept = Decision(
        notice_id="n-kept",
        notice_kind="interruption",
        kind=DecisionKind.BREAK_GLASS,
        workload="api",
        lost_instance_id="i-lost",
        lost_units=1,
        launches=(),
        new_size=None,
        reason="break glass onto on-demand a return retired",
        decided_at=T0,
        latency_s=0.0,
        checkpoint=None,
        kept=(LaunchIntent(A, Tier.ON_DEMAND, 1),),
        kept_instance_ids=("i-x",),
    )
    replay._carry_out(kept, ("api", A, Tier.SPOT.value), T0)
    (got,) = replay.glass["n-kept"]
    assert (got.inst.pool_key, got.inst.tier) == (A, Tier.ON_DEMAND)


def test_a_plan_that_moves_a_running_gang_spends_the_disruption_budget() -> None:
    """A training gang of two on-demand nodes in zone a that the next step's
    plan moves to zone b is a broker-made move: the manager's one disruption
    budget records its two units at that step's start (the job's move
    interval starts), as the daemon's reconcile records the gang moves it
    carries out."""
    ws = parse_workloads(
        {
            "workloads": [
                {
                    "name": "gang",
                    "class": "training",
                    "instance_types": ["g1"],
                    "min_units": 2,
                    "max_units": 2,
                    "unit_hours": 8.0,
                    "deadline_hours": 24.0,
                },
            ]
        }
    )
    snap = _snapshot()
    costs = CostTable.compute(snap, ws)

    def step(pool: str) -> Plan:
        row = (0, 0, 2, "gang", Tier.ON_DEMAND.value, pool, 2.0, 2.0, 2.0, OD_USD)
        return Plan(
            start=T0,
            hours=2,
            period_hours=1,
            commitments=(),
            allocations=pd.DataFrame([row], columns=ALLOCATION_COLUMNS),
            objective_usd=0.0,
            status="hand-made",
            solver="none",
            solve_time_s=0.0,
            integral=True,
        )

    reactor = Reactor(T0, ws, snap, _actuals(1.0), costs=costs)
    budget = reactor.manager.disruption
    reactor.run(step(A), 0, 2)
    assert budget.last_move_s("gang") is None  # forming the gang moves nothing
    reactor.run(step(B), 2, 2)
    moved_s = (T0 + timedelta(hours=2)).timestamp()
    assert budget.last_move_s("gang") == moved_s
    assert budget.used_units(moved_s) == pytest.approx(2.0)
    assert budget.block_reason("gang", moved_s + 60.0) is not None  # one move per hour


def test_a_later_step_s_lost_spot_is_decided_on_the_snapshot_that_step_planned_on() -> None:
    """The daemon's plan job hands its manager each re-plan's snapshot; a
    replayed loop hands the reactor each step's (``Reactor.on_market``).
    Zone a loses spot in hours 6-11 and again in 18-20. On the first
    snapshot zone b offers spot: the first loss is replaced there. The step
    from hour 12 planned on a snapshot where zone b offers none: the
    second loss breaks glass onto on-demand, decided on that snapshot (on
    the first one it would have been replaced in zone b again)."""
    plan, ws, _, snap, _, costs = _inputs()
    held_a = np.ones(HOURS)
    held_a[[*LOST, 18, 19, 20]] = 0.0
    actuals = MarketActuals(
        {k: np.full(HOURS, usd) for k, usd in SPOT_USD.items()}, {A: held_a, B: np.ones(HOURS)}
    )
    b_without_spot = snap.pools[1].model_copy(update={"spot_available": False})
    no_b = snap.model_copy(update={"pools": (snap.pools[0], b_without_spot)})

    def second_half(later: MarketSnapshot | None) -> dict[str, int]:
        reactor = Reactor(T0, ws, snap, actuals, costs=costs)
        reactor.run(plan, 0, 12)
        first = dict(reactor.result().decisions)
        if later is not None:
            reactor.on_market(later, CostTable.compute(later, ws))
        reactor.run(plan, 12, 12)
        after = reactor.result().decisions
        assert first == {"replace": N * len(LOST)}
        return {k: n - first.get(k, 0) for k, n in after.items() if n - first.get(k, 0)}

    assert second_half(None) == {"replace": N * 3}
    decided = second_half(no_b)
    assert decided.get("break_glass") == N * 3 and "replace" not in decided, decided


def _gang_plan(rows: list[tuple[Tier, str, int]], hours: int, costs: CostTable) -> Plan:
    out = []
    for tier, pool, n in rows:
        e = costs.entry("gang", pool)
        assert e is not None
        usd = SPOT_USD[pool] if tier is Tier.SPOT else OD_USD
        out.append(
            (
                0,
                0,
                hours,
                "gang",
                tier.value,
                pool,
                float(n),
                float(n),
                n * e.work_per_instance_hour,
                usd,
            )
        )
    return Plan(
        start=T0,
        hours=hours,
        period_hours=hours,
        commitments=(),
        allocations=pd.DataFrame(out, columns=ALLOCATION_COLUMNS),
        objective_usd=0.0,
        status="hand-made",
        solver="none",
        solve_time_s=0.0,
        integral=True,
    )


@pytest.mark.parametrize("later_pool", [A, B])
def test_a_re_plan_takes_over_break_glass_on_demand_or_ends_it(later_pool: str) -> None:
    """A training gang, one on-demand node and three spot in zone a, its
    deadline tight; zone a loses spot from hour 6 and zone b holds none (the
    market refreshed then says so): the lifecycle breaks glass onto
    on-demand in zone a. The step from hour 8
    plans the gang on four on-demand nodes in ``later_pool``. The daemon's
    reconcile adjusts a plan only by the decisions made since it, so the
    break-glass nodes are then the new plan's own where it wants on-demand
    in zone a (no launch), and end where it moves the gang to zone b
    (not run on in zone a beside the plan's gang until their stretch ends:
    a second, useless gang)."""
    ws = parse_workloads(
        {
            "workloads": [
                {
                    "name": "gang",
                    "class": "training",
                    "instance_types": ["g1"],
                    "elastic": True,
                    "min_units": 1,
                    "step_units": 1,
                    "max_units": 4,
                    "unit_hours": 90.0,
                    "deadline_hours": 24.0,
                },
            ]
        }
    )
    snap = _snapshot()
    costs = CostTable.compute(snap, ws)
    held_a = np.ones(HOURS)
    held_a[list(LOST)] = 0.0
    actuals = MarketActuals(
        {k: np.full(HOURS, usd) for k, usd in SPOT_USD.items()}, {A: held_a, B: np.zeros(HOURS)}
    )
    first = _gang_plan([(Tier.ON_DEMAND, A, 1), (Tier.SPOT, A, 3)], 8, costs)
    reactor = Reactor(T0, ws, snap, actuals, costs=costs)
    reactor.run(first, 0, 6)
    # the market as refreshed at hour 6: no spot in either zone (nowhere to return to)
    gone = tuple(p.model_copy(update={"spot_available": False}) for p in snap.pools)
    reactor.on_market(snap.model_copy(update={"pools": gone}))
    reactor.run(first, 6, 2)  # the same plan in force: no re-plan
    replay = reactor._replay
    assert replay is not None
    glass = {x.inst.instance_id for xs in replay.glass.values() for x in xs}
    assert len(glass) == 3, reactor.result().decisions  # break-glass runs at hour 8
    reactor.run(_gang_plan([(Tier.ON_DEMAND, later_pool, 4)], 4, costs), 8, 4)
    r = reactor.result()
    od = Tier.ON_DEMAND.value
    for h in range(8, 12):
        held = {k[2]: v for k, v in r.held().items() if k[0] == h and k[3] == od and v > 0}
        assert held == {later_pool: pytest.approx(4.0)}, (h, held)
        launched = sum(v for k, v in r.launched.items() if k[0] == h)
        assert launched == pytest.approx(0.0), (h, launched)
    ids = {x.inst.instance_id for x in replay.slots[("gang", later_pool, od)]}
    assert len(ids & glass) == (3 if later_pool == A else 0)
