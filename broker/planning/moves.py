"""Which of a re-plan's moves of running capacity pay for themselves.

Owns: ``unpaid_moves`` (per workload, the running instances a re-plan would
end while launching the same work elsewhere, whose move does not pay) and
``need_hours`` (how long the plan keeps needing a workload's work on a
tier: the horizon of the saving).

A re-plan made every hour from fresh prices puts a workload's spot in the
pools cheapest *now*; near-equal pools trade places from hour to hour, and
every trade ends running instances (measured in the daemon's 30-day
simulation: the serving fleet's spot hedge flipped between g5.xlarge,
g2-standard-4 and g6.12xlarge for a few cents a replica-hour). A move is
worth making only when what it saves over the moved instance's expected
remaining life exceeds what it costs:

- saving = (p_old - p_new) x work x life, where p is the effective dollars
  per unit of work (the instance's price over its units x throughput, times
  the spot time factor of ``policies.cost_table.spot_factor`` on spot: the
  restarts and lost work its hazard costs), p_new is the plan's cheapest
  replacement work on the same tier, and life is the expected remaining
  life of the old instance: ``E[min(revocation, N)] = (1 - exp(-lambda N))
  / lambda`` for a pool of hazard ``lambda`` per hour, where ``N`` is
  ``need_hours`` (the plan does not promise the capacity beyond it);
- price = the cold start the plan's churn term charges
  (``churn_usd_per_unit`` per unit launched, as the MILP's kappa), the
  restart (``restart_minutes`` of the new instance billed while the work
  restores, the MILP's ``r_w c``; a serving replica's old instance also runs
  that long: make before break) and the lost work (half a checkpoint
  interval of the moved work, redone; the workload's interval, else Daly's
  optimum for the old pool's hazard: ``policies.moving``, the rule the
  planner's move term of a running gang uses too; stateless serving loses
  none).

A training gang is synchronous: ending any of its nodes restarts all of
them, so its move is judged whole: the saving of every node the plan moves
against one restart and one lost half-interval of the *whole* gang. A gang
node is never moved on its own for its own saving.

Terminations with no launch of the same workload and tier to replace them
(the plan wants less: a scale-down) are not moves and are not judged here;
neither are moves between tiers (a risk decision of the plan's).

Must not: call a provider or the store, read the clock (callers pass
``at``), or change a count itself (``broker.planning.reconcile.hold`` keeps
what this names and holds back the launches that would replace it).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from broker.planning.plan import Plan
from broker.planning.reconcile import Slot, live_ours, plan_hour
from markets.cloud_fleet import Instance, InstanceState
from markets.errors import InputError
from markets.model import PoolSnapshot, Tier
from policies.cost_table import spot_factor
from policies.moving import lost_work_hours
from policies.workloads.spec import Workload, WorkloadClass

__all__ = ["MoveCosts", "need_hours", "unpaid_moves"]

_EPS = 1e-9


@dataclass(frozen=True)
class MoveCosts:
    """What a move costs beside the restart: the cold start per capacity unit
    launched (the planner's ``PlanOptions.churn_usd_per_unit``)."""

    churn_usd_per_unit: float = 0.25


@dataclass(frozen=True)
class _Move:
    """One running instance a re-plan would move: what it saves and costs."""

    inst: Instance
    saving_usd: float
    price_usd: float
    usd_per_h: float  # its effective dollars per hour (price x spot factor)


def need_hours(plan: Plan, at: datetime) -> dict[tuple[str, str], float]:
    """Per (workload, tier), the hours from ``at`` through which the plan
    keeps the workload's work on that tier at no less than in the hour in
    force (at least the rest of that hour; at most the plan's end)."""
    a = plan.allocations
    if a.empty:
        return {}
    h = plan_hour(plan, at)
    left_in_hour = 1.0 - ((at - plan.start).total_seconds() / 3600.0 - h)
    left_in_hour = min(max(left_in_hour, 0.0), 1.0)
    col = next(c for c in ("work_per_hour", "units", "instances") if c in a.columns)
    work: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0] * plan.hours)
    for w, tier, start, end, x in zip(
        a["workload"], a["tier"], a["hour_start"], a["hour_end"], a[col], strict=True
    ):
        row = work[(str(w), str(tier))]
        for k in range(max(int(start), h), min(int(end), plan.hours)):
            row[k] += float(x) if math.isfinite(float(x)) else 0.0
    out: dict[tuple[str, str], float] = {}
    for key, row in work.items():
        level, n = row[h], 0
        for x in row[h + 1 :]:
            if x + _EPS < level * (1 - 1e-6):
                break
            n += 1
        out[key] = left_in_hour + n
    return out


def _per_work_usd(w: Workload, snap: PoolSnapshot, tier: str) -> tuple[float, float, float]:
    """(effective $ per work-hour, work per hour, $ per hour) of one instance."""
    try:
        thr = w.throughput_of(snap.pool.instance_type)
    except (KeyError, InputError):
        thr = 1.0
    work = snap.instance.units * thr
    t = Tier(tier)
    usd = snap.price(t)
    usd = snap.on_demand_usd_per_hour if usd is None else usd
    factor: float | None = 1.0
    if t is Tier.SPOT:
        factor = spot_factor(w, snap)
    if factor is None or work <= 0:
        return math.inf, work, usd
    return usd * factor / work, work, usd


def _life_h(snap: PoolSnapshot, tier: str, need_h: float) -> float:
    """Expected remaining life: ``E[min(Exp(lambda), N)]`` on spot, N otherwise."""
    lam = snap.hazard.rate_per_hour if tier == Tier.SPOT.value else 0.0
    if lam <= _EPS:
        return need_h
    return (1.0 - math.exp(-lam * need_h)) / lam


