"""A simulated cloud account: ``markets.protocols.Provider`` in accelerated time.

Owns: ``SimCloud`` and ``SimOptions``. Time is whatever the injected clock
says (a ``ManualClock`` the simulation moves); every call first catches the
account up to that time.

What it simulates, from a market (``HistorySource``):

- *Capacity*: a spot launch is granted with probability equal to the pool's
  ``spot_available`` share of the hour (``hourly()``); otherwise it raises
  ``CapacityUnavailableError``. On-demand and committed launches are granted.
- *Revocations*: the market's revocation events (``revocation_events(pool,
  start, end)`` where the market has them, as the default market does; else
  the hourly ``revocations`` counts placed at seeded random minutes) each take
  back one spot instance held in the pool, chosen at random. A notice is
  delivered ``notice_seconds`` before (AWS: 120 s, "best effort"), and a
  state-change notice when the instance is gone.
- *Notice queue* with SQS semantics: at-least-once (``duplicate_rate`` of the
  notices are delivered twice), optional reordering inside a batch, a
  visibility timeout after which an unacknowledged notice comes back.
- *Faults*: injected errors for the next calls (``inject``), a pool exhausted
  until a time (``exhaust``), random throttling (``throttle_rate``).
- *Idempotency*: a repeated key returns the same instances with
  ``replayed=True``; a key reused with other parameters fails, as AWS's
  ``IdempotentParameterMismatch`` does.
- *Accounting*: launches, replays, revocations; **duplicate launches**: a
  fresh launch that repeats an earlier fresh launch of the same (owner,
  workload, pool, tier, plan generation, count) from the same *visible*
  fleet size while the earlier one's instances are all still alive, which is
  what a retry that lost its idempotency key looks like; **orphans**: live
  instances that a given set of known ids (the store's) does not contain.
  Billing is per second at the hour's spot price, the pool's on-demand price,
  or its 1-year committed price, per hour bucket.

Must not: decide anything, or use the wall clock.
"""

from __future__ import annotations

import heapq
import math
import random
import zlib
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from markets.clock import Clock
from markets.errors import CapacityUnavailableError, InputError, SpotfolioError, ThrottledError
from markets.fleet import (
    GENERATION_TAG,
    OWNER_TAG,
    POOL_TAG,
    WORKLOAD_TAG,
    ActionResult,
    Instance,
    InstanceState,
    LaunchRequest,
    Notice,
    NoticeKind,
    TerminateRequest,
)
from markets.model import Tier

__all__ = ["SimCloud", "SimOptions"]

AWS_NOTICE_S = 120.0  # EC2 spot interruption warning: two minutes before


@dataclass(frozen=True)
class SimOptions:
    notice_seconds: float = AWS_NOTICE_S
    seed: int = 0
    duplicate_rate: float = 0.0  # share of notices delivered a second time
    reorder: bool = False  # shuffle every polled batch
    visibility_timeout_s: float = 30.0  # SQS default
    listing_lag_s: float = 0.0  # a new instance shows in list_fleet this late
    throttle_rate: float = 0.0  # share of mutating calls throttled
    state_change_notices: bool = True
    providers: tuple[str, ...] | None = None  # clouds it launches in (None: any pool)


@dataclass
class _Inst:
    inst: Instance
    usd_per_hour: float  # 0 for spot: billed at the hour's price
    ended_at: datetime | None = None
    revoke_at: datetime | None = None


@dataclass
class _Queued:
    notice: Notice
    visible_at: datetime
    deleted: bool = False


@dataclass
class _Intent:
    visible: int
    ids: tuple[str, ...]


@dataclass
class SimCounters:
    launch_requests: int = 0
    launches: int = 0  # fresh requests that created instances
    instances_launched: int = 0
    replays: int = 0
    duplicate_launches: int = 0
    revocations: int = 0
    notices_sent: int = 0
    throttled: int = 0
    capacity_refusals: int = 0
    terminations: int = 0
    by_tier: dict[str, int] = field(default_factory=lambda: defaultdict(int))


