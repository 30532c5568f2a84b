"""What the market does to the simulated account over time: capacity,
prices and revocations.

Owns: ``SimEvents`` (part of ``SimCloud``): the hour's spot price, spot
available share (what a spot launch is granted with) and revocation count per
pool, read from the market and cached; revocation times (the market's
``revocation_events`` where it has them, else the hourly counts placed at
seeded random minutes); ``_advance``, which every call runs first: each
revocation up to now + the notice window dooms a random spot instance held in
the pool and sends its interruption notice, and doomed instances whose time
has come end (with a state-change notice); rebalance recommendations
(below); ``revoke`` (chaos and tests) and ``next_event_at`` (what lets a
simulation jump ahead).

Rebalance recommendations, a stated model (``SimOptions.rebalance_*``;
off unless ``rebalance_coverage`` > 0). AWS says the signal marks an
elevated risk of interruption, can come sooner than the two-minute notice,
sometimes only with it, and is sent on a best-effort basis; it publishes no
shares (EC2 User Guide, "EC2 instance rebalance recommendations"), so these
are ours: a share ``rebalance_coverage`` of the revocations is preceded by a
recommendation for the same instance, uniformly 0 to ``rebalance_lead_s``
before its interruption notice; for each such one, ``(1 - p) / p`` false
alarms on average (``p = rebalance_precision``: the share of all
recommendations that precede a revocation) go at the same moment to other
spot instances held in the same pool, which are not revoked for it. The
victim of a revocation is then chosen when its recommendation is due, up to
``rebalance_lead_s`` early.

Must not: launch or terminate on a caller's behalf, decide anything, or use
the wall clock.
"""

from __future__ import annotations

import functools
import heapq
import math
import random
import zlib
from datetime import datetime, timedelta
from typing import cast

import pandas as pd

from markets.cloud_fleet import InstanceState, NoticeKind
from markets.protocols import RevocationSource
from markets.sim.core import _Inst
from markets.sim.queue import NoticeQueue

__all__ = ["SimEvents"]


class SimEvents(NoticeQueue):
    """Capacity, prices and revocations over time (see the module docstring)."""

    # --- market access -----------------------------------------------------------
    @functools.cached_property
    def _replays_revocations(self) -> bool:
        # Asked once: a protocol isinstance costs ~0.5 ms on Python 3.11, and
        # the scan asks for events tens of thousands of times a simulated day.
        return isinstance(self.market, RevocationSource)

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
                assert isinstance(hour, pd.Timestamp)  # the "hour" column's type
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
        if self._replays_revocations:  # the default and replay markets
            found = cast(RevocationSource, self.market).revocation_events(pool_key, start, end)
            return list(found.to_pydatetime()) if len(found) else []
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
        # Events up to and including now + the lead (the scan is half-open).
        horizon = now + timedelta(seconds=self._lead_s(), microseconds=1)
        for pool, by_id in list(self._spot_held.items()):
            if not by_id:
                continue
            held = list(by_id.values())  # launch order, as the account lists them
            first = min(s.inst.launched_at for s in held)
            start = max(self._scanned.get(pool, first), first)
            for t in self._events(pool, start, horizon):
                victims = [s for s in held if s.revoke_at is None and s.inst.launched_at <= t]
                if victims:
                    victim = self.rng.choice(victims)
                    self._doom(victim, t)
                    self._recommend(victim, held, t)
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

    def _lead_s(self) -> float:
        """How far ahead of a revocation its first notice can come."""
        o = self.options
        return o.notice_seconds + (o.rebalance_lead_s if o.rebalance_coverage > 0 else 0.0)

    def _recommend(self, victim: _Inst, held: list[_Inst], t: datetime) -> None:
        """The rebalance model (module docstring) for ``victim``'s revocation at ``t``."""
        o = self.options
        if o.rebalance_coverage <= 0 or not self.rng.random() < o.rebalance_coverage:
            return
        lead = timedelta(seconds=o.notice_seconds + self.rng.uniform(0.0, o.rebalance_lead_s))
        at = max(victim.inst.launched_at, t - lead)
        self._send(NoticeKind.REBALANCE, victim.inst, at)
        victim.rebalanced_at.append(at)
        false_per_true = (1.0 - o.rebalance_precision) / max(o.rebalance_precision, 1e-9)
        n = int(false_per_true) + int(self.rng.random() < false_per_true - int(false_per_true))
        others = [s for s in held if s.revoke_at is None and s.inst.launched_at <= at]
        for s in self.rng.sample(others, min(n, len(others))):
            self._send(NoticeKind.REBALANCE, s.inst, at)
            s.rebalanced_at.append(at)

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
        notice = timedelta(seconds=self._lead_s())
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
