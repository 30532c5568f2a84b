"""Where lost capacity may go, and whether a job may run smaller.

Owns the choosing rules applied inside the notice window, over explicit
inputs: ``Guards`` (what blocks a pool right now: the placement rule's
``Blockers``, its breaker, its zone's breaker, a recent launch failure, and
the churn budget), ``find_spot`` (the best
acceptable spot pool for some work, outside the failure domain that just
revoked), ``pick_on_demand``, ``shrink_size``,
``deadline_slack`` and ``checkpoint_verdict``.

Must not: change state (the manager records what it chose), read a clock, or
do I/O.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from broker.lifecycle.disruption import DisruptionBudget
from broker.lifecycle.fallback import Blockers, options
from broker.lifecycle.values import CheckpointVerdict
from broker.lifecycle.view import Candidate, Candidates, Tally
from markets.keys import PoolKey
from markets.model import Tier
from policies.checkpoint import NOTICE_SECONDS, daly_interval, notice_checkpoint_fits
from policies.workloads.spec import Workload, WorkloadClass

__all__ = [
    "Guards",
    "checkpoint_verdict",
    "deadline_slack",
    "find_spot",
    "pick_on_demand",
    "shares_ok",
    "shrink_size",
]

_EPS = 1e-9


@dataclass(slots=True)
class Guards(Blockers):
    """The manager's rule state that can block a pool now: the placement
    rule's blockers (``broker.lifecycle.fallback``) and the churn budget (the
    one disruption budget, ``broker.lifecycle.disruption``)."""

    churn: DisruptionBudget


def _region(pool_key: str) -> tuple[str, str]:
    k = PoolKey.parse(pool_key)
    return (k.provider, k.region)


def shares_ok(w: Workload, tally: Tally, c: Candidate, units: float) -> bool:
    """Adding ``units`` of spot in ``c`` keeps the workload within its zone,
    pool and region shares of spot. A zone, pool or region holding none of its
    spot yet is always allowed: spreading into it can only lower the
    concentration. Caps a gang's placement contract makes moot do not
    apply (``Workload.spot_caps_apply``: a zone gang is one zone)."""
    zone_caps, region_cap = w.spot_caps_apply()
    after = tally.spot_units + units
    if not zone_caps:
        return not region_cap or _region_ok(w, tally, c, units, after)
    in_zone = tally.spot_by_zone.get(c.zone_key, 0.0)
    if in_zone > _EPS and in_zone + units > w.max_zone_share * after + _EPS:
        return False
    in_pool = tally.spot_by_pool.get(c.pool_key, 0.0)
    if in_pool > _EPS and in_pool + units > w.max_pool_share * after + _EPS:
        return False
    return not region_cap or _region_ok(w, tally, c, units, after)


def _region_ok(w: Workload, tally: Tally, c: Candidate, units: float, after: float) -> bool:
    if w.max_region_share >= 1.0:
        return True
    region = _region(c.pool_key)
    in_region = sum(v for k, v in tally.spot_by_pool.items() if _region(k) == region)
    return not (in_region > _EPS and in_region + units > w.max_region_share * after + _EPS)


def find_spot(
    w: Workload,
    work_per_hour: float,
    cands: Candidates,
    tally: Tally,
    guards: Guards,
    *,
    now_s: float,
    capacity_units: float,
    same_type: str | None = None,
    max_usd_per_work_hour: float | None = None,
    avoid_zones: frozenset[str] = frozenset(),
    avoid: Collection[str] = (),
    inside: str | None = None,
) -> tuple[Candidate, int, bool] | str:
    """The first spot pool, in the placement rule's order
    (``broker.lifecycle.fallback.options``: a likely placement, effective
    cost, hazard, placement score, preference), pools outside ``avoid_zones``
    first (the failure domain that just revoked: its other zones are likely
    next, ``markets.model.FailureDomain``; inside it only when no pool outside
    passes), that supplies ``work_per_hour`` at most ``max_usd_per_work_hour``
    without an open breaker, a recent launch failure or going over the churn
    budget; one within the workload's zone and pool shares if any, else the
    first over them (a gang of three nodes in three zones cannot be restored
    otherwise; the next plan spreads it again). ``avoid``: pools and zones
    never used (at risk: a rebalance recommendation). ``inside``: a pool of
    a training gang: only pools in its placement (the gang's contract,
    ``policies.workloads.placement``; the gang moves whole only by a
    re-plan). Returns ``(pool, instances, over_share)``, or why none."""
    of_type = f" of type {same_type}" if same_type else ""
    if inside is not None and w.workload_class is WorkloadClass.TRAINING:
        of_type += f" in its placement ({w.placement}) of {inside}"
    # The churn window, read once: with no room for one instance of the
    # smallest type, no pool can pass, and every tick of a long storm would
    # otherwise walk all of them (~300) to say so (most of a year's risk band).
    allows = guards.churn.allowing(capacity_units, now_s, whole=inside is not None)
    if cands.spot and not allows(cands.spot_units_at_least(work_per_hour)):
        return f"no spot pool{of_type} passes (the churn budget has no room left)"
    skipped: dict[str, int] = {}
    over: tuple[Candidate, int] | None = None
    found = options(cands, guards, Tier.SPOT, now_s=now_s, same_type=same_type, tried=avoid,
                    work_per_hour=work_per_hour)  # fmt: skip
    if inside is not None:  # a training gang stays inside its placement
        found = (x for x in found if w.same_placement(inside, x[0].pool_key))
    # Read lazily: the pools after the one returned are never looked up (a
    # year's what-if asks this ~10^5 times over ~300 pools).
    ranked: Iterable[tuple[Candidate, str | None]] = found
    if avoid_zones:
        listed = list(found)
        ranked = [x for x in listed if x[0].zone_key not in avoid_zones] + [
            x for x in listed if x[0].zone_key in avoid_zones
        ]
    dearer = (
        ""
        if max_usd_per_work_hour is None
        else f"dearer than ${max_usd_per_work_hour:.2f}/work-hour"
    )
    for c, blocked in ranked:
        eff = c.spot_usd_per_work_hour
        if max_usd_per_work_hour is not None and eff is not None and eff > max_usd_per_work_hour:
            # not sorted by cost alone (placement, domain): every pool is looked at
            why = dearer
        elif blocked is not None:
            why = blocked
        else:
            n = c.instances_for(work_per_hour)
            units = n * c.units
            if not allows(units):  # a gang's nodes move together (``ChurnBudget.allowing``)
                why = "over the churn budget"
            elif not shares_ok(w, tally, c, units):
                why = "over the zone/pool share"
                over = over or (c, n)
            else:
                return c, n, False
        skipped[why] = skipped.get(why, 0) + 1
    if over is not None:
        return over[0], over[1], True
    if not skipped:
        return f"no acceptable pool{of_type} offers spot"
    counts = ", ".join(f"{n} {why}" for why, n in skipped.items())
    return f"no spot pool{of_type} passes ({counts})"


def pick_on_demand(
    cands: Candidates,
    guards: Guards,
    *,
    now_s: float,
    same_type: str | None,
    prefer_pool: str,
    workload: Workload | None = None,
    work_per_hour: float | None = None,
) -> Candidate | None:
    """The cheapest on-demand pool per unit of work not out of capacity,
    ``prefer_pool`` (the lost one) on a tie. Breakers do not apply: on-demand
    is not revoked. A training gang's ``workload``: only pools in the
    placement of ``prefer_pool`` (its contract). ``work_per_hour``: the work
    to place, for the quota check (``broker.lifecycle.fallback.options``)."""
    best: Candidate | None = None
    found = options(cands, guards, Tier.ON_DEMAND, now_s=now_s, same_type=same_type,
                    work_per_hour=work_per_hour)  # fmt: skip
    for c, blocked in found:
        if blocked is not None:
            continue
        if workload is not None and not workload.same_placement(prefer_pool, c.pool_key):
            continue
        if best is None:
            best = c
        if c.on_demand_usd_per_work_hour > best.on_demand_usd_per_work_hour * (1 + _EPS):
            break
        if c.pool_key == prefer_pool:
            return c
    return best


def shrink_size(w: Workload, units_now: float) -> int | None:
    """The largest allowed gang size not above ``units_now`` (``None``: below
    ``min_units``, or not a training gang)."""
    fitting = [s for s in w.gang_sizes() if s <= units_now + _EPS]
    return fitting[-1] if fitting else None


def deadline_slack(
    w: Workload,
    work_per_hour: float,
    *,
    now_s: float,
    horizon_start_s: float,
    done_unit_hours: float | None,
    hazard_per_hour: float,
    min_margin_hours: float,
    can_grow: bool = True,
) -> tuple[float, float] | None:
    """``(slack_hours, margin_hours)`` of finishing by the deadline after one
    restart, at the larger of ``work_per_hour`` and the job's largest allowed
    size (at ``work_per_hour`` alone when ``can_grow`` is false, as for a
    shrink that commits to running smaller), or ``None`` without a deadline.

    Without reported progress the job is taken as on schedule: done in
    proportion to the time elapsed since its release. The margin is the
    time spot is expected to lose to further interruptions before the
    deadline, ``hazard x hours left x (restart + half a checkpoint interval)``
    (docs/concepts/effective-cost.md; the interval is the configured one or Daly's
    optimum), and at least ``min_margin_hours``.
    """
    if w.deadline_hours is None or w.unit_hours is None:
        return None
    elapsed_h = (now_s - horizon_start_s) / 3600.0
    left_h = w.deadline_hours - elapsed_h
    if done_unit_hours is None:
        frac = w.due_share(elapsed_h)
        remaining = w.unit_hours * (1.0 - frac)
    else:
        remaining = max(0.0, w.unit_hours - done_unit_hours)
    margin = max(min_margin_hours, _expected_loss_hours(w, hazard_per_hour, max(left_h, 0.0)))
    if remaining <= 0:
        return math.inf, margin
    # A job may grow back to its largest allowed size before the deadline, so
    # the slack is measured at that size: a plan that spreads the work evenly
    # to the deadline (zero slack at its own rate) is on schedule, not late.
    rate = work_per_hour
    if not can_grow:
        pass  # asked about running at exactly this rate (a shrink)
    elif w.max_units is not None:
        best = max(w.throughput.values(), default=1.0)
        rate = max(rate, w.max_units * best)
    elif w.workload_class is WorkloadClass.BATCH:
        rate = math.inf  # no parallelism cap: more capacity finishes sooner
    need_h = math.inf if rate <= 0 else remaining / rate + w.restart_hours
    return left_h - need_h, margin


def _expected_loss_hours(w: Workload, hazard_per_hour: float, hours: float) -> float:
    if hazard_per_hour <= 0 or hours <= 0:
        return 0.0
    if w.checkpoint_interval_minutes is not None:
        interval_h = w.checkpoint_interval_minutes / 60.0
    elif w.checkpoint_write_seconds > 0:
        interval_h = daly_interval(w.checkpoint_write_hours, 1.0 / hazard_per_hour)
    else:
        interval_h = 0.0  # nothing to checkpoint: the restart is the loss
    return hazard_per_hour * hours * (w.restart_hours + interval_h / 2.0)


def checkpoint_verdict(
    w: Workload,
    pool_key: str,
    *,
    window_s: float | None,
    latency_s: float,
    margin_s: float,
) -> CheckpointVerdict:
    """Whether a notice-triggered checkpoint completes in the window
    (docs/concepts/notice-window.md: counted only if it does; else the last periodic
    checkpoint is what restarts from). ``window_s`` ``None``: the provider's
    (``policies.checkpoint.NOTICE_SECONDS``: AWS 120 s, GCP 30 s)."""
    provider = pool_key.split("/", 1)[0]
    window = NOTICE_SECONDS.get(provider, 120.0) if window_s is None else max(0.0, window_s)
    used = max(0.0, latency_s) + margin_s
    budget = max(0.0, window - used)
    if w.workload_class is WorkloadClass.SERVING:
        note = f"stateless replicas: nothing to save; the hook may drain for {budget:.0f} s"
        return CheckpointVerdict(True, window, 0.0, budget, note)
    write = w.checkpoint_write_seconds
    fits = notice_checkpoint_fits(write, window, used)
    if fits:
        note = f"a {write:.0f} s checkpoint fits the {window:.0f} s notice ({budget:.0f} s left)"
    else:
        note = (
            f"a {write:.0f} s checkpoint does not fit the {window:.0f} s notice "
            f"({budget:.0f} s left): the job restarts from its last periodic checkpoint"
        )
    return CheckpointVerdict(fits, window, write, budget, note)
