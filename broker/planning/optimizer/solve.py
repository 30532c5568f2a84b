"""Solve a ``PlanningProblem`` and turn the solution into a ``Plan`` with reasons.

Owns: the solve's course (small models as one MILP, larger ones by
relax-and-fix, ``search``), the proven lower bound and gap in ``plan.meta``,
the plan's status from that proof (``plan_status``: ``optimal`` only when the
gap to a proven bound is nil, ``within_gap`` when it is within the asked
``options.gap``, else ``feasible``; a solver's own "optimal" means "within its
gap tolerance" and is not taken at its word),
reading the solution into the plan's allocation table, the per-workload
explanations (effective-cost ranking, constraints that bound, wait or run
now: ``waits``), and turning an
infeasible model into an ``InfeasiblePlanError`` that lists the conflicting
constraints in words (and a solve that stopped at its time limit with no plan
into a ``SolverTimeLimitError``: nothing was proven infeasible).

Must not: build the model (``model``), drive a solver (``backend``: CBC
inside PuLP by default, HiGHS when ``highspy`` is installed) or bill a plan
(``broker.whatif.billing``).
"""

from __future__ import annotations

import dataclasses
import time

import pandas as pd
import pulp

from broker.planning.optimizer.backend import LpVariable, run_solver
from broker.planning.optimizer.budgets import binding
from broker.planning.optimizer.commitments import appraise, obligation_hours
from broker.planning.optimizer.model import BuiltModel, build_model
from broker.planning.optimizer.mps import columns
from broker.planning.optimizer.problem import PlanningProblem
from broker.planning.optimizer.quotas import binding_lines
from broker.planning.optimizer.regions import allow_list_lines
from broker.planning.optimizer.search import relax_and_fix
from broker.planning.optimizer.waits import wait_advice
from broker.planning.plan import (
    ALLOCATION_COLUMNS,
    PLAN_STATUSES,
    Commitment,
    Plan,
    WorkloadExplanation,
)
from markets.errors import InfeasiblePlanError, SolverTimeLimitError
from markets.model import Tier
from policies.waiting import WaitVerdict
from policies.workloads.placement import where
from policies.workloads.spec import WorkloadClass

__all__ = ["OPTIMAL_GAP", "gap_met", "plan_status", "solve"]

_EPS = 1e-6
_UNMET_EPS = 1e-6  # unit-hours
# A plan is "optimal" only when its gap to a proven lower bound is at most
# this (the solvers' own tolerances are 1e-6 to 1e-9 relative).
OPTIMAL_GAP = 1e-6


def plan_status(gap: float | None, target: float) -> str:
    """One of ``PLAN_STATUSES``: ``optimal`` (proven gap nil), ``within_gap`` (proven within
    ``target``) or ``feasible`` (nothing proven, or a gap above ``target``)."""
    optimal, within, feasible = PLAN_STATUSES
    if gap is None:
        return feasible
    if gap <= OPTIMAL_GAP:
        return optimal
    return within if gap_met(gap, target) else feasible


def gap_met(gap: float | None, target: float) -> bool:
    """Whether a proven ``gap`` reaches ``target`` (``None``: nothing proven)."""
    return gap is not None and gap <= target * (1.0 + 1e-9) + 1e-12


def solve(problem: PlanningProblem, *, integral: bool | None = None, explain: bool = True) -> Plan:
    """Build, solve and explain (``explain=False``: no ``plan.explanations``,
    for a caller that keeps only the allocations, such as the what-if's
    replayed loop: the reasons took ~8 % of each step's time).

    Raises ``InfeasiblePlanError`` when no plan meets the hard constraints
    (budgets, fixed commitments), and ``SolverTimeLimitError`` when the
    solver stopped at its time limit before it found any plan (the model
    may well be feasible).

    Small models (integer instance counts) go to the MILP solver directly.
    Larger ones are solved by relax-and-fix (``broker.planning.optimizer.search``):
    LP bound, whole gang blocks, an integer completion, and, with
    ``options.polish_s``, the MILP warm-started from that plan until it
    proves ``options.gap``. Either way ``plan.meta`` carries the proven
    ``lower_bound_usd`` and the ``gap`` to it (``None`` if nothing was proven),
    ``gap_target`` (``options.gap``) and ``gap_met``; ``plan.status`` says
    what that proves (``plan_status``).
    """
    if problem.committed_fixed is not None:
        return _solve(problem, integral, explain)[0]
    # The buy decision is the quick solve's: a proof (``polish_s``) is for
    # the horizon's plan below, which gets the whole time limit.
    proof = problem.options.polish_s > 0
    quick = dataclasses.replace(problem.options, polish_s=0.0)
    first, built = _solve(dataclasses.replace(problem, options=quick) if proof else problem,
                          integral, explain)  # fmt: skip
    if built.term is None:  # nothing valued over a term: this is the plan
        return _solve(problem, integral, explain)[0] if proof else first
    # The buy decision was made on the term's economics; the plan is the
    # horizon's with those commitments fixed (sunk from now on), so its
    # objective, bound and gap are in the horizon's dollars as before.
    plan, _ = _solve(dataclasses.replace(problem, committed_fixed=first.committed_instances()),
                     integral, explain)  # fmt: skip
    if problem.owned:
        plan.meta["owned_commitments"] = len(problem.owned)
    plan.meta.update(
        {
            "commitments_by": "term valuation",
            "term_objective_usd": first.objective_usd,
            "term_solve_s": first.meta_number("solve_s"),
        }
    )
    return plan


