"""The broker's own moves spend the disruption budget the lifecycle's notice
decisions spend: a re-plan that moves running spot or gang capacity is held
(instances kept, replacing launches held back) when the job moved within the
hour, when the fleet's share per window is spent, or when the workload's own
budget says so."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pandas as pd
import pytest

from broker.daemon.book import FleetBook
from broker.daemon.config import Backoff
from broker.daemon.executor import Executor
from broker.daemon.launch import Launcher
from broker.daemon.metrics import DaemonMetrics
from broker.daemon.plan_job import PlanState
from broker.daemon.reconcile import ReconcileJob
from broker.daemon.store.store import Store
from broker.lifecycle import DecisionKind, LifecycleConfig, LifecycleManager
from broker.lifecycle.disruption import DisruptionBudget
from broker.planning.plan import Plan
from broker.planning.reconcile import hold, leaving
from markets.clock import ManualClock
from markets.cloud_fleet import (
    OWNER_TAG,
    Instance,
    InstanceState,
    Notice,
    NoticeKind,
    TerminateRequest,
)
from markets.errors import InputError
from markets.model import Tier
from markets.sim.cloud import SimCloud, SimOptions
from policies.workloads.spec import WorkloadSet, parse_workloads
from tests.fakes.tiny_market import T0, TinyMarket, pool_key

OWNER = "me"
A, B, C = pool_key("a"), pool_key("b"), pool_key("c")


def _gang(**extra: Any) -> WorkloadSet:
    return parse_workloads(
        {
            "workloads": [
                {
                    "name": "ft",
                    "class": "training",
                    "instance_types": ["p3.2xlarge"],
                    "min_units": 4,
                    "unit_hours": 1000,
                    "deadline_hours": 5000,
                    "max_spot_share": 1.0,
                    "min_on_non_revocable": False,
                    "max_zone_share": 1.0,
                    "max_pool_share": 1.0,
                    # spread over pools A, B, C to test the budget, not the
                    # zone contract (its own tests: ``placement``)
                    "placement": "any",
                    **extra,
                }
            ]
        }
    )


def _plan(rows: Sequence[tuple[str, int, int]]) -> Plan:
    """(pool, hour, instances) of workload ft on spot."""
    frame = pd.DataFrame(
        [
            {
                "workload": "ft",
                "pool_key": p,
                "tier": "spot",
                "instances": float(n),
                "hour_start": h,
                "hour_end": h + 1,
            }
            for p, h, n in rows
        ]
    )
    hours = max(h for _, h, _ in rows) + 1
    return Plan(
        start=T0,
        hours=hours,
        period_hours=1,
        commitments=(),
        allocations=frame,
        objective_usd=0.0,
        status="Optimal",
        solver="test",
        solve_time_s=0.0,
        integral=True,
    )


class _Account:
    def __init__(self, ws: WorkloadSet) -> None:
        self.clock = ManualClock(T0)
        self.market = TinyMarket(share={A: 1.0, B: 1.0, C: 1.0}, spot_usd={A: 1.0, B: 0.8, C: 0.6})
        self.lifecycle = LifecycleManager(ws, self.clock, LifecycleConfig(horizon_start=T0))
        self.book = FleetBook(OWNER, ws, self.lifecycle)
        self.snap = self.market.snapshot(T0)
        self.book.set_snapshot(self.snap)
        self.lifecycle.on_market(self.snap)
        self.cloud = SimCloud(self.market, self.clock, SimOptions(state_change_notices=False))
        self.store = Store("sqlite://")
        executor = Executor(self.cloud, self.store, OWNER, self.clock, DaemonMetrics(), Backoff())
        launcher = Launcher(executor, self.book, self.lifecycle, self.clock)
        self.job = ReconcileJob(
            self.cloud,
            self.store,
            self.book,
            executor,
            launcher,
            self.lifecycle,
            ws,
            owner=OWNER,
            listing_grace_s=0.0,
        )

    def reconcile(self, state: PlanState) -> list[Any]:
        now = self.clock.now()
        return self.job.run(state, self.job.view(now), now)

    def held(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for i in self.cloud.alive():
            out[i.pool_key] = out.get(i.pool_key, 0) + 1
        return out


def _terminated(reqs: Sequence[object]) -> int:
    return sum(len(r.instance_ids) for r in reqs if isinstance(r, TerminateRequest))


def _day(pool: str, start: int, n: int = 4) -> list[tuple[str, int, int]]:
    """``n`` in ``pool`` from hour ``start`` to the end of a day's plan."""
    return [(pool, h, n) for h in range(start, 24)]