def unpaid_moves(
    want: Mapping[Slot, int],
    fleet: Sequence[Instance],
    owner: str,
    workloads: Mapping[str, Workload],
    pools: Mapping[str, PoolSnapshot],
    need_h: Mapping[tuple[str, str], float],
    *,
    gangs: Collection[str],
    costs: MoveCosts = MoveCosts(),
    doomed: frozenset[str] = frozenset(),
) -> dict[str, list[Instance]]:
    """Per workload, the running instances ``want`` would end and replace by
    launches of the same workload and tier whose move does not pay (module
    docstring). Instances of unknown workloads or pools are not judged."""
    have: dict[Slot, list[Instance]] = defaultdict(list)
    for inst in live_ours(fleet, owner):
        if inst.instance_id not in doomed:
            have[(inst.workload, inst.pool_key, inst.tier.value)].append(inst)
    out: dict[str, list[Instance]] = defaultdict(list)
    groups = sorted({(s[0], s[2]) for s in set(want) | set(have)})
    for wname, tier in groups:
        w = workloads.get(wname)
        if w is None or tier == Tier.COMMITTED.value:
            continue
        slots = sorted(s for s in set(want) | set(have) if s[0] == wname and s[2] == tier)
        if any(s[1] not in pools for s in slots):
            continue
        # the plan's launches on this tier, cheapest work first: (p, work left)
        deficit: list[list[float]] = []
        launches: list[tuple[int, float]] = []  # per slot in order: (instances, work each)
        surplus: list[tuple[float, float, float, Instance]] = []
        for s in slots:
            p, work, usd = _per_work_usd(w, pools[s[1]], tier)
            got = have.get(s, [])
            n = want.get(s, 0) - len(got)
            if n > 0:
                deficit.append([p, n * work])
                launches.append((n, work))
            elif n < 0:
                newest = sorted(got, key=lambda i: (i.launched_at, i.instance_id), reverse=True)
                for inst in newest[:-n]:
                    if inst.state is InstanceState.RUNNING:
                        surplus.append((p, work, usd, inst))
        if not deficit or not surplus:
            continue
        deficit.sort()
        surplus.sort(key=lambda x: (x[0], x[3].instance_id))
        need = need_h.get((wname, tier), 1.0)
        moved: list[_Move] = []
        for p_old, work, usd_old, inst in surplus:
            if sum(d[1] for d in deficit) <= _EPS:
                break  # the rest is a scale-down
            take, cost = work, 0.0
            for d in deficit:
                part = min(d[1], take)
                cost += part * d[0]
                d[1] -= part
                take -= part
                if take <= _EPS:
                    break
            p_new = cost / max(work - take, _EPS)
            snap = pools[inst.pool_key]
            saving = (p_old - p_new) * work * _life_h(snap, tier, need)
            restart_usd = w.restart_hours * p_new * work
            if w.workload_class is WorkloadClass.SERVING:
                restart_usd += w.restart_hours * usd_old  # make before break
            price = costs.churn_usd_per_unit * inst.units + restart_usd
            price += lost_work_hours(w, snap) * p_old * work
            moved.append(_Move(inst, saving, price, p_old * work))
        if not moved:
            continue
        if wname in gangs:
            out[wname].extend(_gang_unpaid(w, moved, have, pools))
        else:
            unpaid = [m.inst for m in moved if not m.saving_usd > m.price_usd]
            out[wname].extend(_replaceable(unpaid, launches, pools, w, tier))
    return {k: v for k, v in out.items() if v}


def _replaceable(
    kept: Sequence[Instance],
    launches: Sequence[tuple[int, float]],
    pools: Mapping[str, PoolSnapshot],
    w: Workload,
    tier: str,
) -> list[Instance]:
    """``kept`` less its dearest instances whose work no whole launch would
    give way to: ``hold`` cuts launches in whole instances (slot order), so
    keeping three 1-unit replicas against one 3.2-unit launch would run both
    (an instance more, ended as a scale-down at the next reconcile)."""
    ranked = sorted(
        kept, key=lambda i: (_per_work_usd(w, pools[i.pool_key], tier)[0], i.instance_id)
    )
    work = [_per_work_usd(w, pools[i.pool_key], tier)[1] for i in ranked]

    def cut(total: float) -> float:
        left = total
        for n, each in launches:
            if each > 0:
                left -= min(n, math.floor(left / each + 1e-6)) * each
        return total - left

    while ranked:
        total = sum(work)
        if cut(total) <= _EPS:
            return []
        if cut(total - work[-1]) + 1e-6 < cut(total):
            break
        ranked.pop()
        work.pop()
    return ranked


def _gang_unpaid(
    w: Workload,
    moved: Sequence[_Move],
    have: Mapping[Slot, Sequence[Instance]],
    pools: Mapping[str, PoolSnapshot],
) -> list[Instance]:
    """A gang's move judged whole: all of ``moved`` kept unless their savings
    pay, beside the moved nodes' own prices, the rest of the gang idling
    through the restart and redoing the lost half-interval (any tier)."""
    gang_usd_per_h = 0.0
    for (wname, pool, t), insts in have.items():
        if wname == w.name and pool in pools:
            p, work, _usd = _per_work_usd(w, pools[pool], t)
            if math.isfinite(p):
                gang_usd_per_h += p * work * len(insts)
    idle_usd_per_h = max(gang_usd_per_h - sum(m.usd_per_h for m in moved), 0.0)
    lost_h = max(lost_work_hours(w, pools[m.inst.pool_key]) for m in moved)
    price = sum(m.price_usd for m in moved) + idle_usd_per_h * (w.restart_hours + lost_h)
    return [] if sum(m.saving_usd for m in moved) > price else [m.inst for m in moved]
