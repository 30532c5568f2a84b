"""One placement rule: the daemon's substitution and next-pool fallback and
the lifecycle's replacement choose the same pool, skip the same refused pools
for the same TTL; and a resize made by the plan starts the lifecycle's dwell."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
import yaml

from broker.daemon.book import FleetBook, substitute
from broker.daemon.config import Backoff, load_daemon_config
from broker.daemon.executor import Executor
from broker.daemon.launch import Launcher
from broker.daemon.metrics import DaemonMetrics
from broker.daemon.plan_job import PlanState
from broker.daemon.reconcile import ReconcileJob
from broker.daemon.store.store import Store
from broker.daemon.wiring import default_lifecycle
from broker.lifecycle import DecisionKind, LifecycleConfig, LifecycleManager
from broker.planning.plan import Plan
from markets.catalog import instance_type
from markets.clock import ManualClock
from markets.cloud_fleet import Instance, InstanceState, LaunchRequest, Notice, NoticeKind
from markets.errors import InputError
from markets.model import Hazard, HazardSource, MarketSnapshot, Pool, PoolSnapshot, Tier
from markets.sim.cloud import SimCloud, SimOptions
from markets.ttl import UNAVAILABLE_OFFERING_TTL_S
from policies.workloads.spec import WorkloadSet, parse_workloads
from tests.fakes.tiny_market import T0, TinyMarket, pool_key

OWNER = "me"
A, B, C = pool_key("a"), pool_key("b"), pool_key("c")
_ids = itertools.count(1)


def _inst(workload: str, pool: str, at: datetime = T0) -> Instance:
    return Instance(
        instance_id=f"i-{next(_ids):05d}",
        pool_key=pool,
        tier=Tier.SPOT,
        workload=workload,
        state=InstanceState.RUNNING,
        units=1,
        launched_at=at,
    )


def _revoke(i: Instance, at: datetime) -> Notice:
    return Notice(
        notice_id=f"n-{i.instance_id}",
        kind=NoticeKind.INTERRUPTION,
        instance_id=i.instance_id,
        at=at,
        deadline=at + timedelta(seconds=120),
        pool_key=i.pool_key,
    )


def _web() -> WorkloadSet:
    return parse_workloads(
        {
            "workloads": [
                {
                    "name": "web",
                    "class": "serving",
                    "instance_types": ["p3.2xlarge"],
                    "demand": {"base_units": 1, "peak_units": 1},
                }
            ]
        }
    )


def _sweeps() -> WorkloadSet:
    return parse_workloads(
        {
            "workloads": [
                {
                    "name": "sweeps",
                    "class": "batch",
                    "instance_types": ["p3.2xlarge"],
                    "unit_hours": 100,
                    "deadline_hours": 500,
                    "max_units": 8,
                }
            ]
        }
    )


def _market_where_the_listed_cheapest_is_not_the_cheapest() -> MarketSnapshot:
    """B lists the lowest spot price but is revoked three times an hour; C costs a little
    more per hour and much less per unit of work done (effective cost)."""

    def pool(zone: str, spot: float, hazard: float) -> PoolSnapshot:
        key = pool_key(zone)
        return PoolSnapshot(
            pool=Pool.from_key(key),
            instance=instance_type("p3.2xlarge"),
            on_demand_usd_per_hour=3.06,
            spot_usd_per_hour=spot,
            hazard=Hazard(rate_per_hour=hazard, source=HazardSource.OBSERVED),
            observed_at=T0,
        )

    return MarketSnapshot(
        at=T0, pools=(pool("a", 0.95, 0.01), pool("b", 0.90, 3.0), pool("c", 0.97, 0.005))
    )


def test_reconcile_substitution_and_the_lifecycle_choose_the_same_pool_for_the_same_loss() -> None:
    clock = ManualClock(T0)
    ws = _web()
    snap = _market_where_the_listed_cheapest_is_not_the_cheapest()
    lifecycle = LifecycleManager(ws, clock, LifecycleConfig(horizon_start=T0))
    lifecycle.on_market(snap)
    book = FleetBook(OWNER, ws, lifecycle)
    book.set_snapshot(snap)
    lost = _inst("web", A)
    lifecycle.record_launch_failure(A)  # A refused capacity: neither may refill it

    moved = substitute({("web", A, "spot"): 1}, book, clock.now())
    decision = lifecycle.handle(_revoke(lost, clock.now()), (lost,), snap)

    assert decision.kind is DecisionKind.REPLACE
    assert [x.pool_key for x in decision.launches] == [C]
    assert moved == {("web", C, "spot"): 1}  # by effective cost: not B, the listed cheapest
    assert book.next_pool("web", A, Tier.SPOT, 1, {A}, clock.now()) == (C, 1)


def test_a_pool_a_failed_launch_marked_unavailable_is_skipped_by_both_until_the_ttl() -> None:
    clock = ManualClock(T0)
    ws = _sweeps()
    market = TinyMarket(spot_usd={A: 0.5, B: 0.8})  # A, then B, then C
    snap = market.snapshot(T0)
    cloud = SimCloud(market, clock, SimOptions())
    cloud.exhaust(A, until=T0 + timedelta(seconds=UNAVAILABLE_OFFERING_TTL_S / 2))
    lifecycle = LifecycleManager(ws, clock, LifecycleConfig(horizon_start=T0))
    lifecycle.on_market(snap)
    book = FleetBook(OWNER, ws, lifecycle)
    book.set_snapshot(snap)
    executor = Executor(cloud, Store("sqlite://"), OWNER, clock, DaemonMetrics(), Backoff())
    launcher = Launcher(executor, book, lifecycle, clock)
    req = LaunchRequest(
        idempotency_key="sf-test-1",
        pool_key=A,
        tier=Tier.SPOT,
        workload="sweeps",
        count=1,
        owner=OWNER,
        plan_generation=0,
    )

    assert launcher.launch(req, context={"source": "test"})  # A refused, B launched
    assert {i.pool_key for i in cloud.alive()} == {B}

    # Skipped by both: the daemon's substitution and the lifecycle's replacement.
    lost = _inst("sweeps", C)
    assert substitute({("sweeps", A, "spot"): 1}, book, clock.now()) == {("sweeps", B, "spot"): 1}
    d = lifecycle.handle(_revoke(lost, clock.now()), (lost,), snap)
    assert [x.pool_key for x in d.launches] == [B]

    # Tried again by both once the one TTL has passed.
    clock.advance(UNAVAILABLE_OFFERING_TTL_S)
    assert substitute({("sweeps", A, "spot"): 1}, book, clock.now()) == {("sweeps", A, "spot"): 1}
    again = _inst("sweeps", C, clock.now())
    d = lifecycle.handle(_revoke(again, clock.now()), (again,), snap)
    assert [x.pool_key for x in d.launches] == [A]


@pytest.mark.parametrize("section", ["backoff", "lifecycle"])
def test_a_second_unavailable_ttl_setting_is_refused_naming_its_field(
    section: str, tmp_path: Path
) -> None:
    path = tmp_path / "daemon.yaml"
    path.write_text(yaml.safe_dump({"owner": OWNER, section: {"unavailable_ttl_s": 900}}))
    with pytest.raises(InputError, match=f"{section}.unavailable_ttl_s is no longer a setting"):
        # lifecycle: a free-form mapping, validated where the manager is wired
        default_lifecycle(_web(), ManualClock(T0), load_daemon_config(path))


def _elastic() -> WorkloadSet:
    return parse_workloads(
        {
            "workloads": [
                {
                    "name": "ft",
                    "class": "training",
                    "instance_types": ["p3.2xlarge"],
                    "elastic": True,
                    "min_units": 1,
                    "step_units": 1,
                    "max_units": 4,
                    "min_dwell_minutes": 30,
                    "unit_hours": 100,
                    "deadline_hours": 5000,
                    "placement": "any",
                }
            ]
        }  # its nodes in three zones (A, B, C)
    )


def _plan(sizes: list[int]) -> Plan:
    rows = [
        {
            "workload": "ft",
            "pool_key": A,
            "tier": "spot",
            "instances": float(n),
            "hour_start": h,
            "hour_end": h + 1,
        }
        for h, n in enumerate(sizes)
    ]
    return Plan(
        start=T0,
        hours=len(sizes),
        period_hours=1,
        commitments=(),
        allocations=pd.DataFrame(rows),
        objective_usd=0.0,
        status="Optimal",
        solver="test",
        solve_time_s=0.0,
        integral=True,
    )


def _shrink_after(sizes: list[int]) -> DecisionKind:
    """The lifecycle's answer to a loss 10 minutes into hour 1 of a plan of ``sizes``."""
    clock = ManualClock(T0)
    ws = _elastic()
    market = TinyMarket()
    lifecycle = LifecycleManager(ws, clock, LifecycleConfig(horizon_start=T0))
    book = FleetBook(OWNER, ws, lifecycle)
    snap = market.snapshot(T0)
    book.set_snapshot(snap)
    cloud = SimCloud(market, clock, SimOptions())
    store = Store("sqlite://")
    executor = Executor(cloud, store, OWNER, clock, DaemonMetrics(), Backoff())
    launcher = Launcher(executor, book, lifecycle, clock)
    job = ReconcileJob(
        cloud,
        store,
        book,
        executor,
        launcher,
        lifecycle,
        ws,
        owner=OWNER,
        listing_grace_s=0.0,
        dry_run=True,
    )
    state = PlanState(plan=_plan(sizes), generation=1)
    job.desired(state, T0)
    clock.advance(3600)
    job.desired(state, clock.now())  # hour 1: the plan's size for it
    clock.advance(600)
    fleet = tuple(_inst("ft", p, T0) for p in (A, B, C))
    return lifecycle.handle(_revoke(fleet[0], clock.now()), fleet, snap).kind


def test_a_resize_by_the_plan_delays_a_lifecycle_shrink() -> None:
    assert _shrink_after([3, 3]) is DecisionKind.SHRINK  # the plan kept its size
    # The plan grew the job to 3 at hour 1: 10 minutes later is inside its
    # 30-minute dwell, so the lifecycle replaces instead of shrinking.
    assert _shrink_after([2, 3]) is not DecisionKind.SHRINK
