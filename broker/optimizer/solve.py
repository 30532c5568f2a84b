"""Solve a ``PlanningProblem`` and turn the solution into a ``Plan`` with reasons.

Owns: solver choice (CBC inside PuLP by default, HiGHS when ``highspy`` is
installed), reading the solution into the plan's allocation table, the
per-workload explanations (effective-cost ranking, constraints that bound),
and turning an infeasible model into an ``InfeasiblePlanError`` that lists the
conflicting constraints in words.

Must not: build the model (``model``) or bill a plan (``broker.billing``).
"""

from __future__ import annotations

import math
import time
from typing import Any

import pandas as pd
import pulp

from broker.optimizer.model import BuiltModel, build_model
from broker.optimizer.problem import PlanningProblem
from broker.plan import ALLOCATION_COLUMNS, Commitment, Plan, WorkloadExplanation
from markets.errors import InfeasiblePlanError, InputError
from markets.model import Tier
from policies.workloads import WorkloadClass

__all__ = ["solve"]

_EPS = 1e-6


def _solver(name: str, gap: float, time_limit_s: float) -> Any:
    if name == "cbc":
        return pulp.PULP_CBC_CMD(msg=False, gapRel=gap, timeLimit=time_limit_s)
    if name == "highs":
        try:
            import highspy  # noqa: F401
        except ImportError as e:
            raise InputError("--solver", None, "cbc, or install highspy for highs", got=name) from e
        return pulp.HiGHS(msg=False, gapRel=gap, timeLimit=time_limit_s)
    raise InputError("--solver", None, "one of cbc, highs", got=name)


def solve(problem: PlanningProblem, *, integral: bool | None = None) -> Plan:
    """Build, solve and explain. Raises ``InfeasiblePlanError`` when no plan
    meets the hard constraints (budgets, fixed commitments).

    Small models (integer instance counts) go to the MILP solver directly.
    Larger ones are solved by relax-and-fix: the LP relaxation gives a lower
    bound; commitments are rounded to whole instances and each training gang's
    sizes are rounded block by block so that its cumulative size never falls
    behind the relaxation's (carrying the rounding error forward); the LP is
    then re-solved with those fixed. The gap to the bound is reported; when it
    exceeds ``options.gap`` the MILP may polish it, warm-started from that
    plan, for ``options.polish_s``.
    """
    opts = problem.options
    t0 = time.perf_counter()
    built = build_model(problem, integral=integral)
    build_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    ints = [v for v in built.prob.variables() if v.cat == pulp.LpInteger]
    if built.integral or not ints:
        built.prob.solve(_solver(opts.solver, opts.gap, opts.time_limit_s))
        bound = None
    else:
        bound = _relax_and_fix(
            problem, built, ints, opts.gap, opts.time_limit_s, opts.solver, opts.polish_s
        )
    solve_s = time.perf_counter() - t1
    sol_status = built.prob.sol_status
    if sol_status not in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
        raise _infeasible(problem, built)
    plan = _extract(problem, built, build_s, solve_s, opts.solver, sol_status)
    if bound is not None:
        gap = (plan.objective_usd - bound) / max(abs(plan.objective_usd), 1e-9)
        plan.meta.update(
            {"lower_bound_usd": bound, "gap": max(gap, 0.0), "method": "relax-and-fix"}
        )
    else:
        plan.meta["method"] = "milp"
    return plan


def _relax_and_fix(
    problem: PlanningProblem,
    built: BuiltModel,
    ints: list[Any],
    gap: float,
    time_limit_s: float,
    solver_name: str,
    polish_s: float,
) -> float | None:
    """Returns the LP lower bound (None if the relaxation is infeasible)."""
    start = time.perf_counter()
    prob = built.prob
    for v in ints:
        v.cat = pulp.LpContinuous
    prob.solve(_solver(solver_name, gap, time_limit_s))
    if prob.sol_status != pulp.LpSolutionOptimal:
        return None
    bound = float(pulp.value(prob.objective) or 0.0)
    saved = {v.name: (v.lowBound, v.upBound) for v in ints}
    for v in built.commit_vars.values():
        n = float(round(_val(v)))
        v.lowBound = v.upBound = n
    for w in problem.workloads.workloads:
        keys = sorted(k for k in built.gang if k[0] == w.name)
        if keys:
            _fix_gang(built, w, keys, solver_name, gap, time_limit_s)
    prob.solve(_solver(solver_name, gap, time_limit_s))
    if prob.sol_status != pulp.LpSolutionOptimal:
        # Rounding broke a hard constraint: fall back to the MILP.
        for v in ints:
            v.lowBound, v.upBound = saved[v.name]
            v.cat = pulp.LpInteger
        prob.solve(
            _solver(solver_name, gap, max(1.0, time_limit_s - (time.perf_counter() - start)))
        )
        return bound
    fixed_obj = float(pulp.value(prob.objective) or 0.0)
    if (fixed_obj - bound) / max(abs(fixed_obj), 1e-9) <= gap:
        return bound
    left = min(polish_s, time_limit_s - (time.perf_counter() - start))
    if left < 1.0:
        return bound
    # Polish: the MILP from the rounded plan as incumbent.
    for v in prob.variables():
        v.setInitialValue(_val(v))
    for v in ints:
        v.lowBound, v.upBound = saved[v.name]
        v.cat = pulp.LpInteger
    solver = pulp.PULP_CBC_CMD(msg=False, gapRel=gap, timeLimit=left, warmStart=True)
    if solver_name != "cbc":
        solver = _solver(solver_name, gap, left)
    prob.solve(solver)
    return bound


