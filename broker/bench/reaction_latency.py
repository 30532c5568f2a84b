"""Reaction benchmark (docs/docs/benchmarks.md): notice -> decision -> launch request.

Owns: ``run(*, storm, seed, repeats) -> dict``, called by the bench runner.

What it measures, in wall-clock time (``time.perf_counter``), with the
production ``Daemon``, its SQLite ``Store`` (a file in a temporary
directory, WAL, as deployed) and the ``LifecycleManager``, over the simulated
cloud (``sim`` from ``markets.registry``) on the default market's ``g5.xlarge``/``g6.xlarge`` AWS
pools (its own background revocations switched off, so only the notices sent
here arrive):

- origin: the moment the notices are in the queue, visible to the poller
  (the sim delivers a revocation's notice at once when its deadline is 120 s
  away), just before ``Daemon.poll_notices`` runs;
- ``decision_ms``: until the notice's decision and its launch actions are
  committed in the store (``Daemon.decisions_durable_at``);
- ``launch_request_ms``: until the decision's first replacement launch request
  reaches the provider (``Provider.launch`` is entered), for decisions that
  launch something;
- ``decision_from_poll_ms``: the daemon's own metric
  (``spotfolio_notice_to_decision_seconds``), from the poll that received
  the notice to its decision being durable.

Two settings. ``single``: one notice at a time, ``repeats`` times, 20
simulated minutes apart (so breakers close and budgets refill between them),
from a serving fleet of 40 spot instances spread over three zones. ``storm``:
a zone-wide revocation, ``storm`` spot instances of one pool taken back at the
same deadline; the poller receives 10 notices at a time, as SQS does,
gathers full receives into batches of up to 50 and handles them in order,
so a late notice's latency includes every notice before it. The serving
workload replaces on spot within the churn budget, then breaks glass to
on-demand (no dollar cap here, no fleet budget): every decision launches.

The daemon is brought up without a plan (market refreshed, fleet listed), so
nothing but the notice path runs. The simulated cloud answers in
microseconds, but its bookkeeping grows with the fleet: ``provider_s`` is the
time spent inside provider calls, to read the figures net of it. A real
``CreateFleet`` takes ~0.1-1 s per call, which this does not model (merged
launches keep a storm to a few dozen calls: one per pool per batch).

Must not: print, or touch anything outside its temporary directory.
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np
import pandas as pd

from broker.daemon.config import DaemonConfig
from broker.daemon.daemon import Daemon
from broker.daemon.metrics import DaemonMetrics
from broker.daemon.store.store import Store
from broker.daemon.wiring import default_lifecycle
from markets.clock import ManualClock
from markets.cloud_fleet import ActionResult, Instance, LaunchRequest, Notice, TerminateRequest
from markets.errors import CapacityUnavailableError
from markets.keys import PoolKey
from markets.model import PoolSnapshot, Tier
from markets.protocols import HistorySource, Provider
from markets.registry import open_market, open_provider
from markets.wrapped import AdjustedHistory
from policies.workloads.spec import parse_workloads

__all__ = ["SCHEMA", "TARGET_P99_MS", "run"]

R = TypeVar("R")

SCHEMA = "spotfolio.bench.reaction/1"
TARGET_P99_MS = 1000.0  # the target: p99 <= 1 s on SQLite
_TYPES = ("g5.xlarge", "g6.xlarge")
_NOTICE_S = 120.0  # AWS spot interruption warning
_SINGLE_FLEET = 40
_SINGLE_GAP_S = 1200.0


class _Counters(Protocol):
    duplicate_launches: int


@runtime_checkable
class _Chaos(Provider, Protocol):
    """What the benchmark asks of the simulated cloud beyond ``Provider``:
    revoke on demand, and count what was never acknowledged or launched twice."""

    counters: _Counters

    def revoke(self, instance_id: str, at: datetime) -> None: ...

    def unacked(self) -> int: ...


class _Timed:
    """The simulated cloud, recording when each launch request arrives and
    how long provider calls take."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.name = inner.name
        self.launch_at: dict[str, float] = {}
        self.provider_s = 0.0

    def _timed(self, call: Callable[[], R]) -> R:
        t = time.perf_counter()
        try:
            return call()
        finally:
            self.provider_s += time.perf_counter() - t

    def launch(self, request: LaunchRequest) -> ActionResult:
        self.launch_at.setdefault(request.idempotency_key, time.perf_counter())
        return self._timed(lambda: self.inner.launch(request))

    def terminate(self, request: TerminateRequest) -> ActionResult:
        return self._timed(lambda: self.inner.terminate(request))

    def list_fleet(self, owner: str) -> Sequence[Instance]:
        return self._timed(lambda: self.inner.list_fleet(owner))

    def poll_notices(self, max_notices: int = 10) -> Sequence[Notice]:
        return self._timed(lambda: self.inner.poll_notices(max_notices))

    def ack_notice(self, notice: Notice) -> None:
        self._timed(lambda: self.inner.ack_notice(notice))