def _solve(
    problem: PlanningProblem, integral: bool | None, explain: bool = True
) -> tuple[Plan, BuiltModel]:
    opts = problem.options
    t0 = time.perf_counter()
    built = build_model(problem, integral=integral)
    build_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    ints = [v for v in columns(built.prob) if v.cat == pulp.LpInteger]
    search = None
    if not built.integral and ints:
        search = relax_and_fix(problem, built, start=t0)
    if search is None:
        left = max(1.0, opts.time_limit_s - (time.perf_counter() - t0))
        outcome = run_solver(built.prob, opts.solver, gap=opts.gap, time_limit_s=left)
        sol_status, bound, method = outcome.sol_status, outcome.bound, "milp"
        proven_by = "milp" if ints else "lp"
    else:
        sol_status, bound, method = search.status, search.bound, "relax-and-fix"
        proven_by = search.proven_by
    solve_s = time.perf_counter() - t1
    if sol_status not in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
        if sol_status == pulp.LpSolutionNoSolutionFound:
            # CBC and HiGHS stop at the time limit with "not solved": no
            # plan found, and nothing proven about whether one exists.
            raise SolverTimeLimitError(opts.time_limit_s)
        raise _infeasible(problem, built)
    objective = float(pulp.value(built.prob.objective) or 0.0)
    gap = None
    if bound is not None:
        gap = max(0.0, (objective - bound) / max(abs(objective), 1e-9))
    status = plan_status(gap, opts.gap)
    plan = _extract(problem, built, build_s, solve_s, opts.solver, status, explain)
    plan.meta.update(
        {"lower_bound_usd": bound, "gap": gap, "gap_target": opts.gap,
         "gap_met": gap_met(gap, opts.gap), "method": method, "bound_from": proven_by}
    )  # fmt: skip
    if search is not None:
        plan.meta.update(search.steps)
    if built.finish is not None and built.finish.finish:  # ``finish``: time's dollars apart
        plan.meta["value_of_time_usd"] = built.finish.usd()
        for w, hour in built.finish.hours().items():
            plan.meta[f"finish_hour:{w}"] = hour
    lengths = problem.period_lengths
    lost = sum(_val(a.var) * float(lengths[a.period]) * a.usd_per_instance_hour * (1.0 - a.held)
               for a in built.allocs if a.held < 1.0)  # fmt: skip
    if lost > 0.005:  # a gang's spot in the hours it is expected lost (``placement``)
        plan.meta["gang_spot_unheld_usd"] = lost
    if plan.unmet_total() > _UNMET_EPS:  # a budget that binds is why, not a saving
        limited = binding(problem, plan.allocations, plan.committed_usd_per_hour())
        plan = dataclasses.replace(plan, budget_limited=tuple(limited))
    return plan, built


def _val(v: LpVariable) -> float:
    x = v.value()
    return 0.0 if x is None else float(x)


