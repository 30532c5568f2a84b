"""Plan versus fleet: the launches and terminations that close the gap.

Owns: ``desired_now`` (the plan's instance counts for the hour in force, as
whole instances), ``apply_deltas`` (the lifecycle's adjustments since the
plan) and ``diff`` (requests with deterministic idempotency keys). The key
derivations ``launch_key`` / ``terminate_key`` are ``markets.keys``'s,
re-exported here for the callers that know them by this module.

Rounding the plan: a plan may hold fractional instance counts (the LP
relaxation, read as average instances over the period).

- serving: each (pool, tier) count is rounded *up* (``ceil`` after a 1e-6
  tolerance): serving demand must be met every hour, so a fraction of an
  instance needs a whole one. A spot row's count is the replicas its work
  needs times the pool's spot factor (``policies.cost_table.spot_factor``:
  the restart time the hazard costs, an expectation); where the row says its
  work (``work_per_hour``, ``units``), the replicas the work needs are
  rounded up and that overhead on top to the *nearest* whole instance
  (``serving_spot_instances``). Rounding the overhead up bought a whole
  replica for any hazard at all: a calm pool's 4.0001 spot replicas were 5,
  a fleet-wide 1 / N above what serving the demand takes.
- training and batch: per (workload, tier) the total is rounded to the
  nearest whole instance and shared out by largest remainder (ties to the
  pool listed first). Rounding each pool on its own could add or drop up to
  one instance per pool; this keeps each tier's total within half an instance
  of the plan's.

Idempotency: a launch key is a hash of (owner, plan generation, workload,
pool, tier, slot), where ``slot`` is the number of live instances the group
already had. A restart that sees the same fleet and the same plan derives
the same key, so the provider answers with the instances it already launched
(``replayed``) instead of launching again. A terminate key hashes the owner
and the sorted instance ids.

Make before break: for serving workloads (``warm_up_seconds``) a ready
instance the plan no longer wants stays until the instances replacing it are
ready (``diff``).

Disruption: ``leaving`` names the running instances a diff would end that
disrupt work (spot, or any tier of a training gang), per workload, in the
order ``diff`` ends them; ``hold`` keeps some of them where they are (the
disruption budget did not grant their move, ``broker.lifecycle.disruption``)
and holds back the same work of the workload's launches elsewhere, in whole
instances and never more than the kept work: the plan's move waits instead
of running twice over.

Gangs whole: ``whole_gangs`` keeps every training gang in one placement
(``policies.workloads.placement``) after the adjustments above, which work
slot by slot: a ``stick`` that kept the on-demand in the old zone while the
spot moved, or a ``hold`` that kept part of a gang, would split it across
zones. Such a gang takes the preferred counts instead (the plan's, or where
it runs now): it moves whole or not at all.

Safety: only instances whose ``OWNER_TAG`` equals ``owner`` are counted or
terminated; instances about to be revoked (``doomed``) count as gone and are
never terminated (their workload may be checkpointing in the notice window).

Must not: call a provider or the store, or read the clock.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import datetime

from broker.planning.plan import Plan
from markets.cloud_fleet import OWNER_TAG, Instance, InstanceState, LaunchRequest, TerminateRequest
from markets.errors import InputError
from markets.keys import PoolKey, launch_key, terminate_key
from markets.model import Tier
from policies.workloads.spec import Workload, WorkloadClass, WorkloadSet

__all__ = [
    "Slot",
    "apply_deltas",
    "desired_now",
    "diff",
    "hold",
    "launch_key",
    "leaving",
    "live_ours",
    "plan_hour",
    "serving_spot_instances",
    "surplus",
    "terminate_key",
    "warm_up_seconds",
    "whole_gangs",
]

Slot = tuple[str, str, str]  # (workload, pool_key, tier)
_EPS = 1e-6
_LIVE = (InstanceState.PENDING, InstanceState.RUNNING)


def plan_hour(plan: Plan, at: datetime) -> int:
    """Index of the plan hour in force at ``at`` (clamped to the plan)."""
    h = math.floor((at - plan.start).total_seconds() / 3600.0)
    return min(max(h, 0), max(plan.hours - 1, 0))


def _largest_remainder(values: Sequence[float]) -> list[int]:
    total = round(sum(values) + _EPS)
    floors = [math.floor(v + _EPS) for v in values]
    left = total - sum(floors)
    order = sorted(range(len(values)), key=lambda i: (-(values[i] - floors[i]), i))
    for i in order[: max(left, 0)]:
        floors[i] += 1
    return floors


def serving_spot_instances(instances: float, ready: float | None) -> int:
    """Whole spot instances for a serving row of ``instances`` whose work
    needs ``ready`` replicas (``instances / spot factor``; None: not known):
    the replicas rounded up, the hazard's restart overhead above them to the
    nearest whole instance (module docstring). Without ``ready``, ``ceil``."""
    if ready is None or not math.isfinite(ready) or ready > instances + _EPS:
        return max(0, math.ceil(instances - _EPS))
    whole = max(0, math.ceil(ready - _EPS))
    return whole + max(0, math.floor(instances - ready + 0.5))


def _ready_replicas(
    workloads: WorkloadSet, workload: str, pool: str, n: float, units: float, work: float
) -> float | None:
    """Replicas the row's work needs: ``work`` over one instance's work
    (its units times the workload's throughput there), None if not known."""
    try:
        w = workloads.by_name(workload)
        thr = w.throughput_of(PoolKey.parse(pool).instance_type)
    except (KeyError, ValueError, InputError):
        return None
    per_instance = units / n * thr if n > _EPS else 0.0
    if not (per_instance > 0 and math.isfinite(work)):
        return None
    return work / per_instance


def desired_now(plan: Plan, at: datetime, workloads: WorkloadSet) -> dict[Slot, int]:
    """Whole instances per (workload, pool, tier) for the hour in force at
    ``at``. A row in a provider or region the workload's allow-lists no
    longer admit (a plan made before they changed) is dropped: the diff then
    ends what runs there and launches nothing there."""
    a = plan.allocations
    if a.empty:
        return {}
    h = plan_hour(plan, at)
    rows = a[(a["hour_start"] <= h) & (a["hour_end"] > h)]
    classes = {w.name: w.workload_class for w in workloads.workloads}
    specs = {w.name: w for w in workloads.workloads}
    out: dict[Slot, int] = {}
    groups: dict[tuple[str, str], list[tuple[str, float]]] = defaultdict(list)
    nan = [math.nan] * len(rows)
    units = rows.get("units", nan)
    work = rows.get("work_per_hour", nan)
    for w, pool, tier, n, u, wk in zip(
        rows["workload"],
        rows["pool_key"],
        rows["tier"],
        rows["instances"],
        units,
        work,
        strict=True,
    ):
        spec = specs.get(str(w))
        if spec is not None and not _allowed(spec, str(pool)):
            continue
        if classes.get(str(w)) is WorkloadClass.SERVING:
            if str(tier) == Tier.SPOT.value:
                ready = _ready_replicas(workloads, str(w), str(pool), float(n), float(u), float(wk))
                k = serving_spot_instances(float(n), ready)
            else:
                k = math.ceil(float(n) - _EPS)
            if k > 0:
                out[(str(w), str(pool), str(tier))] = k
        else:
            groups[(str(w), str(tier))].append((str(pool), float(n)))
    for (w, tier), items in groups.items():
        for (pool, _), k in zip(items, _largest_remainder([n for _, n in items]), strict=True):
            if k > 0:
                out[(w, pool, tier)] = k
    return out


def _allowed(w: Workload, pool_key: str) -> bool:
    k = PoolKey.parse(pool_key)
    return w.allows(k.provider, k.region)


def apply_deltas(desired: Mapping[Slot, int], deltas: Mapping[Slot, int]) -> dict[Slot, int]:
    """``desired`` plus the lifecycle's adjustments, never below zero."""
    out = dict(desired)
    for slot, d in deltas.items():
        out[slot] = max(0, out.get(slot, 0) + d)
    return {k: v for k, v in out.items() if v > 0}


def live_ours(fleet: Iterable[Instance], owner: str) -> list[Instance]:
    """Live instances that carry our ownership tag (everything else is ignored)."""
    return [i for i in fleet if i.state in _LIVE and i.tags.get(OWNER_TAG) == owner]


def _have(
    fleet: Sequence[Instance], owner: str, doomed: frozenset[str]
) -> dict[Slot, list[Instance]]:
    have: dict[Slot, list[Instance]] = defaultdict(list)
    for inst in live_ours(fleet, owner):
        if inst.instance_id not in doomed:
            have[(inst.workload, inst.pool_key, inst.tier.value)].append(inst)
    return have


def _placements(w: Workload, slots: Iterable[Slot]) -> set[str]:
    out = set()
    for _w, pool, _t in slots:
        k = PoolKey.parse(pool)
        key = w.gang_placement_key(
            provider=k.provider, region=k.region, zone=k.zone, instance_type=k.instance_type
        )
        out.add(key or "")
    return out


def whole_gangs(
    want: Mapping[Slot, int],
    workloads: WorkloadSet,
    prefer: Mapping[Slot, int | float],
) -> dict[Slot, int]:
    """``want`` with every training gang in one placement (module
    docstring): a gang whose slots span more than one takes its slots of
    ``prefer`` (whole instances), if those are in one placement."""
    out = dict(want)
    for w in workloads.of_class(WorkloadClass.TRAINING):
        mine = [s for s, n in out.items() if s[0] == w.name and n > 0]
        if len(_placements(w, mine)) <= 1:
            continue
        alt = {s: round(n) for s, n in prefer.items() if s[0] == w.name and round(n) > 0}
        if len(_placements(w, alt)) > 1:
            continue  # nothing whole to fall back on: the plan's next hour decides
        for s in mine:
            del out[s]
        out.update(alt)
    return out


def _newest_first(insts: Iterable[Instance]) -> list[Instance]:
    return sorted(insts, key=lambda i: (i.launched_at, i.instance_id), reverse=True)


def leaving(
    desired: Mapping[Slot, int],
    fleet: Sequence[Instance],
    owner: str,
    gangs: Collection[str],
    *,
    doomed: frozenset[str] = frozenset(),
) -> dict[str, list[Instance]]:
    """Per workload, the running instances ``diff`` would end to reach
    ``desired`` that disrupt work: spot ones, and any tier of a workload in
    ``gangs`` (training: a node leaving restarts the job). Pending ones end
    first and disrupt nothing. Slot by slot in sorted order, newest first."""
    out: dict[str, list[Instance]] = defaultdict(list)
    for slot, got in sorted(_have(fleet, owner, doomed).items()):
        extra = len(got) - desired.get(slot, 0)
        if extra <= 0:
            continue
        workload, _pool, tier = slot
        if tier != Tier.SPOT.value and workload not in gangs:
            continue
        for inst in _newest_first(got)[:extra]:
            if inst.state is InstanceState.RUNNING:
                out[workload].append(inst)
    return dict(out)


def hold(
    desired: Mapping[Slot, int],
    kept: Mapping[str, Sequence[Instance]],
    fleet: Sequence[Instance],
    owner: str,
    work_of: Callable[[str, str], float],
    *,
    doomed: frozenset[str] = frozenset(),
) -> dict[Slot, int]:
    """``desired`` with the ``kept`` instances staying in their slots, and
    per workload its launches (slots above what they hold) cut by whole
    instances while the kept work (``work_of(workload, pool)`` per instance)
    covers them: same tier first, then slot order."""
    out = dict(desired)
    if not any(kept.values()):
        return out
    have = _have(fleet, owner, doomed)
    for workload, insts in sorted(kept.items()):
        if not insts:
            continue
        held: dict[str, float] = defaultdict(float)
        for inst in insts:
            slot = (workload, inst.pool_key, inst.tier.value)
            out[slot] = out.get(slot, 0) + 1
            held[inst.tier.value] += work_of(workload, inst.pool_key)
        left = sum(held.values())
        growing = [s for s in sorted(out) if s[0] == workload and out[s] > len(have.get(s, ()))]
        growing.sort(key=lambda s: (s[2] not in held, s))
        for slot in growing:
            each = work_of(workload, slot[1])
            if each <= 0:
                continue
            cut = min(out[slot] - len(have.get(slot, ())), math.floor(left / each + _EPS))
            if cut > 0:
                out[slot] -= cut
                left -= cut * each
    return {k: v for k, v in out.items() if v > 0}


def diff(
    desired: Mapping[Slot, int],
    fleet: Sequence[Instance],
    generation: int,
    owner: str,
    *,
    doomed: frozenset[str] = frozenset(),
    now: datetime | None = None,
    warm_s: Mapping[str, float] | None = None,
) -> list[LaunchRequest | TerminateRequest]:
    """Requests that take ``fleet`` to ``desired``: launches first, then one
    termination per slot with too many instances (newest instances first).

    Make before break (``warm_s``: seconds an instance of the workload takes
    to be ready, given with ``now``): a surplus instance that is ready stays
    while instances of its workload are still warming up (launched less than
    ``warm_s`` ago, or launched by these requests), one kept per warming
    instance, so that moving a serving fleet never leaves it short for a cold
    start; the next diff, once they are ready, terminates it."""
    have: dict[Slot, list[Instance]] = defaultdict(list)
    for inst in live_ours(fleet, owner):
        if inst.instance_id not in doomed:
            have[(inst.workload, inst.pool_key, inst.tier.value)].append(inst)
    launches: list[LaunchRequest] = []
    surplus: dict[Slot, list[Instance]] = {}
    for slot in sorted(set(desired) | set(have)):
        want, got = desired.get(slot, 0), have.get(slot, [])
        workload, pool, tier = slot
        if want > len(got):
            launches.append(
                LaunchRequest(
                    idempotency_key=launch_key(owner, generation, workload, pool, tier, len(got)),
                    pool_key=pool,
                    tier=Tier(tier),
                    workload=workload,
                    count=want - len(got),
                    owner=owner,
                    plan_generation=generation,
                )
            )
        elif want < len(got):
            newest = sorted(got, key=lambda i: (i.launched_at, i.instance_id), reverse=True)
            surplus[slot] = newest[: len(got) - want]
    if now is not None and warm_s:
        surplus = _make_before_break(surplus, have, launches, now, warm_s)
    terminations: list[LaunchRequest | TerminateRequest] = []
    for slot, gone in surplus.items():
        if not gone:
            continue
        workload, pool, tier = slot
        ids = tuple(sorted(i.instance_id for i in gone))
        want = desired.get(slot, 0)
        terminations.append(
            TerminateRequest(
                idempotency_key=terminate_key(owner, ids),
                instance_ids=ids,
                owner=owner,
                reason=f"plan generation {generation} wants {want} in {pool} ({tier})",
            )
        )
    return [*launches, *terminations]


def surplus(
    desired: Mapping[Slot, int],
    fleet: Sequence[Instance],
    owner: str,
    *,
    doomed: frozenset[str] = frozenset(),
    tier: Tier | None = None,
) -> tuple[str, ...]:
    """Instances of ``fleet`` beyond ``desired`` in their slot (on ``tier``
    if given), each slot's newest first as ``diff`` ends them. Taken on the
    fleet once a diff's terminations are carried out, it is what make before
    break keeps only until the instances replacing it are ready (``diff``):
    capacity nothing in the plan or the decisions since stands behind."""
    out: list[str] = []
    for slot, got in sorted(_have(fleet, owner, doomed).items()):
        extra = len(got) - desired.get(slot, 0)
        if extra <= 0 or (tier is not None and slot[2] != tier.value):
            continue
        newest = sorted(got, key=lambda i: (i.launched_at, i.instance_id), reverse=True)
        out.extend(i.instance_id for i in newest[:extra])
    return tuple(out)


def _make_before_break(
    surplus: Mapping[Slot, list[Instance]],
    have: Mapping[Slot, list[Instance]],
    launches: Sequence[LaunchRequest],
    now: datetime,
    warm_s: Mapping[str, float],
) -> dict[Slot, list[Instance]]:
    """``surplus`` less the ready instances kept while their workload warms
    up (``diff``'s docstring). Not-ready surplus goes first: it serves nobody."""
    out = {slot: list(gone) for slot, gone in surplus.items()}
    leaving = {i.instance_id for gone in surplus.values() for i in gone}

    def age_s(i: Instance) -> float:
        return (now - i.launched_at).total_seconds()

    for workload, warm in warm_s.items():
        if warm <= 0:
            continue
        warming = sum(
            1
            for (w, _p, _t), insts in have.items()
            if w == workload
            for i in insts
            if i.instance_id not in leaving and age_s(i) < warm
        )
        warming += sum(r.count for r in launches if r.workload == workload)
        for slot in sorted(out):
            if slot[0] != workload or warming <= 0:
                continue
            kept: set[str] = set()
            for inst in sorted(out[slot], key=age_s):
                if age_s(inst) >= warm and warming > 0:  # ready: it serves until then
                    kept.add(inst.instance_id)
                    warming -= 1
            out[slot] = [i for i in out[slot] if i.instance_id not in kept]
    return out


def warm_up_seconds(workloads: WorkloadSet) -> dict[str, float]:
    """Per serving workload, the seconds a new replica takes to be ready (its
    ``restart_minutes``): what ``diff`` waits for before it breaks."""
    return {
        w.name: w.restart_minutes * 60.0
        for w in workloads.workloads
        if w.workload_class is WorkloadClass.SERVING
    }