class SimCloud:
    """A simulated account over ``market`` (see the module docstring)."""

    name = "sim"

    def __init__(self, market: Any, clock: Clock, options: SimOptions | None = None) -> None:
        self.market = market
        self.clock = clock
        self.options = options or SimOptions()
        self.rng = random.Random(self.options.seed)
        self.counters = SimCounters()
        self._static = {p.pool.key: p for p in market.snapshot(clock.now()).pools}
        self._instances: dict[str, _Inst] = {}
        self._by_key: dict[str, tuple[LaunchRequest | TerminateRequest, tuple[str, ...]]] = {}
        self._intents: dict[tuple[Any, ...], _Intent] = {}
        self._queue: list[_Queued] = []
        self._by_receipt: dict[str | None, _Queued] = {}
        self._deleted = 0  # deleted messages still in _queue
        self._by_slot: dict[tuple[str, str, str, Tier], list[_Inst]] = {}
        # Indexes that keep every call from scanning the whole account: live
        # spot instances not yet doomed, per pool; doomed ones by revocation
        # time (a heap); launch order (what the account's listing follows).
        self._spot_held: dict[str, dict[str, _Inst]] = {}
        self._due: list[tuple[datetime, int, str]] = []
        self._order: dict[str, int] = {}
        self._next_event: dict[str, tuple[datetime, datetime | None]] = {}
        self._acked: set[str] = set()
        self._scanned: dict[str, datetime] = {}
        self._faults: dict[str, list[SpotfolioError]] = defaultdict(list)
        self._exhausted: dict[str, datetime] = {}
        self._hourly: dict[datetime, dict[str, tuple[float, float, int]]] = {}
        self._seq = 0

    # --- fault injection -------------------------------------------------------
    def inject(self, op: str, error: SpotfolioError, times: int = 1) -> None:
        """The next ``times`` calls of ``op`` (launch, terminate, list_fleet,
        poll_notices) raise ``error``."""
        self._faults[op].extend([error] * times)

    def exhaust(self, pool_key: str, until: datetime) -> None:
        """No capacity of any tier in ``pool_key`` before ``until``."""
        self._exhausted[pool_key] = until

    def _fault(self, op: str, mutating: bool) -> None:
        if self._faults[op]:
            err = self._faults[op].pop(0)
            if isinstance(err, ThrottledError):
                self.counters.throttled += 1
            raise err
        if (
            mutating
            and self.options.throttle_rate
            and self.rng.random() < self.options.throttle_rate
        ):
            self.counters.throttled += 1
            raise ThrottledError(f"sim: {op} throttled (RequestLimitExceeded)")

    # --- market access -----------------------------------------------------------
    def _hour(self, at: datetime) -> dict[str, tuple[float, float, int]]:
        """(spot $/h, spot available share, revocations) per pool for at's hour."""
        h = at.replace(minute=0, second=0, microsecond=0)
        if h not in self._hourly:
            if len(self._hourly) > 96:
                self._hourly.clear()
            span_end = self.market.span()[1]
            n = max(1, min(24, int((span_end - h).total_seconds() // 3600)))
            frame = self.market.hourly(h, n)
            for hour, rows in frame.groupby("hour"):
                self._hourly[hour.to_pydatetime()] = {
                    # No trace covering the hour (NaN): no evidence of a shortage.
                    str(k): (float(s), 1.0 if math.isnan(a) else float(a), int(r))
                    for k, s, a, r in zip(
                        rows["pool_key"],
                        rows["spot_usd_per_hour"],
                        rows["spot_available"],
                        rows["revocations"],
                        strict=True,
                    )
                }
        return self._hourly.get(h, {})

    def _spot_price(self, pool_key: str, at: datetime) -> float:
        price = self._hour(at).get(pool_key, (math.nan, 0.0, 0))[0]
        if not math.isfinite(price):
            price = self._static[pool_key].spot_usd_per_hour or 0.0
        return price

    def _events(self, pool_key: str, start: datetime, end: datetime) -> list[datetime]:
        if end <= start:
            return []
        events = getattr(self.market, "revocation_events", None)
        if events is not None:
            return [t.to_pydatetime(warn=False) for t in events(pool_key, start, end)]
        out: list[datetime] = []
        h = start.replace(minute=0, second=0, microsecond=0)
        while h < end:
            n = self._hour(h).get(pool_key, (0.0, 0.0, 0))[2]
            r = random.Random(
                zlib.crc32(f"{self.options.seed}|{pool_key}|{h.isoformat()}".encode())
            )
            out += [h + timedelta(seconds=r.uniform(0, 3600)) for _ in range(n)]
            h += timedelta(hours=1)
        return sorted(t for t in out if start <= t < end)

    # --- time ----------------------------------------------------------------
    def _advance(self) -> None:
        now = self.clock.now()
        # Events up to and including now + notice (the scan is half-open).
        horizon = now + timedelta(seconds=self.options.notice_seconds, microseconds=1)
        for pool, by_id in list(self._spot_held.items()):
            if not by_id:
                continue
            held = list(by_id.values())  # launch order, as the account lists them
            first = min(s.inst.launched_at for s in held)
            start = max(self._scanned.get(pool, first), first)
            for t in self._events(pool, start, horizon):
                victims = [s for s in held if s.revoke_at is None and s.inst.launched_at <= t]
                if victims:
                    self._doom(self.rng.choice(victims), t)
            self._scanned[pool] = horizon
        due: list[_Inst] = []
        while self._due and self._due[0][0] <= now:
            t, _order, iid = heapq.heappop(self._due)
            s = self._instances[iid]
            if s.ended_at is None and s.revoke_at == t:  # else terminated meanwhile
                due.append(s)
        for s in sorted(due, key=lambda x: self._order[x.inst.instance_id]):
            assert s.revoke_at is not None
            self._end(s, s.revoke_at)
            self.counters.revocations += 1

    def _doom(self, s: _Inst, t: datetime) -> None:
        s.revoke_at = t
        iid = s.inst.instance_id
        self._spot_held.get(s.inst.pool_key, {}).pop(iid, None)
        heapq.heappush(self._due, (t, self._order[iid], iid))
        at = max(s.inst.launched_at, t - timedelta(seconds=self.options.notice_seconds))
        self._send(NoticeKind.INTERRUPTION, s.inst, at, deadline=t)

    def _end(self, s: _Inst, at: datetime) -> None:
        s.ended_at = at
        self._spot_held.get(s.inst.pool_key, {}).pop(s.inst.instance_id, None)
        s.inst = s.inst.model_copy(update={"state": InstanceState.TERMINATED})
        if self.options.state_change_notices:
            self._send(NoticeKind.STATE_CHANGE, s.inst, at, state=InstanceState.TERMINATED)

    def _send(
        self,
        kind: NoticeKind,
        inst: Instance,
        at: datetime,
        *,
        deadline: datetime | None = None,
        state: InstanceState | None = None,
    ) -> None:
        self._seq += 1
        nid = f"sim-{kind.value}-{self._seq:08d}"
        n = Notice(
            notice_id=nid,
            kind=kind,
            instance_id=inst.instance_id,
            at=at,
            deadline=deadline,
            pool_key=inst.pool_key,
            state=state,
        )
        self.counters.notices_sent += 1
        copies = 2 if self.rng.random() < self.options.duplicate_rate else 1
        for c in range(copies):
            delay = timedelta(seconds=self.rng.uniform(0, 20) if c else 0.0)
            receipt = f"{nid}#{c}"
            q = _Queued(n.model_copy(update={"receipt": receipt}), at + delay)
            self._queue.append(q)
            self._by_receipt[receipt] = q

    def revoke(self, instance_id: str, at: datetime) -> None:
        """Take ``instance_id`` back at ``at``, with its notice (chaos and tests)."""
        self._advance()
        s = self._instances[instance_id]
        if s.ended_at is None and s.revoke_at is None:
            self._doom(s, at)

    def next_event_at(self) -> datetime | None:
        """Earliest future time something happens (a notice becomes visible, an
        instance is revoked, an unseen revocation's notice is due): lets a
        simulation jump straight there."""
        now = self.clock.now()
        times = [q.visible_at for q in self._queue if not q.deleted and q.visible_at > now]
        times += [
            t
            for t, _, iid in self._due
            if self._instances[iid].ended_at is None and self._instances[iid].revoke_at == t
        ]
        notice = timedelta(seconds=self.options.notice_seconds)
        for pool in [p for p, held in self._spot_held.items() if held]:
            start = self._scanned.get(pool, now)
            cached = self._next_event.get(pool)
            if cached is None or cached[0] != start:  # a scan moved on: look again
                ev = self._events(pool, start, start + timedelta(days=1))
                cached = self._next_event[pool] = (start, ev[0] if ev else None)
            if cached[1] is not None:
                times.append(max(cached[1] - notice, now))
        future = [t for t in times if t > now]
        return min(future) if future else None

    # --- Provider --------------------------------------------------------------
    def list_fleet(self, owner: str) -> Sequence[Instance]:
        self._advance()
        self._fault("list_fleet", False)
        seen = self.clock.now() - timedelta(seconds=self.options.listing_lag_s)
        return [
            s.inst
            for s in self._instances.values()
            if s.ended_at is None
            and s.inst.tags.get(OWNER_TAG) == owner
            and s.inst.launched_at <= seen
        ]

    def _visible(self, req: LaunchRequest) -> int:
        seen = self.clock.now() - timedelta(seconds=self.options.listing_lag_s)
        slot = (req.owner, req.workload, req.pool_key, req.tier)
        return sum(
            1
            for s in self._by_slot.get(slot, ())
            if s.ended_at is None and s.inst.launched_at <= seen
        )

    def launch(self, request: LaunchRequest) -> ActionResult:
        self._advance()
        self.counters.launch_requests += 1
        self._fault("launch", True)
        key = request.idempotency_key
        if key in self._by_key:
            return self._replay(request)
        now = self.clock.now()
        pool = request.pool_key
        providers = self.options.providers
        if pool not in self._static or (
            providers is not None and pool.split("/", 1)[0] not in providers
        ):
            where = "" if providers is None else f" in {', '.join(providers)}"
            raise InputError(
                "launch", "pool_key", f"a pool of the simulated market{where}", got=pool
            )
        if pool in self._exhausted and now < self._exhausted[pool]:
            self.counters.capacity_refusals += 1
            raise CapacityUnavailableError(f"sim: {pool} exhausted", pool_key=pool)
        snap = self._static[pool]
        if request.tier is Tier.SPOT:
            share = self._hour(now).get(pool, (0.0, 1.0, 0))[1]
            if snap.spot_usd_per_hour is None or not self.rng.random() < share:
                self.counters.capacity_refusals += 1
                raise CapacityUnavailableError(
                    f"sim: no spot capacity in {pool} (InsufficientInstanceCapacity)", pool_key=pool
                )
            usd = 0.0
        elif request.tier is Tier.COMMITTED:
            usd = snap.committed_1y_usd_per_hour or snap.on_demand_usd_per_hour
        else:
            usd = snap.on_demand_usd_per_hour
        self._check_duplicate(request)
        ids = []
        for _ in range(request.count):
            self._seq += 1
            iid = f"i-sim{self._seq:012x}"
            tags = {
                OWNER_TAG: request.owner,
                WORKLOAD_TAG: request.workload,
                POOL_TAG: pool,
                GENERATION_TAG: str(request.plan_generation),
            }
            inst = Instance(
                instance_id=iid,
                pool_key=pool,
                tier=request.tier,
                workload=request.workload,
                state=InstanceState.RUNNING,
                units=snap.instance.units,
                launched_at=now,
                tags=tags,
            )
            self._instances[iid] = rec = _Inst(inst, usd)
            self._order[iid] = len(self._order)
            if request.tier is Tier.SPOT:
                self._spot_held.setdefault(pool, {})[iid] = rec
            # Indexed by (owner, workload, pool, tier): a storm's launches
            # would otherwise scan the whole account each.
            slot = (request.owner, request.workload, pool, request.tier)
            self._by_slot.setdefault(slot, []).append(rec)
            ids.append(iid)
        self._by_key[key] = (request, tuple(ids))
        self._intents[self._intent_key(request)] = _Intent(self._visible(request), tuple(ids))
        self.counters.launches += 1
        self.counters.instances_launched += len(ids)
        self.counters.by_tier[request.tier.value] += len(ids)
        return ActionResult(idempotency_key=key, ok=True, instance_ids=tuple(ids))

    @staticmethod
    def _intent_key(r: LaunchRequest) -> tuple[Any, ...]:
        return (r.owner, r.workload, r.pool_key, r.tier, r.plan_generation, r.count)

    def _check_duplicate(self, r: LaunchRequest) -> None:
        prev = self._intents.get(self._intent_key(r))
        if prev is None:
            return
        alive = all(self._instances[i].ended_at is None for i in prev.ids)
        # ``_visible`` now already counts prev's instances once the lag passed;
        # a real retry without the key sees the fleet as it was before them.
        before = self._visible(r) - sum(1 for i in prev.ids if self._is_visible(i))
        if alive and before == prev.visible:
            self.counters.duplicate_launches += 1

    def _is_visible(self, iid: str) -> bool:
        seen = self.clock.now() - timedelta(seconds=self.options.listing_lag_s)
        return self._instances[iid].inst.launched_at <= seen

    def _replay(self, request: LaunchRequest | TerminateRequest) -> ActionResult:
        first, ids = self._by_key[request.idempotency_key]
        if first != request:
            return ActionResult(
                idempotency_key=request.idempotency_key,
                ok=False,
                error="IdempotentParameterMismatch: key reused with other parameters",
                error_kind="input",
            )
        self.counters.replays += 1
        return ActionResult(
            idempotency_key=request.idempotency_key, ok=True, instance_ids=ids, replayed=True
        )

    def terminate(self, request: TerminateRequest) -> ActionResult:
        self._advance()
        self._fault("terminate", True)
        if request.idempotency_key in self._by_key:
            return self._replay(request)
        ended: list[str] = []
        for iid in request.instance_ids:
            s = self._instances.get(iid)
            if s is None or s.inst.tags.get(OWNER_TAG) != request.owner:
                return ActionResult(
                    idempotency_key=request.idempotency_key,
                    ok=False,
                    error=f"{iid} does not carry {OWNER_TAG}={request.owner}",
                    error_kind="auth",
                )
        now = self.clock.now()
        for iid in request.instance_ids:
            s = self._instances[iid]
            if s.ended_at is None:
                s.revoke_at = None
                self._end(s, now)
                ended.append(iid)
        self.counters.terminations += len(ended)
        self._by_key[request.idempotency_key] = (request, tuple(ended))
        return ActionResult(
            idempotency_key=request.idempotency_key, ok=True, instance_ids=tuple(ended)
        )

    def poll_notices(self, max_notices: int = 10) -> Sequence[Notice]:
        self._advance()
        self._fault("poll_notices", False)
        now = self.clock.now()
        if len(self._queue) > 256 and self._deleted * 2 > len(self._queue):
            # Acknowledged messages are gone for good (their ids stay in _acked).
            self._queue = [q for q in self._queue if not q.deleted]
            self._deleted = 0
        # == sorted(...)[:max_notices], without sorting the whole queue
        ready = heapq.nsmallest(
            max_notices,
            (q for q in self._queue if not q.deleted and q.visible_at <= now),
            key=lambda q: q.visible_at,
        )
        for q in ready:  # in flight until acknowledged or the timeout passes
            q.visible_at = now + timedelta(seconds=self.options.visibility_timeout_s)
        batch = [q.notice for q in ready]
        if self.options.reorder:
            self.rng.shuffle(batch)
        return batch

    def ack_notice(self, notice: Notice) -> None:
        self._acked.add(notice.notice_id)
        q = self._by_receipt.pop(notice.receipt, None)
        if q is not None and not q.deleted:
            q.deleted = True
            self._deleted += 1

    # --- what happened ---------------------------------------------------------------
    def alive(self) -> list[Instance]:
        return [s.inst for s in self._instances.values() if s.ended_at is None]

    def orphaned(self, known_ids: set[str]) -> list[str]:
        """Live instances that ``known_ids`` (the store's fleet) does not contain."""
        return sorted(
            s.inst.instance_id
            for s in self._instances.values()
            if s.ended_at is None and s.inst.instance_id not in known_ids
        )

    def unacked(self, kinds: Sequence[NoticeKind] = tuple(NoticeKind)) -> int:
        """Notices of ``kinds`` already due that no copy of was acknowledged."""
        now = self.clock.now()
        due = {
            q.notice.notice_id for q in self._queue if q.notice.kind in kinds and q.notice.at <= now
        }
        return len(due - self._acked)

    def hourly_cost_usd(
        self, start: datetime, hours: int
    ) -> tuple[np.ndarray[Any, np.dtype[np.float64]], dict[str, float]]:
        """Dollars billed in each hour of ``hours`` from ``start`` (per second),
        and the total by tier."""
        out = np.zeros(hours)
        by_tier = {t.value: 0.0 for t in Tier}
        end_all = self.clock.now()
        for s in self._instances.values():
            a, b = s.inst.launched_at, s.ended_at or end_all
            while a < b:
                h = a.replace(minute=0, second=0, microsecond=0)
                nxt = min(b, h + timedelta(hours=1))
                i = int((h - start).total_seconds() // 3600)
                rate = s.usd_per_hour
                if s.inst.tier is Tier.SPOT:
                    rate = self._spot_price(s.inst.pool_key, h)
                if 0 <= i < hours:
                    usd = rate * (nxt - a).total_seconds() / 3600.0
                    out[i] += usd
                    by_tier[s.inst.tier.value] += usd
                a = nxt
        return out, by_tier

    def cost_rate_usd_per_hour(self) -> dict[str, float]:
        """What the live fleet costs per hour now, by tier."""
        now = self.clock.now()
        out = {t.value: 0.0 for t in Tier}
        for s in self._instances.values():
            if s.ended_at is None:
                rate = s.usd_per_hour
                if s.inst.tier is Tier.SPOT:
                    rate = self._spot_price(s.inst.pool_key, now)
                out[s.inst.tier.value] += rate
        return out