def test_a_replan_moves_a_gang_at_most_once_per_hour() -> None:
    # Each move pays (20 % cheaper for the rest of a day's plan): only the
    # budget's one move per hour holds the second.
    acc = _Account(_gang())
    plan = _plan([(A, 0, 4), *_day(B, 1)])
    acc.reconcile(PlanState(plan=plan, generation=1))
    assert acc.held() == {A: 4}
    acc.clock.set(T0 + timedelta(hours=1))
    moved = acc.reconcile(PlanState(plan=plan, generation=1))
    assert _terminated(moved) == 4 and acc.held() == {B: 4}  # the first move is granted
    # Half an hour later a re-plan moves the gang on to C: held, nothing launched.
    acc.clock.set(T0 + timedelta(hours=1, minutes=30))
    on = _plan([(A, 0, 4), *_day(C, 1)])
    assert acc.reconcile(PlanState(plan=on, generation=2)) == []
    assert acc.held() == {B: 4}
    # An hour after the first move it may move again.
    acc.clock.set(T0 + timedelta(hours=2, minutes=1))
    assert _terminated(acc.reconcile(PlanState(plan=on, generation=3))) == 4
    assert acc.held() == {C: 4}


def _batch() -> WorkloadSet:
    return parse_workloads(
        {
            "workloads": [
                {
                    "name": "ft",
                    "class": "batch",
                    "instance_types": ["p3.2xlarge"],
                    "unit_hours": 1000,
                    "max_spot_share": 1.0,
                    "max_zone_share": 1.0,
                    "max_pool_share": 1.0,
                }
            ]
        }
    )


def test_a_replan_does_not_move_running_spot_for_less_than_the_move_costs() -> None:
    # B is 20 % cheaper, but the plan needs the work for one more hour only:
    # $0.20/h x 4 nodes x ~1 h saves less than 4 cold starts ($0.25 each).
    acc = _Account(_batch())
    plan = _plan([(A, 0, 4), (B, 1, 4)])
    acc.reconcile(PlanState(plan=plan, generation=1))
    acc.clock.set(T0 + timedelta(hours=1))
    assert _terminated(acc.reconcile(PlanState(plan=plan, generation=1))) == 0
    assert acc.held() == {A: 4}  # and nothing launched in B


def test_a_replan_moves_running_spot_when_the_saving_over_its_life_pays() -> None:
    acc = _Account(_batch())
    plan = _plan([(A, 0, 4), *_day(B, 1)])
    acc.reconcile(PlanState(plan=plan, generation=1))
    acc.clock.set(T0 + timedelta(hours=1))
    assert _terminated(acc.reconcile(PlanState(plan=plan, generation=1))) == 4
    assert acc.held() == {B: 4}


def test_a_replan_never_moves_one_gang_node_for_its_own_saving() -> None:
    # One of the gang's four nodes to B for the day: the saving of one node
    # (~$4) does not pay the whole gang's restart and lost work (~$9).
    acc = _Account(_gang())
    acc.reconcile(PlanState(plan=_plan(_day(A, 0)), generation=1))
    acc.clock.set(T0 + timedelta(hours=1))
    plan = _plan([(A, 0, 4), *_day(A, 1, 3), *_day(B, 1, 1)])
    assert _terminated(acc.reconcile(PlanState(plan=plan, generation=2))) == 0
    assert acc.held() == {A: 4}


