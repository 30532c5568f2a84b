"""The daemon over the simulated cloud: start-up, crashes, notice storms,
throttling and capacity, the lease, dry runs, metrics, and a simulated month."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from broker.daemon.config import DaemonConfig, Intervals
from broker.daemon.daemon import Daemon, LeaseHeldError
from broker.daemon.metrics import DaemonMetrics
from broker.daemon.store.store import Store
from broker.daemon.wiring import default_lifecycle
from markets.clock import ManualClock
from markets.cloud_fleet import ActionResult, Instance, LaunchRequest, Notice, TerminateRequest
from markets.errors import ThrottledError
from markets.model import Tier
from markets.sim.cloud import SimCloud, SimOptions
from policies.workloads.spec import WorkloadSet, parse_workloads
from tests.fakes.tiny_market import T0, TinyMarket, pool_key

A, B, C = pool_key("a"), pool_key("b"), pool_key("c")


def _workloads(**fleet: Any) -> WorkloadSet:
    data = {
        "budget_usd_per_hour": 40.0,
        "break_glass_cap_usd": 30.0,
        "workloads": [
            {
                "name": "api",
                "class": "serving",
                "instance_types": ["p3.2xlarge"],
                "throughput": {"p3.2xlarge": 1.0},
                "demand": {"base_units": 6, "peak_units": 6},
                "max_spot_share": 0.5,
            },
            {
                "name": "sweeps",
                "class": "batch",
                "instance_types": ["p3.2xlarge"],
                "throughput": {"p3.2xlarge": 1.0},
                "unit_hours": 2000,
                "deadline_hours": 500,
                "max_units": 6,
            },
        ],
    }
    data.update(fleet)
    return parse_workloads(data)


def _config(tmp_path: Path, **kw: Any) -> DaemonConfig:
    base: dict[str, Any] = {
        "owner": "me",
        "store_url": f"sqlite:///{tmp_path / 'state.db'}",
        "planner": "fast",
        "metrics_port": 0,
    }
    return DaemonConfig.model_validate(base | kw)


class World:
    """One simulated account: clock, cloud, store; daemons come and go."""

    def __init__(self, tmp_path: Path, market: TinyMarket | None = None, **opts: Any) -> None:
        self.clock = ManualClock(T0)
        self.market = market or TinyMarket()
        self.cloud = SimCloud(self.market, self.clock, SimOptions(**opts))
        self.config = _config(tmp_path)
        self.store = Store(self.config.store_url)
        self.workloads = _workloads()
        self.sleeps: list[float] = []

    def daemon(self, provider: Any = None, **kw: Any) -> Daemon:
        def sleep(s: float) -> None:
            self.sleeps.append(s)
            self.clock.advance(s)

        return Daemon(
            self.config,
            provider or self.cloud,
            self.market,
            self.store,
            default_lifecycle(self.workloads, self.clock, self.config),
            self.clock,
            workloads=self.workloads,
            metrics=DaemonMetrics(),
            sleep=sleep,
            **kw,
        )

    def slots(self) -> Counter[tuple[str, str, str]]:
        return Counter((i.workload, i.pool_key, i.tier.value) for i in self.cloud.alive())

    def known(self) -> set[str]:
        with self.store.transaction() as tx:
            return tx.known_instance_ids("me")


def test_start_reaches_the_plan_and_a_second_reconcile_changes_nothing(tmp_path: Path) -> None:
    w = World(tmp_path)
    d = w.daemon()
    d.start()
    want = d.desired(w.clock.now())
    assert sum(want.values()) > 0
    assert w.slots() == Counter(want)
    assert d.reconcile() == []
    assert w.cloud.counters.duplicate_launches == 0 and w.cloud.orphaned(w.known()) == []
    # the serving workload keeps its non-revocable half on-demand
    api = {tier: n for (wl, _, tier), n in want.items() if wl == "api"}
    assert api.get("on_demand", 0) >= 3


class Crash(BaseException):
    """The process dies here (BaseException: no job boundary catches it)."""


class CrashingProvider:
    """Delegates to the sim; dies at the ``at``-th mutating call, before or
    after the cloud carried it out."""

    name = "sim"

    def __init__(self, inner: SimCloud, at: int, when: str) -> None:
        self.inner, self.at, self.when, self.calls = inner, at, when, 0

    def _mutate(self, fn: Any, req: Any) -> ActionResult:
        self.calls += 1
        if self.calls == self.at and self.when == "before":
            raise Crash
        res: ActionResult = fn(req)
        if self.calls == self.at and self.when == "after":
            raise Crash
        return res

    def launch(self, request: LaunchRequest) -> ActionResult:
        return self._mutate(self.inner.launch, request)

    def terminate(self, request: TerminateRequest) -> ActionResult:
        return self._mutate(self.inner.terminate, request)

    def list_fleet(self, owner: str) -> Sequence[Instance]:
        return self.inner.list_fleet(owner)

    def poll_notices(self, max_notices: int = 10) -> Sequence[Notice]:
        return self.inner.poll_notices(max_notices)

    def ack_notice(self, notice: Notice) -> None:
        self.inner.ack_notice(notice)


# EC2's listing is eventually consistent: a just-launched instance may not be
# listed yet when a restarted daemon looks (here: for a minute, longer than the
# lease takes to expire), so only the store's write-ahead record prevents a
# second launch.
LAG_S = 60.0


def _clean_run(tmp_path: Path) -> tuple[Counter[tuple[str, str, str]], int]:
    w = World(tmp_path / "clean", listing_lag_s=LAG_S)
    probe = CrashingProvider(w.cloud, at=0, when="never")
    w.daemon(provider=probe).start()
    return w.slots(), probe.calls


@pytest.mark.parametrize("when", ["before", "after"])
def test_killed_at_every_call_of_a_reconcile_the_restart_launches_nothing_twice(
    tmp_path: Path, when: str
) -> None:
    (tmp_path / "clean").mkdir()
    expected, calls = _clean_run(tmp_path)
    assert calls >= 3
    for k in range(1, calls + 1):
        run = tmp_path / f"{when}-{k}"
        run.mkdir()
        w = World(run, listing_lag_s=LAG_S)
        with pytest.raises(Crash):
            w.daemon(provider=CrashingProvider(w.cloud, at=k, when=when)).start()
        # the dead daemon's lease runs out; a new process starts
        w.clock.advance(w.config.lease_ttl_s + 1)
        w.daemon().start()
        assert w.cloud.counters.duplicate_launches == 0, f"call {k}"
        assert w.cloud.orphaned(w.known()) == [], f"call {k}"
        assert w.slots() == expected, f"call {k}"
        with w.store.transaction() as tx:
            assert tx.count_actions("me", "pending") == 0


def test_killed_while_terminating_the_restart_finishes_the_job(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.daemon().start()
    before = sum(w.slots().values())
    # the plan shrinks to nothing: every instance must go
    w.workloads = _workloads(budget_usd_per_hour=None)
    w.workloads = parse_workloads(
        {
            "workloads": [
                {
                    "name": "other",
                    "class": "batch",
                    "instance_types": ["p3.2xlarge"],
                    "unit_hours": 1,
                    "deadline_hours": 100000,
                    "max_units": 1,
                },
            ]
        }
    )
    w.clock.advance(w.config.lease_ttl_s + 1)
    with pytest.raises(Crash):
        w.daemon(provider=CrashingProvider(w.cloud, at=2, when="after")).start()
    w.clock.advance(w.config.lease_ttl_s + 1)
    w.daemon().start()
    left = {k for k in w.slots() if k[0] in ("api", "sweeps")}
    assert before > 0 and left == set()
    assert w.cloud.orphaned(w.known()) == []


def test_a_storm_of_duplicated_reordered_notices_gets_one_decision_each(tmp_path: Path) -> None:
    n = 500  # each delivered twice: 1,000 notices, shuffled in every batch
    keys = [pool_key(z) for z in "abcdef"]
    w = World(
        tmp_path,
        TinyMarket(keys),
        duplicate_rate=1.0,
        reorder=True,
        state_change_notices=False,
    )
    w.workloads = parse_workloads(
        {
            "workloads": [
                {
                    "name": "sweeps",
                    "class": "batch",
                    "instance_types": ["p3.2xlarge"],
                    "unit_hours": 100000,
                    "deadline_hours": 100000,
                    "max_units": 2 * n,
                },
            ]
        }
    )
    fleet = w.cloud.launch(
        LaunchRequest(
            idempotency_key="sf-storm-fleet",
            pool_key=A,
            tier=Tier.SPOT,
            workload="sweeps",
            count=n,
            owner="me",
            plan_generation=0,
        )
    ).instance_ids
    d = w.daemon()
    d.active = True
    d.refresh_market(force=True)
    d.book.view(w.cloud, w.store, w.clock.now(), 0.0)
    deadline = w.clock.now() + timedelta(seconds=120)
    for iid in fleet:
        w.cloud.revoke(iid, deadline)
    t = time.perf_counter()
    while w.cloud.unacked():
        assert d.poll_notices() > 0
        w.clock.advance(5)
    elapsed = time.perf_counter() - t
    with w.store.transaction() as tx:
        decisions = [x for x in tx.decisions("me") if x.notice_id]
        launches = tx.count_actions("me")
    ids = [x.notice_id for x in decisions]
    assert len(ids) == n and len(set(ids)) == n
    assert w.cloud.counters.duplicate_launches == 0
    assert w.cloud.counters.launches == launches + 1  # + the fleet made above
    assert d.window_missed == 0
    lat = sorted(d.decision_latencies_s)
    p99 = lat[int(0.99 * (len(lat) - 1))]
    print(f"storm: {n} notices x2 in {elapsed:.2f} s, decision p99 {p99 * 1e3:.1f} ms")


def test_throttling_backs_off_and_a_refusing_pool_hands_over_to_the_next(tmp_path: Path) -> None:
    # A is the cheapest spot pool, so the plan wants it first; it has nothing.
    w = World(tmp_path, TinyMarket(spot_usd={A: 0.5}))
    w.cloud.exhaust(A, until=T0 + timedelta(days=1))
    w.cloud.inject("launch", ThrottledError("RequestLimitExceeded"), times=2)
    d = w.daemon()
    d.start()
    assert len(w.sleeps) == 2
    b = w.config.backoff
    assert all(0 <= s <= min(b.cap_s, b.base_s * 2**i) for i, s in enumerate(w.sleeps))
    assert (
        d.metrics.value("spotfolio_actions_total", {"kind": "launch", "outcome": "throttled"}) == 2
    )
    assert (
        d.metrics.value("spotfolio_actions_total", {"kind": "launch", "outcome": "capacity"}) >= 1
    )
    slots = w.slots()
    assert all(pool != A for (_, pool, _) in slots)
    units: Counter[str] = Counter()
    for (wl, _, _), k in slots.items():
        units[wl] += k
    planned: Counter[str] = Counter()
    for (wl, _, _), k in d.desired(w.clock.now()).items():
        planned[wl] += k
    assert units == planned and units["api"] >= 6


def test_a_second_daemon_refuses_to_run_while_the_first_holds_the_lease(tmp_path: Path) -> None:
    w = World(tmp_path)
    first = w.daemon()
    first.start()
    with pytest.raises(LeaseHeldError, match="held by"):
        w.daemon().start()
    first.stop()
    w.daemon().start()


def test_a_dry_run_prints_actions_and_calls_nothing_mutating(tmp_path: Path) -> None:
    w = World(tmp_path)
    seen: list[Any] = []
    d = w.daemon(dry_run=True, announce=seen.append)
    d.start()
    assert seen and all(isinstance(r, LaunchRequest) for r in seen)
    assert w.cloud.counters.launch_requests == 0 and w.cloud.alive() == []
    with w.store.transaction() as tx:
        assert tx.count_actions("me") == 0 and tx.lease_holder("account/default", T0) is None


def test_metrics_follow_the_fleet(tmp_path: Path) -> None:
    w = World(tmp_path)
    d = w.daemon()
    d.start()
    rates = w.cloud.cost_rate_usd_per_hour()
    for tier, capacity_type in (("spot", "spot"), ("on_demand", "on-demand")):
        got = d.metrics.value("spotfolio_cost_rate_usd_per_hour", {"capacity_type": capacity_type})
        assert got == pytest.approx(rates[tier])
    units: Counter[str] = Counter()
    for i in w.cloud.alive():
        units[i.tier.value] += i.units
    share = units["spot"] / sum(units.values())
    assert d.metrics.value("spotfolio_spot_share_ratio") == pytest.approx(share)
    assert d.metrics.value("spotfolio_plan_generation") == 1
    assert d.metrics.value("spotfolio_lease_held") == 1


def test_a_revocation_in_a_simulated_day_is_decided_inside_its_window(tmp_path: Path) -> None:
    from broker.daemon.accelerated import simulate_daemon

    events = {B: [T0 + timedelta(hours=h, minutes=17) for h in (2, 5, 9)]}
    cfg = _config(tmp_path, intervals=Intervals(reconcile_s=600))
    report = simulate_daemon(cfg, TinyMarket(events=events), hours=12, workloads=_workloads())
    out = report.to_dict()
    assert out["duplicate_launches"] == 0 and out["orphaned_instances"] == 0
    assert out["unhandled_notices"] == 0 and out["decisions_after_deadline"] == 0
    assert out["budget_exceeded"] is False
    acted = sum(out["decisions"][k] for k in ("shrink", "replace", "break_glass"))
    assert acted + out["decisions"].get("checkpoint_only", 0) == out["revocations"] > 0


def test_the_cli_prints_the_simulation_schema(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from broker.cli import main

    assert main(["daemon", "--provider", "sim", "--hours", "24", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in (
        "revocations",
        "unhandled_notices",
        "duplicate_launches",
        "orphaned_instances",
        "budget_exceeded",
        "cost_usd",
    ):
        assert key in out
    assert set(out["decisions"]) >= {"shrink", "replace", "break_glass"}
    assert set(out["decision_latency_ms"]) == {"p50", "p99"}
    assert out["cost_usd"] > 0
    assert main(["daemon"]) == 2
    assert main(["daemon", "--provider", "aws", "--hours", "2"]) == 2


@pytest.mark.slow
def test_a_simulated_month_keeps_the_budget_and_the_break_glass_cap() -> None:
    """30 days over the default market with duplicated, reordered notices and
    throttling (~2 min: one re-plan and snapshot per simulated hour)."""
    from broker.daemon.accelerated import simulate_daemon
    from markets.registry import open_market

    ws = parse_workloads(
        {
            "budget_usd_per_hour": 60,
            "break_glass_cap_usd": 400,
            "workloads": [
                {
                    "name": "api",
                    "class": "serving",
                    "instance_types": ["g5.xlarge", "g6.xlarge"],
                    "throughput": {"g5.xlarge": 1.0, "g6.xlarge": 0.8},
                    "demand": {
                        "base_units": 8,
                        "peak_units": 16,
                        "peak_start_hour": 9,
                        "peak_end_hour": 21,
                    },
                },
                {
                    "name": "sweeps",
                    "class": "batch",
                    "instance_types": ["p3.2xlarge", "p3.8xlarge"],
                    "throughput": {"p3.2xlarge": 1.0, "p3.8xlarge": 1.0},
                    "unit_hours": 3000,
                    "deadline_hours": 720,
                    "max_units": 12,
                },
            ],
        }
    )
    market = open_market("default", instance_types=ws.instance_types(), days=40)
    cfg = DaemonConfig.model_validate(
        {
            "owner": "sim",
            "store_url": "sqlite://",
            "planner": "fast",
            "metrics_port": 0,
            "intervals": {"refresh_market_s": 3600, "replan_s": 3600, "reconcile_s": 3600},
            "sim": {"duplicate_rate": 0.2, "reorder": True, "throttle_rate": 0.02, "seed": 3},
        }
    )
    out = simulate_daemon(cfg, market, hours=720, workloads=ws).to_dict()  # type: ignore[arg-type]
    assert out["revocations"] > 0 and out["counters"]["throttled"] > 0
    assert out["duplicate_launches"] == 0 and out["orphaned_instances"] == 0
    assert out["unhandled_notices"] == 0 and out["decisions_after_deadline"] == 0
    assert out["budget_exceeded"] is False and out["break_glass_cap_exceeded"] is False
    assert out["cost_usd"] > 0


def test_a_provider_the_registry_does_not_know_is_refused_naming_the_field(
    tmp_path: Path,
) -> None:
    from broker.daemon.config import load_daemon_config
    from markets.errors import InputError

    path = tmp_path / "daemon.yaml"
    path.write_text("owner: me\nprovider: azure\n")
    with pytest.raises(InputError) as e:
        load_daemon_config(path)
    msg = str(e.value)
    assert "daemon.yaml" in msg and "provider" in msg and "aws, gcp" in msg and "sim" in msg
    path.write_text("owner: me\nprovider: AWS\n")  # names are case-insensitive
    assert load_daemon_config(path).provider == "aws"


def test_a_market_refresh_with_spot_back_replans_a_plan_made_without_it(tmp_path: Path) -> None:
    # No pool offers spot at the start: the plan puts everything on
    # on-demand. The next market refresh offers spot again: the daemon
    # replans and reconciles then (broker.daemon.plan_job.spot_returned), not at
    # the next hourly plan.
    keys = (pool_key("a"), pool_key("b"), pool_key("c"))
    market = TinyMarket(keys, share=dict.fromkeys(keys, 0.0))
    w = World(tmp_path, market)
    d = w.daemon()
    d.start()
    before = d.state.generation
    assert all(tier == "on_demand" for (_, _, tier) in w.slots())
    market.share = dict.fromkeys(keys, 1.0)
    w.clock.advance(d.config.intervals.refresh_market_s + 1)
    d.refresh_market()
    assert d.state.generation == before + 1
    assert any(tier == "spot" for (_, _, tier) in w.slots())
    # the same market again: no pool offers spot it did not, no replan
    generation = d.state.generation
    w.clock.advance(d.config.intervals.refresh_market_s + 1)
    d.refresh_market()
    assert d.state.generation == generation
