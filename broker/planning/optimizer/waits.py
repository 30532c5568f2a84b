"""The wait-or-run-now line of a plan's explanation.

Owns: ``wait_options`` (the ways one deadline job could run its remaining
work, read from the problem) and ``wait_advice`` (``policies.waiting``'s
verdict over them). Options, per acceptable pool:

- on-demand: starts now;
- spot: starts at the first hour of the horizon whose spot capacity holds the
  job's instances (now if it does at once), and runs ``spot_factor`` times
  longer (checkpoints, lost work and restarts: the cost table's
  ``T_total / T_prod``);
- committed: starts now, only in a group the plan commits in.

A job whose gang minimum must sit on non-revocable tiers
(``min_on_non_revocable``, the training default) has no spot option.

Every option runs the job's largest gang (``max_units``, else
``min_units``) as whole instances; its run time is the remaining reference
work over the instances' work per hour, its cost that work at the tier's
dollars per productive unit-hour. The job's value of time is its own
(``Workload.value_of_time_usd_per_hour``). Jobs without a deadline, without
a gang size (a batch job with no ``max_units``), without work left or with
no option that must wait get no advice.

Must not: solve, change the plan, or read a market beyond the problem.
"""

from __future__ import annotations

import math

import numpy as np

from broker.planning.optimizer.problem import PlanningProblem
from markets.keys import CommitmentKey
from markets.model import Tier
from policies.waiting import RunOption, WaitVerdict, decide
from policies.workloads.spec import Workload, WorkloadClass

__all__ = ["wait_advice", "wait_options"]

_EPS = 1e-9


def _gang_units(w: Workload) -> int | None:
    if w.workload_class is WorkloadClass.SERVING:
        return None
    units = w.max_units or (w.min_units if w.min_units > 0 else None)
    return int(units) if units else None


def wait_options(
    problem: PlanningProblem, w: Workload, committed_groups: frozenset[str] = frozenset()
) -> list[RunOption]:
    """The options of the module docstring for ``w`` (empty: no advice)."""
    units = _gang_units(w)
    remaining = problem.remaining_unit_hours.get(w.name, w.unit_hours or 0.0)
    if units is None or remaining <= _EPS:
        return []
    out: list[RunOption] = []
    for e in problem.entries(w):
        n = math.ceil(units / e.units_per_instance - _EPS)
        rate = n * e.work_per_instance_hour
        if rate <= 0:
            continue
        hours = remaining / rate
        where = f"{e.instance_type} {{tier}} in {e.key.zone}"
        od = e.usd_per_work_hour.get(Tier.ON_DEMAND)
        if od is not None:
            out.append(RunOption(where.format(tier="on-demand"), 0.0, hours, remaining * od))
        cm = e.usd_per_work_hour.get(Tier.COMMITTED)
        group = str(CommitmentKey(e.key.provider, e.key.region, e.instance_type))
        if cm is not None and group in committed_groups:
            out.append(RunOption(where.format(tier="committed"), 0.0, hours, remaining * cm))
        spot = e.usd_per_work_hour.get(Tier.SPOT)
        if spot is None or e.spot_factor is None or w.max_spot_share <= 0:
            continue
        if w.non_revocable_min_units:  # the gang minimum may not sit on spot
            continue
        cap = np.asarray(problem.pool(e.pool_key).spot_capacity_instances, dtype=float)
        fits = np.flatnonzero(cap >= n - _EPS)
        if fits.size:
            out.append(
                RunOption(
                    where.format(tier="spot"),
                    float(fits[0]),
                    hours * e.spot_factor,
                    remaining * spot,
                )
            )
    return out


def wait_advice(
    problem: PlanningProblem, w: Workload, committed_groups: frozenset[str] = frozenset()
) -> WaitVerdict | None:
    """``policies.waiting.decide`` over ``wait_options`` for a deadline job."""
    deadline = problem.deadline_hour.get(w.name, w.deadline_hours)
    if deadline is None or not math.isfinite(deadline):
        return None
    options = wait_options(problem, w, committed_groups)
    if not any(o.wait_hours > 0 for o in options):
        return None  # nothing to wait for: no decision to explain
    return decide(
        options, value_of_time_usd_per_hour=w.value_of_time_usd_per_hour, deadline_hours=deadline
    )
