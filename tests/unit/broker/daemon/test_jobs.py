"""The daemon's jobs one at a time, each built with only its collaborators
and a lifecycle that decides nothing (``tests.fakes.lifecycle``)."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any

import pytest

from broker.daemon.book import FleetBook
from broker.daemon.config import Backoff, DaemonConfig
from broker.daemon.executor import Executor
from broker.daemon.launch import Launcher
from broker.daemon.metrics import DaemonMetrics
from broker.daemon.plan_job import PlanJob, PlanState, Progress
from broker.daemon.store.store import DecisionRecord, Store
from broker.daemon.stretches import StretchJob
from broker.lifecycle import LifecycleManager, UnavailableOfferings
from markets.clock import ManualClock
from markets.cloud_fleet import ErrorKind, Instance, InstanceState, LaunchRequest, TerminateRequest
from markets.errors import QuotaExceededError, TransientError
from markets.keys import alternate_pool_key
from markets.model import MarketSnapshot, Tier
from markets.sim.cloud import SimCloud, SimOptions
from markets.ttl import UNAVAILABLE_OFFERING_TTL_S
from policies.cost_table import CostTable
from policies.workloads.spec import WorkloadSet, parse_workloads
from tests.fakes.lifecycle import QuietLifecycle
from tests.fakes.tiny_market import T0, TinyMarket, pool_key

A, B, C = pool_key("a"), pool_key("b"), pool_key("c")
OWNER = "me"


def _workloads() -> WorkloadSet:
    return parse_workloads(
        {
            "workloads": [
                {
                    "name": "sweeps",
                    "class": "batch",
                    "instance_types": ["p3.2xlarge"],
                    "throughput": {"p3.2xlarge": 1.0},
                    "unit_hours": 100,
                    "deadline_hours": 500,
                    "max_units": 8,
                }
            ]
        }
    )


class FlakyMarket(TinyMarket):
    """A market whose snapshot fails while ``down``."""

    down = False

    def snapshot(self, at: datetime | None = None) -> MarketSnapshot:
        if self.down:
            raise TransientError("pricing API unavailable")
        return super().snapshot(at)


def _plan_job(market: TinyMarket, lc: QuietLifecycle) -> tuple[PlanJob, FleetBook]:
    ws = _workloads()
    book = FleetBook(OWNER, ws, lc)
    config = DaemonConfig.model_validate({"owner": OWNER, "planner": "fast"})
    job = PlanJob(
        config, ws, market, Store("sqlite://"), book, lc, ManualClock(T0), DaemonMetrics()
    )
    return job, book


class PlacingLifecycle(QuietLifecycle):
    """Quiet, but with the real placement rule and book (a ``LifecycleManager``'s)."""

    def __init__(self, workloads: WorkloadSet, clock: ManualClock, snap: MarketSnapshot) -> None:
        super().__init__()
        self.manager = LifecycleManager(workloads, clock)
        self.manager.on_market(snap)

    @property
    def unavailable(self) -> UnavailableOfferings:
        return self.manager.unavailable

    def instead(
        self,
        workload: str,
        failed_pool: str,
        tier: Tier,
        count: int,
        tried: Collection[str],
        now: datetime | None = None,
    ) -> tuple[str, int] | None:
        return self.manager.instead(workload, failed_pool, tier, count, tried, now)


def test_a_refused_launch_moves_to_the_next_pool_under_a_derived_key() -> None:
    clock = ManualClock(T0)
    market = TinyMarket(spot_usd={A: 0.5})  # A is the cheapest: tried first
    cloud = SimCloud(market, clock, SimOptions())
    cloud.exhaust(A, until=T0 + timedelta(days=1))
    store = Store("sqlite://")
    lc = PlacingLifecycle(_workloads(), clock, market.snapshot(T0))
    book = FleetBook(OWNER, _workloads(), lc)
    book.set_snapshot(market.snapshot(T0))
    executor = Executor(cloud, store, OWNER, clock, DaemonMetrics(), Backoff())
    launcher = Launcher(executor, book, lc, clock)
    req = LaunchRequest(
        idempotency_key="sf-test-1",
        pool_key=A,
        tier=Tier.SPOT,
        workload="sweeps",
        count=2,
        owner=OWNER,
        plan_generation=0,
    )

    ids = launcher.launch(req, context={"source": "test"}, notice_ids=["n-1"])

    assert ids is not None and len(ids) == 2
    assert {i.pool_key for i in cloud.alive()} == {B}  # B and C tie on price: by key
    assert lc.called("record_launch_failure") == [(A, Tier.SPOT, "n-1")]
    assert book.is_unavailable(A, Tier.SPOT, clock.now())
    ttl = timedelta(seconds=UNAVAILABLE_OFFERING_TTL_S + 1)
    assert not book.is_unavailable(A, Tier.SPOT, clock.now() + ttl)
    with store.transaction() as tx:
        assert tx.action(alternate_pool_key("sf-test-1", B)) is not None
    # Without fallback a refusal is reported to the caller, nothing launched.
    again = req.model_copy(update={"idempotency_key": "sf-test-2"})
    assert launcher.launch(again, context={}, fallback=False) is None
    assert len(cloud.alive()) == 2


def test_keeps_the_last_good_snapshot_marked_stale_when_the_market_fails() -> None:
    market = FlakyMarket()
    lc = QuietLifecycle()
    job, book = _plan_job(market, lc)
    first = job.refresh_market(None, force=True)
    assert not first.stale and book.snapshot is first
    assert job.refresh_market(first, force=False) is first  # fresh enough: kept as is
    market.down = True
    kept = job.refresh_market(first, force=True)
    assert kept.stale and kept.at == first.at and book.snapshot is kept
    assert [c[0] for c in lc.called("on_market")] == [first, kept]
    with pytest.raises(TransientError):  # nothing good to keep
        job.refresh_market(None, force=True)


def test_one_cost_table_per_snapshot_for_the_lifecycle_and_every_plan_on_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import broker.daemon.plan_job as plan_module

    handed: list[CostTable | None] = []
    real = plan_module.window_problem  # type: ignore[attr-defined]

    def spy(*args: Any, **kwargs: Any) -> Any:
        handed.append(kwargs.get("costs"))
        return real(*args, **kwargs)

    monkeypatch.setattr(plan_module, "window_problem", spy)
    lc = QuietLifecycle()
    job, _book = _plan_job(TinyMarket(), lc)
    snap = job.refresh_market(None, force=True)
    [(_, lc_costs)] = lc.called("on_market")
    assert isinstance(lc_costs, CostTable) and lc_costs.snapshot is snap
    for _ in range(2):
        assert job.propose(snap, PlanState(), Progress(), {}, T0) is not None
    assert handed == [lc_costs, lc_costs]  # the same object: computed once
    later = job.refresh_market(snap, force=True)  # a new snapshot: a new table
    assert lc.called("on_market")[-1][1] is job.costs(later) is not lc_costs


def test_progress_counts_work_since_the_last_count_and_reports_each_job() -> None:
    lc = QuietLifecycle()
    job, _book = _plan_job(TinyMarket(), lc)
    fleet = [
        Instance(
            instance_id=f"i-{k}",
            pool_key=A,
            tier=Tier.SPOT,
            workload="sweeps",
            state=InstanceState.RUNNING,
            units=1,
            launched_at=T0,
        )
        for k in range(3)
    ]
    start = job.track_progress(Progress(), fleet, T0)
    assert start == Progress({}, T0) and lc.called("report_progress") == []
    later = job.track_progress(start, fleet, T0 + timedelta(hours=2))
    assert later.work_done == {"sweeps": pytest.approx(6.0)} and later.at == T0 + timedelta(hours=2)
    assert start.work_done == {}  # a new value; the old one is unchanged
    assert lc.called("report_progress") == [("sweeps", pytest.approx(6.0))]


def test_a_restart_hands_the_lifecycle_the_store_total_and_the_stretches_still_open() -> None:
    store = Store("sqlite://")
    still_open = {"alloc_id": "n-1", "open_usd": 4.0}

    def rec(nid: str | None, kind: str, usd: float, payload: dict[str, object]) -> DecisionRecord:
        return DecisionRecord(nid, kind, "sweeps", kind, 0.0, usd, payload, T0)

    with store.transaction() as tx:
        tx.record_decision(OWNER, rec("n-1", "break_glass", 4.0, {"stretch": still_open}))
        tx.record_decision(OWNER, rec("n-2", "break_glass", 3.0, {"stretch": {"alloc_id": "n-2"}}))
        tx.record_decision(
            OWNER, rec("tick:1", "end", -1.0, {"allocation_id": "n-2", "stretch": None})
        )
    lc = QuietLifecycle()
    clock = ManualClock(T0)
    cloud = SimCloud(TinyMarket(), clock, SimOptions())
    executor = Executor(cloud, store, OWNER, clock, DaemonMetrics(), Backoff())
    book = FleetBook(OWNER, _workloads(), lc)
    launcher = Launcher(executor, book, lc, clock)
    job = StretchJob(lc, store, executor, launcher, clock, DaemonMetrics(), owner=OWNER)

    job.restore()

    assert lc.called("restore_break_glass") == [(pytest.approx(6.0), [still_open])]


def test_a_partly_refused_terminate_records_the_instances_it_did_end() -> None:
    clock = ManualClock(T0)
    market = TinyMarket()
    cloud = SimCloud(market, clock, SimOptions())
    store = Store("sqlite://")
    ours = Executor(cloud, store, OWNER, clock, DaemonMetrics(), Backoff())
    theirs = Executor(cloud, Store("sqlite://"), "other", clock, DaemonMetrics(), Backoff())

    def launch(ex: Executor, owner: str, key: str) -> str:
        req = LaunchRequest(
            idempotency_key=key,
            pool_key=A,
            tier=Tier.SPOT,
            workload="sweeps",
            count=1,
            owner=owner,
            plan_generation=0,
        )
        result = ex.run(req)
        assert result is not None and result.ok
        return result.instance_ids[0]

    mine, foreign = launch(ours, OWNER, "sf-mine-1"), launch(theirs, "other", "sf-theirs-1")
    result = ours.run(
        TerminateRequest(idempotency_key="sf-end-1", instance_ids=[mine, foreign], owner=OWNER)
    )
    assert result is not None and not result.ok and result.error_kind is ErrorKind.INPUT
    assert result.instance_ids == (mine,)
    with store.transaction() as tx:
        assert mine not in {r.instance_id for r in tx.fleet(OWNER)}  # ended, and recorded so
    assert {i.instance_id for i in cloud.alive()} == {foreign}  # least privilege


def test_upkeep_launches_and_records_an_on_demand_open_for_a_waiting_deadline_job() -> None:
    # A rigid gang far behind its deadline with no spot in its only pool: the
    # lifecycle's deadline rule opens on-demand from tick (open_on_demand),
    # which the daemon launches, records with its stretch, and restores.
    ws = parse_workloads(
        {
            "workloads": [
                {
                    "name": "job",
                    "class": "training",
                    "instance_types": ["p3.2xlarge"],
                    "throughput": {"p3.2xlarge": 1.0},
                    "min_units": 1,
                    "max_units": 1,
                    "min_on_non_revocable": False,
                    "unit_hours": 10,
                    "deadline_hours": 11,
                }
            ]
        }
    )
    market = TinyMarket([A], share={A: 0.0})
    clock = ManualClock(T0)
    store = Store("sqlite://")
    cloud = SimCloud(market, clock, SimOptions())
    manager = LifecycleManager(ws, clock)
    manager.report_progress("job", 0.0)
    executor = Executor(cloud, store, OWNER, clock, DaemonMetrics(), Backoff())
    launcher = Launcher(executor, FleetBook(OWNER, ws, manager), manager, clock)
    job = StretchJob(manager, store, executor, launcher, clock, DaemonMetrics(), owner=OWNER)

    assert job.upkeep(clock.now(), (), market.snapshot(), 0) == 1

    (alive,) = cloud.alive()
    assert (alive.pool_key, alive.tier, alive.workload) == (A, Tier.ON_DEMAND, "job")
    with store.transaction() as tx:
        (rec,) = tx.decisions(OWNER, kinds=("open_on_demand",))
    assert rec.payload["stretch"] is not None and rec.break_glass_usd > 0
    fresh = LifecycleManager(ws, clock)
    StretchJob(fresh, store, executor, launcher, clock, DaemonMetrics(), owner=OWNER).restore()
    assert set(fresh.break_glass_stretches()) == {rec.payload["allocation_id"]}


def test_progress_charges_committed_usage_to_its_workload_and_tiers_per_day() -> None:
    # A workload's budgets count its committed usage (the plan's do); the
    # fleet's count commitments as bought (none configured here), once.
    lc = QuietLifecycle()
    job, _book = _plan_job(TinyMarket(), lc)
    job.refresh_market(None, force=True)
    fleet = [
        Instance(
            instance_id=f"i-{tier.value}",
            pool_key=A,
            tier=tier,
            workload="sweeps",
            state=InstanceState.RUNNING,
            units=1,
            launched_at=T0,
        )
        for tier in (Tier.COMMITTED, Tier.SPOT)
    ]
    start = job.track_progress(Progress(), fleet, T0)
    later = job.track_progress(start, fleet, T0 + timedelta(hours=2))
    day = T0.date().isoformat()
    assert later.spent_usd == {
        "sweeps": pytest.approx(2 * 2.0 + 2 * 1.0),  # committed $2/h, spot $1/h
        "": pytest.approx(2 * 1.0),
        f"spot@{day}": pytest.approx(2 * 1.0),
    }


class QuotaBound:
    """A cloud whose account quota refuses every launch into ``refused``."""

    def __init__(self, cloud: SimCloud, refused: str) -> None:
        self._cloud = cloud
        self._refused = refused

    def launch(self, request: LaunchRequest) -> Any:
        if request.pool_key == self._refused:
            raise QuotaExceededError("ec2:RunInstances: VcpuLimitExceeded: P vCPUs")
        return self._cloud.launch(request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cloud, name)


def test_a_launch_a_quota_refuses_moves_to_the_next_pool_and_is_recorded_as_quota() -> None:
    clock = ManualClock(T0)
    market = TinyMarket(spot_usd={A: 0.5})
    cloud = SimCloud(market, clock, SimOptions())
    store = Store("sqlite://")
    lc = PlacingLifecycle(_workloads(), clock, market.snapshot(T0))
    book = FleetBook(OWNER, _workloads(), lc)
    book.set_snapshot(market.snapshot(T0))
    metrics = DaemonMetrics()
    executor = Executor(QuotaBound(cloud, A), store, OWNER, clock, metrics, Backoff())
    launcher = Launcher(executor, book, lc, clock)
    req = LaunchRequest(
        idempotency_key="sf-quota-1",
        pool_key=A,
        tier=Tier.SPOT,
        workload="sweeps",
        count=2,
        owner=OWNER,
        plan_generation=0,
    )

    ids = launcher.launch(req, context={"source": "test"})

    assert ids is not None and len(ids) == 2
    assert {i.pool_key for i in cloud.alive()} == {B}
    assert book.is_unavailable(A, Tier.SPOT, clock.now())
    with store.transaction() as tx:
        first = tx.action("sf-quota-1")
    assert first is not None and first.status == "failed"
    assert first.result is not None and first.result["error_kind"] == ErrorKind.QUOTA
    assert metrics.value("spotfolio_actions_total", {"kind": "launch", "outcome": "quota"}) == 1
