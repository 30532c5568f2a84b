"""The simulated cloud's account API: the instances a caller launches,
lists and terminates.

Owns: ``SimAccount`` (part of ``SimCloud``): ``launch`` (spot granted with the
hour's available share, on-demand and committed always; a pool exhausted by
``exhaust`` refuses every tier), ``terminate`` (only instances carrying the
caller's owner tag; the others are refused while the rest end, as on AWS and
GCP), ``list_fleet`` (new instances show after
``listing_lag_s``), idempotency (a repeated key replays its answer; a key
reused with other parameters fails as AWS's ``IdempotentParameterMismatch``
does) and the duplicate-launch count.

Must not: decide anything, or use the wall clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from markets.cloud_fleet import (
    GENERATION_TAG,
    OWNER_TAG,
    POOL_TAG,
    WORKLOAD_TAG,
    ActionResult,
    ErrorKind,
    Instance,
    InstanceState,
    LaunchRequest,
    TerminateRequest,
)
from markets.errors import CapacityUnavailableError, InputError
from markets.model import Tier
from markets.sim.core import IntentKey, _Inst, _Intent
from markets.sim.events import SimEvents

__all__ = ["SimAccount"]


class SimAccount(SimEvents):
    """Launch, list and terminate (see the module docstring)."""

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
    def _intent_key(r: LaunchRequest) -> IntentKey:
        return (r.owner, r.workload, r.pool_key, r.tier, r.plan_generation, r.count)

    def _check_duplicate(self, r: LaunchRequest) -> None:
        prev = self._intents.get(self._intent_key(r))
        if prev is None:
            return
        alive = all(self._instances[i].ended_at is None for i in prev.ids)
        # ``_visible`` now already counts prev's instances once the lag passed;
        # a real retry without the key sees the fleet as it was before them.
        before = self._visible(r) - sum(1 for i in prev.ids if self._is_visible(i))
        if alive and before == prev.visible and not self._loss_since(r, prev.ids):
            self.counters.duplicate_launches += 1

    def _loss_since(self, r: LaunchRequest, ids: tuple[str, ...]) -> bool:
        """Whether the caller has been told of a loss in ``r``'s workload since
        the launch of ``ids``: an instance of it ended, or its interruption
        notice or a rebalance recommendation for it went out. A second launch
        of the same shape is then a replacement the notice asked for, not a
        retry that lost its key."""
        t1 = max(self._instances[i].inst.launched_at for i in ids)
        now, lead = self.clock.now(), timedelta(seconds=self.options.notice_seconds)
        for (owner, workload, _pool, _tier), recs in self._by_slot.items():
            if owner != r.owner or workload != r.workload:
                continue
            for s in recs:
                if s.ended_at is not None and s.ended_at > t1:
                    return True
                if s.revoke_at is not None:
                    told = max(s.inst.launched_at, s.revoke_at - lead)  # as ``_doom`` sends it
                    if t1 < told <= now:
                        return True
                if any(t1 < told <= now for told in s.rebalanced_at):
                    return True
        return False

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
                error_kind=ErrorKind.INPUT,
            )
        self.counters.replays += 1
        return ActionResult(
            idempotency_key=request.idempotency_key, ok=True, instance_ids=ids, replayed=True
        )

    def terminate(self, request: TerminateRequest) -> ActionResult:
        """End the requested instances that carry the caller's owner tag, as
        the AWS and GCP providers do: the others are refused (``ok=False``,
        ``ErrorKind.INPUT``, their ids in ``error``) while these still end.
        Ids already ended, or that the account never had, count as ended. A
        fully accepted request's key replays its answer; a partly refused one
        is not remembered, so a repeat is judged again (and refused again)."""
        self._advance()
        self._fault("terminate", True)
        if request.idempotency_key in self._by_key:
            return self._replay(request)
        ids = list(dict.fromkeys(request.instance_ids))
        refused = [
            iid
            for iid in ids
            if (s := self._instances.get(iid)) is not None
            and s.inst.tags.get(OWNER_TAG) != request.owner
        ]
        now = self.clock.now()
        ended: list[str] = []
        for iid in ids:
            if iid in refused:
                continue
            ended.append(iid)
            s = self._instances.get(iid)
            if s is not None and s.ended_at is None:
                s.revoke_at = None
                s.terminated = True
                self._end(s, now)
                self.counters.terminations += 1
        if refused:
            return ActionResult(
                idempotency_key=request.idempotency_key,
                ok=False,
                instance_ids=tuple(ended),
                error=f"refused {len(refused)} instance(s) without {OWNER_TAG}={request.owner}: "
                + ", ".join(refused),
                error_kind=ErrorKind.INPUT,
            )
        self._by_key[request.idempotency_key] = (request, tuple(ended))
        return ActionResult(
            idempotency_key=request.idempotency_key, ok=True, instance_ids=tuple(ended)
        )