def test_a_revocation_replacement_starts_the_jobs_hour_for_plan_moves() -> None:
    acc = _Account(_gang())
    plan = _plan([(A, 0, 4), (A, 1, 4)])
    acc.reconcile(PlanState(plan=plan, generation=1))
    acc.clock.set(T0 + timedelta(minutes=50))
    fleet = tuple(acc.job.view(acc.clock.now()))
    lost = fleet[0]
    notice = Notice(
        notice_id="n-1",
        kind=NoticeKind.INTERRUPTION,
        instance_id=lost.instance_id,
        at=acc.clock.now(),
        deadline=acc.clock.now() + timedelta(seconds=120),
        pool_key=lost.pool_key,
    )
    d = acc.lifecycle.handle(notice, fleet, acc.snap)
    assert d.kind is DecisionKind.REPLACE
    # 20 minutes after that replacement, a re-plan moving the gang to C waits.
    acc.clock.set(T0 + timedelta(hours=1, minutes=10))
    moved = acc.reconcile(PlanState(plan=_plan([(A, 0, 4), (C, 1, 4)]), generation=2))
    assert _terminated(moved) == 0 and acc.held() == {A: 4}  # nothing moved to C


def test_a_workload_with_a_zero_budget_is_never_moved_by_the_broker() -> None:
    acc = _Account(_gang(disruption={"max_share": 0}))
    acc.reconcile(PlanState(plan=_plan([(A, 0, 4), (B, 1, 4)]), generation=1))
    acc.clock.set(T0 + timedelta(hours=3))
    assert (
        _terminated(acc.reconcile(PlanState(plan=_plan([(A, 0, 4), (B, 1, 4)]), generation=1))) == 0
    )
    assert acc.held() == {A: 4}


def _inst(iid: str, pool: str, workload: str = "w", units: int = 8) -> Instance:
    return Instance(
        instance_id=iid,
        pool_key=pool,
        tier=Tier.SPOT,
        workload=workload,
        state=InstanceState.RUNNING,
        units=units,
        launched_at=T0 - timedelta(hours=2),
        tags={OWNER_TAG: OWNER},
    )


def _budget(**own: Any) -> DisruptionBudget:
    ws = parse_workloads(
        {
            "workloads": [
                {
                    "name": "w",
                    "class": "batch",
                    "instance_types": ["p3.16xlarge"],
                    "unit_hours": 100,
                    "disruption": own,
                }
            ]
        }
    )
    return DisruptionBudget(600.0, 0.05, 8.0, 3600.0, ws.workloads)


@pytest.mark.parametrize(
    ("units", "capacity", "whole", "used", "granted"),
    [
        pytest.param([8, 8, 8], 200.0, False, 0.0, 1, id="5-percent-of-200-is-one-node"),
        pytest.param([8, 8, 8], 480.0, False, 0.0, 3, id="5-percent-of-480-is-three"),
        pytest.param([8, 8, 8], 200.0, True, 0.0, 3, id="a-gang-moves-whole-into-an-empty-window"),
        pytest.param([8, 8, 8], 200.0, True, 2.0, 0, id="a-gang-waits-when-the-window-is-used"),
        pytest.param([8, 8], 200.0, False, 8.0, 0, id="nothing-left-after-a-replacement"),
    ],
)
def test_grant_follows_the_fleet_share_per_window(
    units: list[float], capacity: float, whole: bool, used: float, granted: int
) -> None:
    b = _budget()
    if used:
        b.record(used, T0.timestamp() - 60)  # a notice replacement, no workload named
    got = b.grant(
        "w", units, capacity_units=capacity, workload_units=24.0, now_s=T0.timestamp(), whole=whole
    )
    assert got == granted


def test_a_workloads_own_share_tightens_the_fleets() -> None:
    b = _budget(max_share=0.5, window_minutes=30)
    now = T0.timestamp()
    # The fleet allows 3 x 8 (5 % of 480); the workload's own half of 32 units is 16.
    assert (
        b.grant("w", [8, 8, 8], capacity_units=480.0, workload_units=32.0, now_s=now, whole=False)
        == 2
    )


