"""The lease: one daemon acts at a time, even when many start at once, and a
holder paused past a takeover writes and calls nothing (the fencing epoch)."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import select

from broker.daemon.config import load_daemon_config
from broker.daemon.daemon import Daemon, LeaseHeldError
from broker.daemon.metrics import DaemonMetrics
from broker.daemon.store.schema import actions_t, decisions_t, lease_t, plans_t
from broker.daemon.store.store import Fence, LeaseLostError, Store
from broker.daemon.wiring import default_lifecycle
from markets.cloud_fleet import ActionResult, Instance, LaunchRequest, Notice, TerminateRequest
from markets.errors import InputError
from markets.model import Tier
from markets.sim.cloud import SimCloud, SimOptions
from tests.fakes.tiny_market import T0, TinyMarket
from tests.unit.broker.daemon.test_daemon import World, _config, _workloads

# --- the configuration --------------------------------------------------------------


@pytest.mark.parametrize(("renew", "ttl"), [(15, 30), (30, 30), (45, 30), (1, 1.5)])
def test_the_lease_must_be_renewed_at_least_twice_per_ttl(
    tmp_path: Path, renew: float, ttl: float, capsys: pytest.CaptureFixture[str]
) -> None:
    from broker.cli import main

    cfg = tmp_path / "daemon.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "owner": "me",
                "lease_ttl_s": ttl,
                "intervals": {"lease_renew_s": renew},
                "store_url": f"sqlite:///{tmp_path / 'state.db'}",
                "metrics_port": 0,
            }
        )
    )
    with pytest.raises(InputError, match=r"intervals\.lease_renew_s.*half of lease_ttl_s"):
        load_daemon_config(cfg)
    assert main(["daemon", "--config", str(cfg), "--once"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(cfg) in err and "lease_renew_s" in err
    assert not (tmp_path / "state.db").exists()
    cfg.write_text(
        yaml.safe_dump(
            {"owner": "me", "lease_ttl_s": renew * 2 + 1, "intervals": {"lease_renew_s": renew}}
        )
    )
    assert load_daemon_config(cfg).intervals.lease_renew_s == renew


# --- a paused holder ---------------------------------------------------------------


def _rows(store: Store) -> dict[str, int]:
    with store.transaction() as tx:
        return {
            t.name: len(tx.conn.execute(select(t)).all()) for t in (actions_t, plans_t, decisions_t)
        }


def test_a_paused_holder_resumed_after_a_takeover_mutates_nothing_and_records_no_plan(
    tmp_path: Path,
) -> None:
    """The holder pauses in the middle of a plan's solve (a long GC, a
    stopped VM) past its TTL; another daemon takes over. Resumed, the first
    finishes its solve: it records no plan, and every other job of it (the
    notices, reconcile, upkeep, the renewal) writes and calls nothing."""
    w = World(tmp_path)
    first = w.daemon()
    first.start()
    holder = first.fence.epoch
    second: list[Daemon] = []
    propose = first.planner.propose

    def paused_propose(*args: Any, **kw: Any) -> Any:
        out = propose(*args, **kw)
        w.clock.advance(w.config.lease_ttl_s + 1)  # the pause: no renewal
        second.append(w.daemon())
        second[0].start()  # the takeover
        return out

    first.planner.propose = paused_propose  # type: ignore[method-assign]
    rows = _rows(w.store)
    with pytest.raises(LeaseLostError, match="no longer ours"):
        first.replan()
    assert second and second[0].fence.epoch == (holder or 0) + 1
    rows_after_takeover = _rows(w.store)
    # The second kept the plan in force (it is fresh); the first's solve is lost.
    assert rows_after_takeover == rows
    with w.store.transaction() as tx:
        plans = tx.conn.execute(select(plans_t.c.lease_epoch)).scalars().all()
    assert plans == [holder]
    # Work for the first: a revocation, and a plan that wants another fleet.
    victim = next(i for i in w.cloud.alive() if i.tier is Tier.SPOT)
    w.cloud.revoke(victim.instance_id, w.clock.now() + timedelta(seconds=120))
    calls = (w.cloud.counters.launch_requests, w.cloud.counters.terminations)
    for job in (first.reconcile, first.poll_notices):
        with pytest.raises(LeaseLostError):
            job()
    first.upkeep()  # no stretch is due: nothing to write, nothing written
    with pytest.raises(LeaseHeldError, match="lost the lease"):
        first.renew_lease()
    first.guarded("reconcile", first.reconcile)()  # the job boundary stops it
    assert not first.active and first.stopped.is_set()
    assert _rows(w.store) == rows_after_takeover
    assert (w.cloud.counters.launch_requests, w.cloud.counters.terminations) == calls
    with w.store.transaction() as tx:
        (row,) = tx.conn.execute(select(lease_t)).all()
    assert row.holder == second[0].holder and row.epoch == second[0].fence.epoch
    # The new holder still sees and decides the notice the first one left.
    w.clock.advance(60)
    while second[0].poll_notices():
        pass
    with w.store.transaction() as tx:
        decided = tx.decisions("me")
    assert any(d.notice_id for d in decided)
    assert {d for (d,) in tx_epochs(w.store, decisions_t)} == {second[0].fence.epoch}


def tx_epochs(store: Store, table: Any) -> list[tuple[int | None]]:
    with store.transaction() as tx:
        return [(r[0],) for r in tx.conn.execute(select(table.c.lease_epoch)).all()]


# --- a hold taken after a wait for the store ------------------------------------------


def _held_from_and_release(
    store: Store, fenced: Store, clock: _RealRate, ttl_s: float, extend: Callable[[], None]
) -> tuple[datetime, datetime]:
    """``extend`` the lease while a fenced transaction holds its row (the
    row lock on PostgreSQL, the write lock on SQLite) for 0.8 s: (when the
    lease's new TTL counts from, when that transaction let go)."""
    inside, released = threading.Event(), []

    def block() -> None:
        with fenced.transaction():
            inside.set()
            time.sleep(0.8)
            released.append(clock.now())

    t = threading.Thread(target=block)
    t.start()
    inside.wait(10)
    extend()
    t.join()
    with store.transaction() as tx:
        expires = tx.conn.execute(select(lease_t.c.expires_at)).scalar_one()
    held_from = expires.replace(tzinfo=None) - timedelta(seconds=ttl_s)
    return held_from, released[0].replace(tzinfo=None)


def test_a_hold_counts_its_ttl_from_when_the_lease_row_is_ours_not_from_the_wait(
    store_url: str,
) -> None:
    """Before each cloud call the holder extends its lease. With many
    daemons queued on the store the extension can wait for the lock; a time
    read before that wait would end the hold early by the wait (CI at stop 25:
    a 1 s TTL shortened to 48 ms, and a second daemon's call overlapped the
    first's). The hold runs from the moment the row is locked: ``ttl_s``
    after the blocking transaction let go, at least."""
    clock = _RealRate()
    store = Store(store_url)
    with store.transaction() as tx:
        epoch = tx.acquire_lease("account/x", "a", 2.0, clock.now())
    fenced = store.fenced(Fence("account/x", "a", 2.0, epoch))
    held_from, released = _held_from_and_release(
        store, fenced, clock, 2.0, lambda: fenced.hold_lease(clock.now)
    )
    store.close()
    assert held_from >= released, (held_from, released)


def test_a_renewal_counts_its_ttl_from_when_the_lease_row_is_ours(
    tmp_path: Path, store_url: str
) -> None:
    """The renewer's extension waits, on PostgreSQL, for the row lock a
    fenced transaction of the same daemon holds (``Tx.check_lease``: ``FOR
    UPDATE`` until commit); on SQLite for the write lock. It too counts the
    TTL from the moment the row is its own, not from before the wait."""
    clock = _RealRate()
    market = TinyMarket()
    config = _config(tmp_path, store_url=store_url)
    store = Store(store_url)
    workloads = _workloads()
    d = Daemon(
        config,
        SimCloud(market, clock, SimOptions()),  # type: ignore[arg-type]
        market,
        store,
        default_lifecycle(workloads, clock, config),  # type: ignore[arg-type]
        clock,  # type: ignore[arg-type]
        workloads=workloads,
        metrics=DaemonMetrics(),
        holder="d0",
    )
    d.start()
    held_from, released = _held_from_and_release(
        store, d.fenced_store, clock, config.lease_ttl_s, d.renew_lease
    )
    d.stop()
    store.close()
    assert held_from >= released, (held_from, released)


# --- many daemons starting at once -----------------------------------------------------


class _RealRate:
    """Account time at the real rate from ``T0``, one for every daemon."""

    def __init__(self) -> None:
        self._t0 = time.monotonic()

    def now(self) -> datetime:
        return T0 + timedelta(seconds=time.monotonic() - self._t0)


@dataclass(frozen=True)
class _Call:
    daemon: int
    start: float
    end: float


class _SlowCloud:
    """One simulated account shared by every daemon (calls serialised by a
    lock); each mutating call takes ``latency_s`` (a start-up of a few calls
    outlasts the TTL) and is recorded with the daemon that made it."""

    name = "sim"

    def __init__(self, inner: SimCloud, latency_s: float) -> None:
        self.inner, self.latency_s = inner, latency_s
        self.lock = threading.Lock()
        self.calls: list[_Call] = []

    def for_daemon(self, n: int) -> _Caller:
        return _Caller(self, n)


class _Caller:
    name = "sim"

    def __init__(self, cloud: _SlowCloud, n: int) -> None:
        self.cloud, self.n = cloud, n

    def _mutate(self, fn: Any, req: Any) -> ActionResult:
        t = time.monotonic()
        time.sleep(self.cloud.latency_s)
        with self.cloud.lock:
            res: ActionResult = fn(req)
            self.cloud.calls.append(_Call(self.n, t, time.monotonic()))
        return res

    def launch(self, request: LaunchRequest) -> ActionResult:
        return self._mutate(self.cloud.inner.launch, request)

    def terminate(self, request: TerminateRequest) -> ActionResult:
        return self._mutate(self.cloud.inner.terminate, request)

    def list_fleet(self, owner: str) -> Sequence[Instance]:
        with self.cloud.lock:
            return self.cloud.inner.list_fleet(owner)

    def poll_notices(self, max_notices: int = 10) -> Sequence[Notice]:
        with self.cloud.lock:
            return self.cloud.inner.poll_notices(max_notices)

    def ack_notice(self, notice: Notice) -> None:
        with self.cloud.lock:
            self.cloud.inner.ack_notice(notice)


STARTS = 50
TTL_S, RENEW_S, LATENCY_S = 1.0, 0.2, 0.25
RETRY_FOR_S = 3.0  # each loser retries (a supervisor restarting it) this long


def test_fifty_simultaneous_starts_never_let_two_daemons_mutate(
    tmp_path: Path, store_url: str
) -> None:
    """50 daemons (threads, each with its own engine) start at once against
    one store and one account; the losers keep retrying for 3 s. A start-up
    takes ~2 s of slow cloud calls, twice the 1 s TTL: without renewal during
    start-up a loser takes the lease over mid-start-up and both launch. The
    oracle is the account's own record of who called: the calls of two
    daemons never interleave, and every row the store holds carries the
    epoch of one acquisition, in order."""
    clock = _RealRate()
    market = TinyMarket()
    cloud = _SlowCloud(SimCloud(market, clock, SimOptions()), LATENCY_S)  # type: ignore[arg-type]
    config = _config(
        tmp_path, store_url=store_url, lease_ttl_s=TTL_S, intervals={"lease_renew_s": RENEW_S}
    )
    Store(store_url).close()  # the schema, once (create_all is not concurrent-safe)
    workloads = _workloads()
    stores = [Store(store_url, create=False) for _ in range(STARTS)]
    daemons = [
        Daemon(
            config,
            cloud.for_daemon(n),
            market,
            stores[n],
            default_lifecycle(workloads, clock, config),  # type: ignore[arg-type]
            clock,  # type: ignore[arg-type]
            workloads=workloads,
            metrics=DaemonMetrics(),
            holder=f"d{n}",
            renew_in_background=True,
        )
        for n in range(STARTS)
    ]
    barrier = threading.Barrier(STARTS)
    started: list[int] = []
    lost: list[int] = []
    errors: list[BaseException] = []

    def run(n: int) -> None:
        d = daemons[n]
        barrier.wait()
        until = time.monotonic() + RETRY_FOR_S
        while True:
            try:
                d.start()
                started.append(n)
                return
            except LeaseHeldError:
                if time.monotonic() > until:
                    return
                time.sleep(0.05)
            except LeaseLostError:
                lost.append(n)
                return
            except BaseException as e:  # reported below
                errors.append(e)
                return

    threads = [threading.Thread(target=run, args=(n,)) for n in range(STARTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    for n in started:
        daemons[n].reconcile()  # still the holder after the losers gave up
    for d in daemons:
        d.stop()
    for s in stores:
        s.close()
    assert not errors, errors[:3]
    assert started, "nobody started"
    calls = sorted(cloud.calls, key=lambda c: c.start)
    assert calls
    # Who called, in order: once a daemon's calls stop, it never calls again
    # (A, B, A would be two daemons acting at once).
    order = [k for k, _ in itertools.groupby(c.daemon for c in calls)]
    assert len(order) == len(set(order)), order
    for a, b in itertools.pairwise(calls):
        if a.daemon != b.daemon:
            assert a.end <= b.start + 1e-3, (a, b)  # no overlap across daemons
    store = Store(store_url, create=False)
    with store.transaction() as tx:
        for table in (actions_t, plans_t, decisions_t):
            epochs = (
                tx.conn.execute(select(table.c.lease_epoch).order_by(table.c.id)).scalars().all()
            )
            assert epochs == sorted(epochs), table.name  # no stale epoch after a newer one
            assert None not in epochs
    store.close()
    print(f"starts={STARTS} started={len(started)} lost={len(lost)} mutated={len(order)}")