class _Quiet(AdjustedHistory):
    """The default market without its own revocation events: only the
    benchmark's notices arrive (a ``HistorySource``, passed through)."""

    def revocation_events(self, pool: str, start: datetime, end: datetime) -> pd.DatetimeIndex:
        return pd.DatetimeIndex([], tz="UTC")


class _Rig:
    """Daemon, store, lifecycle and simulated cloud for one setting."""

    def __init__(self, directory: Path, market: HistorySource, seed: int) -> None:

        self.clock = ManualClock(market.span()[0])
        cloud = open_provider(
            "sim",
            market=market,
            clock=self.clock,
            notice_seconds=_NOTICE_S,
            seed=seed,
            state_change_notices=False,
            providers=("aws",),
        )
        if not isinstance(cloud, _Chaos):
            raise TypeError("the simulated cloud takes revocations and counts launches")
        self.cloud = cloud
        self.provider = _Timed(self.cloud)
        self.config = DaemonConfig.model_validate(
            {
                "owner": "bench",
                "store_url": f"sqlite:///{directory / 'state.db'}",
                "planner": "fast",
                "metrics_port": 0,
                "providers": ["aws"],
            }
        )
        self.workloads = parse_workloads(
            {
                "workloads": [
                    {
                        "name": "api",
                        "class": "serving",
                        "instance_types": list(_TYPES),
                        "throughput": {"g5.xlarge": 1.0, "g6.xlarge": 0.8},
                        "demand": {"base_units": 8, "peak_units": 8},
                    }
                ]
            }
        )
        self.store = Store(self.config.store_url)
        self.daemon = Daemon(
            self.config,
            self.provider,
            market,
            self.store,
            default_lifecycle(self.workloads, self.clock, self.config),
            self.clock,
            workloads=self.workloads,
            metrics=DaemonMetrics(),
            sleep=self._sleep,
        )
        d = self.daemon
        d.active = True  # no plan: the notice path alone
        d.refresh_market(force=True)
        assert d.snapshot is not None
        # Pools with spot capacity this hour (the sim grants spot at that share).
        hour = market.hourly(self.clock.now(), 1)
        share = dict(zip(hour["pool_key"], hour["spot_available"], strict=True))
        self.spot_pools = sorted(
            (
                p
                for p in d.snapshot.pools
                if p.spot_usd_per_hour is not None and share.get(p.pool.key, 0.0) >= 0.9
            ),
            key=lambda p: (p.spot_usd_per_hour or 0.0, p.pool.key),
        )

    def _sleep(self, seconds: float) -> None:
        self.clock.advance(seconds)  # backoff waits pass in simulated time

    def fleet(self, counts: dict[str, int]) -> list[str]:
        """Launch spot instances (pool -> count) and let the daemon list them."""

        ids: list[str] = []
        for i, (pool, n) in enumerate(sorted(counts.items())):
            for attempt in range(50):  # the sim grants spot at the hour's available share
                req = LaunchRequest(
                    idempotency_key=f"sf-bench-fleet-{i}-{attempt}",
                    pool_key=pool,
                    tier=Tier.SPOT,
                    workload="api",
                    count=n,
                    owner="bench",
                    plan_generation=0,
                )
                try:
                    ids += self.cloud.launch(req).instance_ids
                    break
                except CapacityUnavailableError:
                    continue
            else:
                raise RuntimeError(f"the simulated cloud never granted spot in {pool}")
        self.relist()
        return ids

    def relist(self) -> None:
        d = self.daemon
        d.book.view(self.provider, self.store, self.clock.now(), self.config.listing_grace_s)

    def revoke(self, ids: Sequence[str]) -> float:
        """Revoke ``ids`` (deadline in 120 s: their notices are visible now);
        returns the wall-clock origin."""
        deadline = self.clock.now() + timedelta(seconds=_NOTICE_S)
        for iid in ids:
            self.cloud.revoke(iid, deadline)
        return time.perf_counter()


def _pct(values_ms: Sequence[float]) -> dict[str, float | None]:
    if not values_ms:
        return {"p50": None, "p99": None}
    a = np.asarray(values_ms, dtype=float)
    return {
        "p50": round(float(np.percentile(a, 50)), 3),
        "p99": round(float(np.percentile(a, 99)), 3),
    }