def _fix_gang(
    built: BuiltModel,
    w: Any,
    keys: list[tuple[str, int]],
    solver_name: str,
    gap: float,
    time_limit_s: float,
) -> None:
    """Round one training job's gang to whole decisions.

    The relaxation spreads a fractional gang over every block (a gang of 8.5
    GPUs whose minimum is 16); the integer answer is to run a whole gang in
    fewer blocks. Try running in the k blocks the relaxation used most, for a
    few k, with the size left continuous; keep the cheapest k; then round each
    block's size to an allowed step, carrying the rounding error forward so
    the cumulative size never falls behind.
    """
    prob = built.prob
    order = sorted(keys, key=lambda k: (-_val(built.gang[k][0]), k[1]))
    used = sum(_val(built.gang[k][0]) for k in keys)
    candidates = sorted({min(len(keys), max(1, math.ceil(used * f))) for f in (1, 2)})
    candidates.append(len(keys))
    best: tuple[float, int] | None = None
    for k in dict.fromkeys(candidates):
        for i, key in enumerate(order):
            r, _n = built.gang[key]
            r.lowBound = r.upBound = 1.0 if i < k else 0.0
        prob.solve(_solver(solver_name, gap, time_limit_s))
        if prob.sol_status != pulp.LpSolutionOptimal:
            continue
        obj = float(pulp.value(prob.objective) or 0.0)
        if best is None or obj < best[0] - 1e-9:
            best = (obj, k)
    k_best = best[1] if best is not None else len(keys)
    for i, key in enumerate(order):
        r, _n = built.gang[key]
        r.lowBound = r.upBound = 1.0 if i < k_best else 0.0
    prob.solve(_solver(solver_name, gap, time_limit_s))
    sizes = w.gang_sizes()
    carry = 0.0
    for key in keys:
        r, n = built.gang[key]
        if _val(r) < 0.5:
            n.lowBound = n.upBound = 0.0
            continue
        target = w.step_units * _val(n) + carry
        steps = min(len(sizes) - 1, max(0, math.ceil(target / w.step_units - 1e-6)))
        carry = target - steps * w.step_units
        n.lowBound = n.upBound = float(steps)


def _val(v: Any) -> float:
    x = v.value()
    return 0.0 if x is None else float(x)


def _extract(
    problem: PlanningProblem,
    built: BuiltModel,
    build_s: float,
    solve_s: float,
    solver: str,
    sol_status: int,
) -> Plan:
    periods = problem.period_bounds
    rows = []
    for a in built.allocs:
        x = _val(a.var)
        if x <= _EPS:
            continue
        h0, h1 = periods[a.period]
        rows.append(
            (
                a.period,
                h0,
                h1,
                a.workload,
                a.tier.value,
                a.pool_key,
                x,
                x * a.units_per_instance,
                x * a.work_per_instance,
                a.usd_per_instance_hour,
            )
        )
    table = pd.DataFrame(rows, columns=ALLOCATION_COLUMNS)
    commitments = []
    for g, v in built.commit_vars.items():
        n = round(_val(v))
        pool = problem.pool(built.commit_pool[g])
        commitments.append(
            Commitment(
                g,
                built.commit_pool[g],
                n,
                n * pool.snap.instance.units,
                built.commit_price[g],
                problem.options.term_years,
            )
        )
    lengths = problem.period_lengths
    unmet: dict[str, float] = {}
    for (w, t), v in built.unmet_serving.items():
        unmet[w] = unmet.get(w, 0.0) + _val(v) * float(lengths[t])
    for w, v in built.unmet_work.items():
        unmet[w] = unmet.get(w, 0.0) + _val(v)
    plan = Plan(
        start=problem.start,
        hours=problem.hours,
        period_hours=problem.options.period_hours,
        commitments=tuple(sorted(commitments, key=lambda c: c.group)),
        allocations=table,
        objective_usd=float(pulp.value(built.prob.objective) or 0.0),
        status="optimal" if sol_status == pulp.LpSolutionOptimal else "feasible",
        solver=solver,
        solve_time_s=build_s + solve_s,
        integral=built.integral,
        unmet_unit_hours={w.name: unmet.get(w.name, 0.0) for w in problem.workloads.workloads},
        meta={
            "build_s": build_s,
            "solve_s": solve_s,
            "variables": len(built.prob.variables()),
            "constraints": len(built.prob.constraints),
        },
    )
    explanations = {
        w.name: _explain(problem, built, plan, w.name) for w in problem.workloads.workloads
    }
    return Plan(**{**plan.__dict__, "explanations": explanations})


