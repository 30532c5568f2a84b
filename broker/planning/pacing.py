"""Pacing a deadline job across re-plans: what is due by when, and what work ahead is worth.

Owns: ``due_unit_hours`` (the work a job must have done ``h`` hours from
now) and ``ahead_usd_per_unit_hour`` (what a unit-hour done beyond that is
worth: what it is expected to cost later, for training and batch jobs).
``broker.planning.rolling`` hands both to every window it builds, as the
problem's milestone, its due work and its work-ahead value.

Must not: solve, read the clock or a market beyond the cost table it is given.

**What is due.** Uniform Progress's line from the job's release (the Can't Be
Late setting, NSDI 2024: ``ep(t) = C t / R``), less what is done, so a lead
taken while spot was plentiful is kept: a job ahead of the line may wait out
a spot outage instead of running its gang minimum on on-demand. A job behind
the line is not asked to catch up all at once: never more than the work left
spread evenly over the time left (what each re-plan asked before, which
threw any lead away: on the 30-day portfolio bench, seed 2, the loop ran the
training job every step, 127 h of on-demand gang minimum where hindsight
needs 90 h)::

    due(h) = clip(min(C (t + h) / R - (C - left), left h / (R - t)), 0, left)

**What work ahead is worth.** Nothing is due while the job is ahead, so a
window plans no work unless doing it now beats doing it later. Later, the
job runs at full size (its gang minimum on the cheapest non-revocable tier,
the rest on the cheapest effective spot) where spot is held, and on the
non-revocable tier alone where it is not; with ``a`` the share of time the
job's cheapest spot pool was held (``PoolSnapshot.available_share``)::

    v = a c_full + (1 - a) c_od

``c_full < v < c_od`` whenever spot is cheaper: work ahead is bought at full
size while spot is there, never on on-demand alone.

A job without a gang (batch, research) runs later on whatever spot is held
then, cheapest first: over every pool it accepts, spot offered now or not,
in order of effective spot price ``c_i`` with long-run share ``a_i``, each
pool doing at most its pool (and zone) share ``s`` of the work where held,
and on-demand the rest::

    v = sum_i a_i min(s, r_i) c_i + (1 - sum_i a_i min(s, r_i)) c_od

(``r_i``: the share of the work the cheaper pools left, at most the job's
spot share). A window then runs such a job ahead only on spot cheaper than
that: in the hours a cheap pool is offered, and not at the line's pace
wherever spot is. Without this value such a job keeps to its line: on the
30-day portfolio bench (seed 7) the research sweeps then run every step on
whatever spot the step offers, $2,469 where hindsight runs them in the hours
an A100 pool 2.2 times cheaper per unit of work is held, $1,342.

A gang whose minimum must be non-revocable runs that minimum while its
spot is lost, and the window's plan counts its spot at the share of each
hour the pool is expected to hold it (``policies.held``): later, then, a
unit-hour costs what a whole gang-hour at full size costs per unit of work
in its best pool at that pool's long-run share ``a`` (``gang_hour_usd``;
``UNINFORMED_HELD_SHARE`` where none is recorded), never more than
on-demand::

    v = min over pools of (m c_od + k a c_spot) / (m + k a)

so the window runs ahead only where an hour of the gang now costs less
than the best pool's average hour. The formula above priced the hours spot
is lost as if the whole unit-hour ran on on-demand, so every window with
spot held now ran the gang ahead at full size, and at any price below that
value the window did the most work an hour it could: on H100 pools (three
times an A100's work an hour) held 30-74 % of the time rather than the
A100 pool held 82 % that hindsight uses (30-day portfolio bench, seed 1:
1.053 x the hindsight; 1.020 with this rule and the held share).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from markets.model import Tier
from policies.cost_table import NEVER_HELD_SHARE, CostTable, spot_factor
from policies.held import expected_held_share, gang_hour_usd
from policies.workloads.spec import Workload, WorkloadClass, WorkloadSet

__all__ = ["UNINFORMED_HELD_SHARE", "ahead_usd_per_unit_hour", "due_unit_hours", "pacing"]

# A pool with no recorded share of time held: half (the middle of the
# 0.17-0.91 range published for V100 zones, docs/concepts/market.md; as the
# lifecycle's deadline rule assumes).
UNINFORMED_HELD_SHARE = 0.5


def due_unit_hours(w: Workload, left: float, hour: float, h: float) -> float:
    """Work ``w`` must have done ``h`` hours after ``hour`` (hours since the
    epoch its deadline counts from), ``left`` unit-hours still to do (module
    docstring). A job without a deadline or a total owes nothing."""
    if left <= 0 or w.deadline_hours is None or w.unit_hours is None:
        return 0.0
    total, deadline = float(w.unit_hours), float(w.deadline_hours)
    time_left = deadline - hour
    if time_left <= h:
        return left
    done = max(0.0, total - left)
    line = total * w.due_share(hour + h) - done
    begin = max(hour, w.release_hours)  # no work is there before its release
    spread = left * max(0.0, hour + h - begin) / (deadline - begin)
    return min(left, max(0.0, min(line, spread)))


def ahead_usd_per_unit_hour(costs: CostTable, workloads: WorkloadSet) -> dict[str, float]:
    """Per training or batch job, what a unit-hour of its work done ahead is worth
    (module docstring); jobs where waiting saves nothing are left out."""
    out: dict[str, float] = {}
    for w in workloads.workloads:
        if w.workload_class is WorkloadClass.SERVING or w.unit_hours is None:
            continue
        if w.workload_class is WorkloadClass.TRAINING:
            v = _later_usd_per_unit_hour(costs, w)
        else:
            v = _spot_later_usd_per_unit_hour(costs, w)
        if v > 0:
            out[w.name] = v
    return out


def _later_usd_per_unit_hour(costs: CostTable, w: Workload) -> float:
    od = costs.cheapest(w.name, Tier.ON_DEMAND)
    spot = costs.cheapest(w.name, Tier.SPOT)
    p_od = None if od is None else od.usd_per_work_hour[Tier.ON_DEMAND]
    p_spot = None if spot is None else spot.usd_per_work_hour[Tier.SPOT]
    if od is None or spot is None or p_od is None or p_spot is None or spot.spot_factor is None:
        return 0.0
    if p_spot >= p_od or w.max_spot_share <= 0 or w.max_units is None:
        return 0.0
    top = float(w.max_units)
    spot_units = min(top - w.non_revocable_min_units, w.max_spot_share * top)
    if spot_units <= 0:
        return 0.0
    if w.non_revocable_min_units > 0:  # the whole gang-hour later (``policies.held``)
        ranks = [
            gang_hour_usd(w, e, _later_share(costs, e.pool_key))
            for e in costs.entries(w.name)
            if e.usd_per_work_hour[Tier.SPOT] is not None and e.spot_factor is not None
        ]
        return min(min(ranks, default=p_od), p_od)
    work_od = (top - spot_units) * od.throughput
    work_spot = spot_units * spot.throughput / spot.spot_factor
    full = (work_od * p_od + work_spot * p_spot) / (work_od + work_spot)
    share = costs.pool(spot.pool_key).available_share
    held = UNINFORMED_HELD_SHARE if share is None or not math.isfinite(share) else share
    held = min(1.0, max(0.0, held))
    return held * full + (1.0 - held) * p_od


def _spot_later_usd_per_unit_hour(costs: CostTable, w: Workload) -> float:
    """A job without a gang (batch, research): the expected price of a
    unit-hour later (module docstring), over every pool it accepts, spot
    offered now or not, at the pool's long-run held share."""
    p_od = costs.cheapest_usd_per_work_hour(w.name, Tier.ON_DEMAND)
    if not math.isfinite(p_od) or w.max_spot_share <= 0:
        return 0.0
    opts = costs.options
    offers: list[tuple[float, float]] = []
    for e in costs.entries(w.name):
        snap = costs.pool(e.pool_key)
        spot = snap.planning_spot_usd_per_hour
        if spot is None or e.units_per_instance * e.throughput <= 0:
            continue
        factor = e.spot_factor
        if factor is None:  # no spot offered now: what it costs when it is
            factor = spot_factor(
                w,
                snap,
                interruption_multiplier=opts.interruption_multiplier,
                checkpoint_write_seconds=opts.checkpoint_write_seconds,
            )
        a = _later_share(costs, e.pool_key)
        if factor is None or a <= NEVER_HELD_SHARE:
            continue
        price = spot * factor / (e.units_per_instance * e.throughput)
        if price < p_od:
            offers.append((price, a))
    cap = min(w.max_pool_share, w.max_zone_share)
    left = min(1.0, w.max_spot_share)  # the share of the work spot may do
    v, on_spot = 0.0, 0.0
    for price, a in sorted(offers):
        take = a * min(cap, left)
        v += take * price
        on_spot += take
        left -= take
        if left <= 1e-9:
            break
    return v + (1.0 - on_spot) * p_od


def _later_share(costs: CostTable, pool_key: str) -> float:
    """The share of time later that ``pool_key`` holds spot: the recorded
    share (``policies.held``), ``UNINFORMED_HELD_SHARE`` where none is."""
    share = expected_held_share(costs.pool(pool_key))
    return UNINFORMED_HELD_SHARE if share is None else share


def pacing(
    workloads: WorkloadSet, remaining: Mapping[str, float], hour: float, step: int, horizon: int
) -> tuple[dict[str, tuple[int, float]], dict[str, float]]:
    """(milestones, due): per job with work left, ``(step, due by the step's
    end)`` and the work due inside a window of ``horizon`` hours."""
    by_name = {w.name: w for w in workloads.workloads}
    milestones: dict[str, tuple[int, float]] = {}
    due: dict[str, float] = {}
    for name, left in remaining.items():
        w = by_name.get(name)
        if w is None or left <= 0:
            continue
        milestones[name] = (step, due_unit_hours(w, left, hour, float(step)))
        due[name] = due_unit_hours(w, left, hour, float(horizon))
    return milestones, due