def _collect(rig: _Rig, origin: float, first: int) -> tuple[list[float], list[float], Counter[str]]:
    """Latencies (ms) of the decisions durable since index ``first``."""
    d = rig.daemon
    new = list(d.decisions_durable_at)[first:]
    decision_ms = [(t - origin) * 1e3 for _, t in new]
    with rig.store.transaction() as tx:
        stored = tx.decisions_for_notices("bench", [nid for nid, _ in new])
    launch_ms: list[float] = []
    for rec in stored.values():
        keys = rec.payload.get("launch_keys") or []
        at = rig.provider.launch_at.get(keys[0]) if keys else None
        if at is not None:
            launch_ms.append((at - origin) * 1e3)
    return decision_ms, launch_ms, Counter(x.kind for x in stored.values())


def _single(directory: Path, market: HistorySource, repeats: int, seed: int) -> dict[str, Any]:
    rig = _Rig(directory, market, seed)
    zones: dict[str, PoolSnapshot] = {}
    for p in rig.spot_pools:  # the cheapest pool of each of three zones
        if p.pool.region == "us-east-1":
            zones.setdefault(p.pool.zone, p)
    pools = [p.pool.key for p in list(zones.values())[:3]]
    per = -(-_SINGLE_FLEET // len(pools))
    ids = rig.fleet(dict.fromkeys(pools, per))
    rng = np.random.default_rng(seed)
    victims = [str(x) for x in rng.choice(ids, size=min(repeats, len(ids)), replace=False)]
    decision_ms: list[float] = []
    launch_ms: list[float] = []
    kinds: Counter[str] = Counter()
    d = rig.daemon
    poll_from = len(d.decision_latencies_s)
    for iid in victims:
        first = len(d.decisions_durable_at)
        origin = rig.revoke([iid])
        d.poll_notices()
        dm, lm, k = _collect(rig, origin, first)
        decision_ms += dm
        launch_ms += lm
        kinds += k
        rig.clock.advance(_SINGLE_GAP_S)
        rig.relist()
    return {
        "notices": len(victims),
        "decision_ms": _pct(decision_ms),
        "launch_request_ms": _pct(launch_ms),
        "decision_from_poll_ms": _pct([x * 1e3 for x in list(d.decision_latencies_s)[poll_from:]]),
        "launch_requests": len(launch_ms),
        "decisions": dict(kinds),
    }


def _storm(directory: Path, market: HistorySource, n: int, seed: int) -> dict[str, Any]:
    rig = _Rig(directory, market, seed)
    pool = next(p.pool.key for p in rig.spot_pools if p.pool.region == "us-east-1")
    ids = rig.fleet({pool: n})
    d = rig.daemon
    provider_before = rig.provider.provider_s
    origin = rig.revoke(ids)
    d.poll_notices()
    total_s = time.perf_counter() - origin
    decision_ms, launch_ms, kinds = _collect(rig, origin, 0)
    return {
        "notices": n,
        "zone": PoolKey.parse(pool).zone,
        "decision_ms": _pct(decision_ms),
        "launch_request_ms": _pct(launch_ms),
        "decision_from_poll_ms": _pct([x * 1e3 for x in d.decision_latencies_s]),
        "launch_requests": len(launch_ms),
        "decisions": dict(kinds),
        "total_s": round(total_s, 3),
        "provider_s": round(rig.provider.provider_s - provider_before, 3),
        "unhandled_notices": rig.cloud.unacked(),
        "duplicate_launches": rig.cloud.counters.duplicate_launches,
    }


def run(*, storm: int = 1000, seed: int = 0, repeats: int = 20) -> dict[str, Any]:
    """Measure the reaction to one notice (``repeats`` times) and to a storm of
    ``storm`` notices (module docstring). ``storm=100`` runs in a few seconds."""

    if storm < 1 or repeats < 1:
        raise ValueError("storm and repeats are at least 1")
    t = time.perf_counter()
    default = open_market("default", instance_types=list(_TYPES), days=2)
    if not isinstance(default, HistorySource):
        raise TypeError("the default market has an hourly history")  # it does: a guard
    market = _Quiet(default)
    with tempfile.TemporaryDirectory(prefix="spotfolio-reaction-") as tmp:
        base = Path(tmp)
        (base / "single").mkdir()
        (base / "storm").mkdir()
        single = _single(base / "single", market, repeats, seed)
        burst = _storm(base / "storm", market, storm, seed)
    worst = [
        v
        for block in (single, burst)
        for key in ("decision_ms", "launch_request_ms")
        if (v := block[key]["p99"]) is not None
    ]
    return {
        "schema": SCHEMA,
        "store": "sqlite (file, WAL)",
        "provider": "sim",
        "seed": seed,
        "single": single,
        "storm": burst,
        "target_p99_ms": TARGET_P99_MS,
        "met": bool(worst) and max(worst) <= TARGET_P99_MS,
        "seconds": round(time.perf_counter() - t, 3),
    }