def test_hold_keeps_the_instances_and_holds_back_the_same_work_elsewhere() -> None:
    fleet = [_inst("i-1", A), _inst("i-2", A)]
    want = {("w", B, "spot"): 2}
    moves = leaving(want, fleet, OWNER, gangs=())
    assert [i.instance_id for i in moves["w"]] == ["i-2", "i-1"]  # newest id first on a tie

    def work(_w: str, _p: str) -> float:
        return 8.0

    kept = hold(want, {"w": [moves["w"][1]]}, fleet, OWNER, work)
    assert kept == {("w", A, "spot"): 1, ("w", B, "spot"): 1}


@pytest.mark.parametrize(
    ("block", "field"),
    [
        pytest.param({"max_share": 1.5}, "disruption.max_share", id="share-above-one"),
        pytest.param({"window_minutes": 0}, "disruption.window_minutes", id="empty-window"),
        pytest.param({"every": 5}, "disruption.every", id="unknown-key"),
    ],
)
def test_a_bad_disruption_block_names_its_field(block: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as e:
        _gang(disruption=block)
    assert f"workloads[0].{field}" in str(e.value)


def test_a_workloads_own_interval_lengthens_the_fleets_never_shortens_it() -> None:
    assert _budget(min_interval_minutes=240).interval_s("w") == 4 * 3600.0
    assert _budget(min_interval_minutes=5).interval_s("w") == 3600.0
    b = _budget(min_interval_minutes=240)
    b.record(8.0, T0.timestamp(), "w")
    later = T0.timestamp() + 2 * 3600.0
    assert b.block_reason("w", later) is not None  # 2 h after: still inside its 4 h


def test_reconcile_tells_the_lifecycle_the_on_demand_it_keeps_until_spot_is_ready() -> None:
    # A serving plan moves from on-demand in A (hour 0) to spot in B (hour 1):
    # reconcile launches the spot and keeps the ready on-demand until it is
    # ready (make before break), and names it to the lifecycle
    # (``Lifecycle.kept_until_ready``). The spot is revoked while it warms up
    # and no spot pool has capacity: the notice breaks glass onto that
    # on-demand, launching nothing.
    ws = parse_workloads(
        {
            "workloads": [
                {
                    "name": "api",
                    "class": "serving",
                    "instance_types": ["p3.2xlarge"],
                    "demand": {"base_units": 4, "peak_units": 4},
                    "max_spot_share": 1.0,
                    "max_zone_share": 1.0,
                    "max_pool_share": 1.0,
                }
            ]
        }
    )
    frame = pd.DataFrame(
        [
            {
                "workload": "api",
                "pool_key": A,
                "tier": "on_demand",
                "instances": 4.0,
                "hour_start": 0,
                "hour_end": 1,
            },
            {
                "workload": "api",
                "pool_key": B,
                "tier": "spot",
                "instances": 4.0,
                "hour_start": 1,
                "hour_end": 2,
            },
        ]
    )
    plan = Plan(
        start=T0,
        hours=2,
        period_hours=1,
        commitments=(),
        allocations=frame,
        objective_usd=0.0,
        status="Optimal",
        solver="test",
        solve_time_s=0.0,
        integral=True,
    )
    acc = _Account(ws)
    acc.reconcile(PlanState(plan=plan, generation=1))
    od = {i.instance_id for i in acc.cloud.alive() if i.tier is Tier.ON_DEMAND}
    assert len(od) == 4
    acc.clock.set(T0 + timedelta(hours=1))
    acc.reconcile(PlanState(plan=plan, generation=1))
    fleet = acc.cloud.alive()
    warming = [i for i in fleet if i.tier is Tier.SPOT]
    assert len(warming) == 4 and od <= {i.instance_id for i in fleet}  # kept while warming
    for p in (A, B, C):
        acc.lifecycle.record_launch_failure(p, Tier.SPOT)
    lost = warming[0]
    notice = Notice(
        notice_id="n-1",
        kind=NoticeKind.INTERRUPTION,
        instance_id=lost.instance_id,
        at=acc.clock.now(),
        deadline=acc.clock.now() + timedelta(seconds=120),
        pool_key=lost.pool_key,
    )
    d = acc.lifecycle.handle(notice, fleet, acc.snap)
    assert d.kind is DecisionKind.BREAK_GLASS
    assert d.launches == ()
    (kept,) = d.kept_instance_ids
    assert kept in od