def _binding(built: BuiltModel, workload: str) -> list[str]:
    out = []
    for cname, text in built.described.items():
        c = built.prob.constraints.get(cname)
        if c is None:
            continue
        if not (text.startswith(f"{workload}:") or text.startswith(("fleet", "spot capacity"))):
            continue
        value = c.value()
        if value is not None and abs(value) <= 1e-6 and text not in out:
            if text.startswith("spot capacity") and not _uses_pool(built, workload, text):
                continue
            out.append(text)
    return out


def _uses_pool(built: BuiltModel, workload: str, text: str) -> bool:
    return any(
        a.workload == workload and a.tier is Tier.SPOT and a.pool_key in text and _val(a.var) > _EPS
        for a in built.allocs
    )


def _explain(
    problem: PlanningProblem, built: BuiltModel, plan: Plan, name: str
) -> WorkloadExplanation:
    w = problem.workloads.by_name(name)
    a = plan.allocations[plan.allocations["workload"] == name]
    hours = (a["hour_end"] - a["hour_start"]).astype(float)
    uh = a["units"] * hours
    by_tier = {t.value: float(uh[a["tier"] == t.value].sum()) for t in Tier}
    totals: dict[tuple[str, str], float] = {}
    for key, tier, v in zip(a["pool_key"], a["tier"], uh, strict=True):
        totals[(key, tier)] = totals.get((key, tier), 0.0) + float(v)
    pools = sorted(totals.items(), key=lambda kv: -kv[1])
    ranking: list[tuple[str, str, float]] = []
    for e in problem.entries(w):
        for tier in (Tier.SPOT, Tier.ON_DEMAND, Tier.COMMITTED):
            p = e.usd_per_work_hour[tier]
            if p is not None and (tier is not Tier.SPOT or w.max_spot_share > 0):
                ranking.append((e.pool_key, tier.value, p))
    ranking.sort(key=lambda r: r[2])
    return WorkloadExplanation(
        workload=name,
        unit_hours_by_tier=by_tier,
        pools=[(k, t, v) for (k, t), v in pools],
        ranking=ranking[:5],
        binding=_binding(built, name),
        unmet_unit_hours=plan.unmet_unit_hours.get(name, 0.0),
    )


def _infeasible(problem: PlanningProblem, built: BuiltModel) -> InfeasiblePlanError:
    """Name the hard constraints that cannot hold together.

    Every demand has an unmet-penalty escape, so only dollar limits and fixed
    commitments can conflict: check each against the least any plan must pay.
    """
    conflicts: list[str] = []
    fixed_usd_h = sum(
        (problem.committed_fixed or {}).get(g, 0) * p for g, p in built.commit_price.items()
    )
    ws = problem.workloads
    if ws.budget_usd_per_hour is not None and fixed_usd_h > ws.budget_usd_per_hour:
        conflicts.append(
            f"fixed commitments cost ${fixed_usd_h:,.2f}/h, above the fleet budget "
            f"${ws.budget_usd_per_hour:,.2f}/h"
        )
    if ws.budget_usd is not None and fixed_usd_h * problem.hours > ws.budget_usd:
        conflicts.append(
            f"fixed commitments cost ${fixed_usd_h * problem.hours:,.2f} over {problem.hours} h, "
            f"above the fleet budget ${ws.budget_usd:,.2f}"
        )
    for w in ws.workloads:
        if w.workload_class is WorkloadClass.TRAINING and w.non_revocable_min_units:
            conflicts.append(
                f"{w.name}: a gang minimum of {w.min_units} units on non-revocable tiers may not "
                "fit its instance sizes or budget"
            )
    if not conflicts:
        conflicts = sorted({t for t in built.described.values() if "budget" in t})
    return InfeasiblePlanError("no plan meets every hard constraint", conflicts)
