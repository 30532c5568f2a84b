"""Break-glass stretches: on-demand capacity standing in for lost spot, paid
for out of the break-glass dollar cap.

Owns ``Stretch`` and ``BreakGlassBook``: opening a stretch only when its
estimated extra dollars, ``(on-demand - spot) x hours until calm``, fit what is
left of the cap (``policies.breakglass.BreakGlassLedger``); and, on each tick,
one step per stretch:

- back to spot when a spot pool passes the filters and the hysteresis says go
  (minimum dwell, ``return_dwell_s``; savings x expected spot lifetime >
  switching cost); a serving return keeps its on-demand until the spot is
  ready (``overlap_s``, charged to the cap at the on-demand price);
- otherwise, ``return_lead_s`` before its committed dollars run out, extend it
  by ``break_glass_min_hours`` if the cap can pay, else go back to spot early,
  else end it (the capacity is left unmet: the cap is a hard limit).

Settling a stretch charges the dollars it actually spent and releases the rest
of its commitment, so the cap bounds real extra spend as long as ticks come
more often than ``return_lead_s``.

Must not: choose pools (the manager passes the spot target it found), read a
clock, or do I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from broker.lifecycle.values import LifecycleConfig, ReturnKind
from broker.lifecycle.view import Candidate
from policies.breakglass import BreakGlassLedger, return_to_spot_verdict
from policies.workloads.spec import Workload, WorkloadClass

__all__ = [
    "BreakGlassBook",
    "Step",
    "Stretch",
    "overlap_s",
    "return_dwell_s",
    "stretch_from_record",
    "stretch_record",
]


@dataclass(slots=True)
class Stretch:
    """One break-glass stretch (``alloc_id`` is the notice id that opened it)."""

    alloc_id: str
    workload: str
    pool_key: str  # the on-demand pool
    count: int
    work_per_hour: float
    on_demand_usd_per_hour: float  # per instance
    extra_usd_per_hour: float  # over the spot it stands in for
    started_s: float
    expires_s: float  # when its committed dollars run out
    steps: int = 0
    # On-demand it took back instead of launching (an earlier return retired
    # it while its spot warmed up): what its own return retires, as it
    # retires the on-demand a stretch launched.
    kept: tuple[str, ...] = ()


_FIELDS = tuple(f.name for f in fields(Stretch))


def overlap_s(w: Workload) -> float:
    """Seconds a return of ``w`` keeps its on-demand beside the spot it
    returns to: a serving replica's warm-up (make before break), else none."""
    return w.restart_minutes * 60.0 if w.workload_class is WorkloadClass.SERVING else 0.0


def return_dwell_s(w: Workload, config: LifecycleConfig) -> float:
    """Seconds a stretch of ``w`` stays on on-demand before a return to spot
    is weighed at all.

    A return of training or batch stalls the work for a restart (and a
    checkpoint), so flapping back at the first quiet minute costs work: the
    config's floor ``return_min_dwell_s`` holds, or the job's own dwell if
    longer. A serving return stalls nothing: the on-demand serves until the
    spot is ready (``overlap_s``), so what a return that is revoked soon
    after costs is that overlap, which the verdict already weighs as the
    switching cost against savings x the pool's expected lifetime (and the
    breakers keep it off pools that keep revoking). Holding serving capacity
    on on-demand for the floor only delays the saving: measured on the fleet
    bench (``spotfolio simulate --setting fleet``, seed 0, 5 windows per
    group) the 1800 s floor cost 0.0047 x on-demand over no floor, for 0.02 %
    of availability."""
    own_s = w.min_dwell_minutes * 60.0
    if w.workload_class is WorkloadClass.SERVING:
        return own_s
    return max(config.return_min_dwell_s, own_s)


def stretch_record(s: Stretch) -> dict[str, object]:
    """``s`` as JSON-ready fields (the daemon stores it with its decisions)."""
    out: dict[str, object] = {name: getattr(s, name) for name in _FIELDS}
    out["kept"] = list(s.kept)
    return out