def _extract(
    problem: PlanningProblem,
    built: BuiltModel,
    build_s: float,
    solve_s: float,
    solver: str,
    status: str,
    explain: bool = True,
) -> Plan:
    periods = problem.period_bounds
    rows = []
    plans = built.savings_plans
    for a in built.allocs:
        x = _val(a.var)
        if x <= _EPS:
            continue
        h0, h1 = periods[a.period]
        if plans is not None and a.tier is Tier.ON_DEMAND:
            # the part a Savings Plan pays is committed, at the plan's rate
            for _g, z, rate in plans.covered(a.var, _val):
                z = min(z, x)
                x -= z
                rows.append((a.period, h0, h1, a.workload, Tier.COMMITTED.value, a.pool_key, z,
                             z * a.units_per_instance, z * a.work_per_instance, rate))  # fmt: skip
            if x <= _EPS:
                continue
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
    used: dict[str, dict[tuple[str, int], float]] = {}
    for a in built.allocs:
        if a.tier is Tier.COMMITTED:
            cell = used.setdefault(a.group, {})
            cell[(a.workload, a.period)] = cell.get((a.workload, a.period), 0.0) + _val(a.var)
    term_h = obligation_hours(problem)
    for g, v in built.commit_vars.items():
        n = round(_val(v))
        pool = problem.pool(built.commit_pool[g])
        worth = appraise(problem, g, n, built.commit_price[g], used.get(g, {}),
                         built.owned.get(g, []))  # fmt: skip
        commitments.append(
            Commitment(
                g,
                built.commit_pool[g],
                n,
                n * pool.snap.instance.units,
                built.commit_price[g],
                problem.options.term_years,
                obligation_usd=worth.obligation_usd,
                monthly_saving_usd=worth.monthly_saving_usd(term_h),
                utilisation=worth.utilisation,
                breakeven_utilisation=worth.breakeven_utilisation,
                payment=problem.options.payment,
            )
        )
    if built.savings_plans is not None:  # bought in $0.001/h steps (``savings_plans``)
        commitments.extend(c for c in built.savings_plans.commitments(_val) if c.instances)
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
        status=status,
        solver=solver,
        solve_time_s=build_s + solve_s,
        integral=built.integral,
        unmet_unit_hours={w.name: unmet.get(w.name, 0.0) for w in problem.workloads.workloads},
        blocks=() if built.blocks is None else built.blocks.chosen(_val),
        meta={
            "build_s": build_s,
            "solve_s": solve_s,
            "variables": len(columns(built.prob)),
            "constraints": len(built.prob.constraints),
        },
    )
    if not explain:
        return plan
    explanations = {
        w.name: _explain(problem, built, plan, w.name) for w in problem.workloads.workloads
    }
    return Plan(**{**plan.__dict__, "explanations": explanations})


def _binding(built: BuiltModel, workload: str) -> list[str]:
    out = []
    # PuLP 3 warns on every dict-style ``prob.constraints`` read (~8,000 per
    # what-if week); its by-name lookup does not (absent before PuLP 3)
    row = getattr(built.prob, "get_constraint_by_name", None) or built.prob.constraints.get
    for cname, text in built.described.items():
        c = row(cname)
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
    binding = [*allow_list_lines(w), *binding_lines(problem, plan.allocations, name),
               *_binding(built, name)]  # ``regions``, ``quotas``  # fmt: skip
    if not ranking:  # the demand rows bind, but the cause is the market
        types = ", ".join(w.instance_types)
        binding = [f"{name}: no pool of the market offers its instance types ({types})"]
    advice = wait_advice(problem, w, frozenset(plan.committed_instances()))
    placed = None
    if w.workload_class is WorkloadClass.TRAINING:  # where the gang lives (its contract)
        held = a[a["instances"] > _EPS]
        placed = where(w.placement, w.mixed_types,
                       zip(held["hour_start"], held["pool_key"], strict=True))  # fmt: skip
    return WorkloadExplanation(
        workload=name,
        unit_hours_by_tier=by_tier,
        pools=[(k, t, v) for (k, t), v in pools],
        ranking=ranking[:5],
        binding=binding,
        unmet_unit_hours=plan.unmet_unit_hours.get(name, 0.0),
        waiting=_waiting_line(advice, a) if advice is not None else None,
        placement=placed,
    )


def _waiting_line(advice: WaitVerdict, allocations: pd.DataFrame) -> str:
    """The advice, and where the plan differs (its objective prices the
    finish hour to the end of a period, ``finish``; the advice to the hour)."""
    line = advice.sentence()
    first = int(allocations["hour_start"].min()) if not allocations.empty else None
    chosen_start = advice.chosen.wait_hours
    if first is not None and (
        (advice.waits and first < chosen_start) or (not advice.waits and first > 0)
    ):
        line += f" (the plan starts it at hour {first})"
    return line


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
