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
  fleet size while the earlier one's instances are all still alive and no
  loss in the workload (an interruption notice sent, an instance ended) came
  between, which is what a retry that lost its idempotency key looks like (two
  notices' replacements landing in one pool are not); **orphans**: live
  instances that a given set of known ids (the store's) does not contain.
  Billing is per second at the hour's spot price, the pool's on-demand price,
  or its 1-year committed price, per hour bucket. **Endings** per workload
  (``endings``): instances the caller terminated (by tier) beside those the
  cloud revoked, and the hours the workload held any instance: what a
  caller's own disruption is measured against.

Modules: ``markets.sim.core`` (options, the account's state, faults),
``markets.sim.queue`` (the notice queue), ``markets.sim.events``
(capacity, prices, revocations over time), ``markets.sim.account``
(launch, list, terminate); this one puts them together as ``SimCloud`` and
owns the accounting of what happened (alive, orphans, bills). Import
``SimCloud`` and ``SimOptions`` from here.

Must not: decide anything, or use the wall clock.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
import numpy.typing as npt

from markets.cloud_fleet import Instance
from markets.model import Tier
from markets.sim.account import SimAccount
from markets.sim.core import SimOptions

__all__ = ["Endings", "SimCloud", "SimOptions"]


@dataclass
class Endings:
    """How one workload's instances ended within a span of hours."""

    terminated_by_tier: dict[str, int] = field(default_factory=dict)  # by the caller
    revoked: int = 0  # taken back by the cloud
    hours_live: int = 0  # hours in which the workload held any instance
    hours_terminating: int = 0  # hours in which the caller ended one of them

    @property
    def terminated(self) -> int:
        return sum(self.terminated_by_tier.values())


class SimCloud(SimAccount):
    """A simulated account over ``market`` (see the module docstring)."""

    name = "sim"

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

    def endings(self, start: datetime, hours: int) -> dict[str, Endings]:
        """Per workload, how its instances ended in the ``hours`` from
        ``start`` (see ``Endings``); instances still alive count only in
        ``hours_live``."""
        end_all = min(self.clock.now(), start + timedelta(hours=hours))
        live: dict[str, set[int]] = defaultdict(set)
        ending: dict[str, set[int]] = defaultdict(set)
        out: dict[str, Endings] = {}
        for s in self._instances.values():
            w = s.inst.workload
            e = out.setdefault(w, Endings())
            a, b = max(s.inst.launched_at, start), min(s.ended_at or end_all, end_all)
            first = int((a - start).total_seconds() // 3600)
            last = int(((b - start).total_seconds() - 1e-6) // 3600)
            live[w].update(range(max(first, 0), min(last, hours - 1) + 1))
            if s.ended_at is None or not start <= s.ended_at < start + timedelta(hours=hours):
                continue
            if s.terminated:
                tier = s.inst.tier.value
                e.terminated_by_tier[tier] = e.terminated_by_tier.get(tier, 0) + 1
                ending[w].add(int((s.ended_at - start).total_seconds() // 3600))
            else:
                e.revoked += 1
        for w, e in out.items():
            e.hours_live, e.hours_terminating = len(live[w]), len(ending[w])
        return out

    def hourly_cost_usd(
        self, start: datetime, hours: int
    ) -> tuple[npt.NDArray[np.float64], dict[str, float]]:
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