def stretch_from_record(r: Mapping[str, Any]) -> Stretch:
    """The inverse of ``stretch_record`` (extra keys such as ``open_usd`` are ignored).

    ``r`` comes back from JSON (``json.loads``, the store's SQLAlchemy JSON
    column), whose values are typed Any; ``Stretch`` checks nothing more.
    A record from before ``kept`` existed kept nothing."""
    fields_ = {name: r[name] for name in _FIELDS if name != "kept"}
    return Stretch(**fields_, kept=tuple(r.get("kept") or ()))


@dataclass(frozen=True, slots=True)
class Step:
    kind: ReturnKind
    reason: str
    committed_usd: float = 0.0
    spent_usd: float = 0.0
    released_usd: float = 0.0


class BreakGlassBook:
    """Open stretches and the ledger that pays for them."""

    def __init__(self, cap_usd: float | None, config: LifecycleConfig) -> None:
        self.ledger = BreakGlassLedger(cap_usd)
        self.config = config
        self.stretches: dict[str, Stretch] = {}
        # After a restart: no return is weighed before this (see ``resume``).
        self.resumed_hold_until_s = float("-inf")

    def open(
        self,
        alloc_id: str,
        workload: str,
        od: Candidate,
        count: int,
        *,
        work_per_hour: float,
        lost_spot_usd_per_hour: float,
        hours: float,
        now_s: float,
        kept: tuple[str, ...] = (),
    ) -> float | str:
        """Commit the stretch's estimated extra dollars; return them, or why
        not. ``kept``: the on-demand instances it takes back (none launched)."""
        cap = self.ledger.cap_usd
        if cap == 0:
            return "break-glass is disabled (cap $0)"
        extra = max(0.0, count * od.on_demand_usd_per_hour - lost_spot_usd_per_hour)
        usd = extra * hours
        if not self.ledger.try_commit(alloc_id, usd):
            return (
                f"break-glass needs ${usd:,.0f} ({hours:.1f} h at ${extra:,.2f}/h over spot) "
                f"but ${self.ledger.remaining_usd:,.0f} of the ${cap:,.0f} cap is left"
            )
        self.stretches[alloc_id] = Stretch(
            alloc_id=alloc_id,
            workload=workload,
            pool_key=od.pool_key,
            count=count,
            work_per_hour=work_per_hour,
            on_demand_usd_per_hour=od.on_demand_usd_per_hour,
            extra_usd_per_hour=extra,
            started_s=now_s,
            expires_s=now_s + hours * 3600.0,
            kept=kept,
        )
        return usd

    def resume(self, stretches: Sequence[Stretch], now_s: float, forgotten_s: float) -> None:
        """Take back ``stretches`` open before a restart at ``now_s``.

        What kept them on on-demand was partly in memory: the pools that
        refused capacity, marked for ``forgotten_s`` (the manager's unavailable
        book, ``markets.ttl.UNAVAILABLE_OFFERING_TTL_S``), and those marks are
        gone. A return weighed at once would try a pool that refused a minute
        ago, a decision the restart made and the first process would not have:
        none is weighed until the marks would have run out. (Training and batch
        are held longer by the dwell floor anyway; a serving stretch has none.)"""
        for s in stretches:
            self.stretches[s.alloc_id] = s
        if stretches:
            self.resumed_hold_until_s = now_s + forgotten_s

    def cancel(self, alloc_id: str) -> bool:
        """The stretch's launch failed: nothing was spent, release it all."""
        if alloc_id not in self.stretches:
            return False
        del self.stretches[alloc_id]
        self.ledger.settle(alloc_id, 0.0)
        return True

    def due_s(self, s: Stretch) -> float:
        """When ``s`` must be extended or ended: ``return_lead_s`` before its
        committed dollars run out."""
        return s.expires_s - self.config.return_lead_s

    def next_due_s(self) -> float | None:
        """The earliest ``due_s`` of the open stretches (``None``: none open)."""
        return min((self.due_s(s) for s in self.stretches.values()), default=None)

    def step(
        self,
        s: Stretch,
        w: Workload,
        target: tuple[Candidate, int] | None,
        why_no_target: str,
        now_s: float,
    ) -> Step | None:
        """What to do with ``s`` now (``None``: nothing). ``target`` is the spot
        pool and instance count the manager found for its work, if any."""
        cfg = self.config
        held_s = now_s - s.started_s
        if target is not None and now_s < self.resumed_hold_until_s:
            return self.keep(
                s,
                target,
                "resumed after a restart: the capacity refusals seen before it are "
                f"not remembered, no return weighed for "
                f"{self.resumed_hold_until_s - now_s:.0f} s more",
                now_s,
                overlap_s=overlap_s(w),
            )
        if target is not None:
            c, n = target
            od_usd_per_hour = s.count * s.on_demand_usd_per_hour
            write_h = 0.0 if w.workload_class is WorkloadClass.SERVING else w.checkpoint_write_hours
            # A move stalls the work for a checkpoint and a restart while the
            # capacity is still paid for.
            switching = (w.restart_hours + write_h) * od_usd_per_hour
            v = return_to_spot_verdict(
                held_s=held_s,
                min_dwell_s=return_dwell_s(w, cfg),
                on_demand_usd_per_hour=od_usd_per_hour,
                spot_usd_per_hour=n * (c.spot_usd_per_hour or 0.0),
                spot_hazard_per_hour=c.hazard_per_hour,
                switching_cost_usd=switching,
                max_lifetime_hours=cfg.max_spot_lifetime_hours,
                margin=cfg.return_margin,
            )
            if v.go:
                return self.close(
                    s,
                    ReturnKind.RETURN_TO_SPOT,
                    f"back to spot: {v.reason}",
                    now_s,
                    overlap_s=overlap_s(w),
                )
            why_stay = v.reason
        else:
            why_stay = why_no_target
        return self.keep(s, target, why_stay, now_s, overlap_s=overlap_s(w))

    def keep(
        self,
        s: Stretch,
        target: tuple[Candidate, int] | None,
        why_stay: str,
        now_s: float,
        *,
        overlap_s: float = 0.0,
    ) -> Step | None:
        """``s`` stays on on-demand (``why_stay``): nothing until it is due;
        then extend it if the cap can pay, else back to spot early if
        ``target`` (a spot pool for its work) is given, else end it."""
        cfg = self.config
        if now_s < self.due_s(s):
            return None
        hours = cfg.break_glass_min_hours
        usd = s.extra_usd_per_hour * hours
        if self.ledger.try_commit(s.alloc_id, usd):
            s.expires_s = max(s.expires_s, now_s) + hours * 3600.0
            reason = f"on-demand kept {hours:g} h more (${usd:,.0f} committed): {why_stay}"
            return Step(ReturnKind.EXTEND, reason, committed_usd=usd)
        short = (
            f"the break-glass cap (${self.ledger.remaining_usd:,.0f} left) cannot pay "
            f"another {hours:g} h (${usd:,.0f})"
        )
        if target is not None:
            return self.close(
                s,
                ReturnKind.RETURN_TO_SPOT,
                f"{short}: back to spot early ({why_stay})",
                now_s,
                overlap_s=overlap_s,
            )
        return self.close(
            s, ReturnKind.END, f"{short} and {why_stay}: on-demand ends, left unmet", now_s
        )

    def close(
        self, s: Stretch, kind: ReturnKind, reason: str, now_s: float, *, overlap_s: float = 0.0
    ) -> Step:
        """Settle ``s``: its extra dollars until now, plus ``overlap_s`` of its
        whole on-demand price (a serving return keeps the on-demand until the
        spot it returns to is ready: ``overlap_s``)."""
        spent = s.extra_usd_per_hour * max(0.0, now_s - s.started_s) / 3600.0
        spent += s.count * s.on_demand_usd_per_hour * overlap_s / 3600.0
        released = self.ledger.settle(s.alloc_id, spent)
        del self.stretches[s.alloc_id]
        return Step(kind, reason, spent_usd=spent, released_usd=released)
