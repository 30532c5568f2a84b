"""Relax-and-fix for large models: a lower bound, a plan, and, when asked, proof.

Owns: ``relax_and_fix`` and its ``Search`` record. The model's integer
decisions are few (commitments C_g; per training gang block, running R_b and
extra steps N_b); everything else is continuous. So:

1. LP relaxation: the lower bound.
2. Rounding (``rounding``): ``quick_round`` by default (nearest commitments,
   the k most-used gang blocks, steps rounded up): a few LPs.
3. With ``options.polish_s`` > 0 (a proven gap is wanted) instead:
   ``pattern_search`` for whole gang blocks, ``round_up`` for a plan that is
   feasible for sure, then the *integer completion*: with R fixed, C and N
   integer is a small MILP whose LP is tight, solved from that plan to
   ``gap / 10`` within ``_COMPLETION_S``; and if the gap to the bound is
   still above ``gap``, the *proof*: the full MILP warm-started from that
   plan, solver heuristics off (``backend``: ``bound_only``), until it proves
   ``gap`` or ``polish_s`` (or ``time_limit_s``) runs out. Its best bound
   replaces the LP's when higher.

The bound reported is always a proven one: the LP optimum, or the MILP
solver's best bound, of the model as built (``model``: spot pools beyond the
``max_spot_pools`` cheapest per workload are not in it). ``Search.status`` is
never "optimal" for a rounded plan: whether it is optimal, or within the asked
gap, is for its gap to that bound to say (``solve.plan_status``).

Must not: read plans or explain (``solve``); build the model (``model``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pulp

from broker.planning.optimizer.backend import LpProblem, LpVariable, Outcome, run_solver
from broker.planning.optimizer.model import BuiltModel
from broker.planning.optimizer.mps import columns
from broker.planning.optimizer.problem import PlanningProblem
from broker.planning.optimizer.rounding import load, pattern_search, quick_round, round_up

__all__ = ["MIN_PROOF_S", "Search", "relax_and_fix"]

# variable name -> (lowBound, upBound) as the model had them
Bounds = dict[str, tuple[float | None, float | None]]

# The integer completion's time cap: its LP is tight, so it usually ends in a
# fraction of this; when not, its best plan so far is taken.
_COMPLETION_S = 1.5
# ... and the gap it stops at, as a share of the asked gap: close to the
# optimum it leaves the proof little to find.
_COMPLETION_GAP_SHARE = 0.1
# Less of the time limit left than this and no proof starts: CBC would spend
# it reading the model and its start, and return no better bound.
MIN_PROOF_S = 0.5


@dataclass
class Search:
    """What relax-and-fix did: the proven bound, the plan's status, and how
    many LPs/MILPs each phase took (for the benchmark)."""

    bound: float | None = None
    status: int = pulp.LpSolutionNoSolutionFound
    steps: dict[str, float] = field(default_factory=dict)
    proven_by: str = "lp"


def relax_and_fix(
    problem: PlanningProblem, built: BuiltModel, *, start: float | None = None
) -> Search | None:
    """Steps 1-3 of the module docstring; ``None`` when the relaxation is
    infeasible or a rounded plan breaks a hard constraint (the caller then
    solves the MILP directly). Leaves the model's integer variables as built."""
    opts = problem.options
    t0 = start if start is not None else time.perf_counter()

    def left() -> float:
        return opts.time_limit_s - (time.perf_counter() - t0)

    prob = built.prob
    ints = [v for v in columns(prob) if v.cat == pulp.LpInteger]
    saved = {v.name: (v.lowBound, v.upBound) for v in ints}
    out = Search()

    def lp() -> Outcome:  # each LP may take the whole limit, as a plain solve's LP may
        return run_solver(prob, opts.solver, gap=opts.gap, time_limit_s=opts.time_limit_s)

    try:
        for v in ints:
            v.cat = pulp.LpContinuous
        t = time.perf_counter()
        out.bound = lp().bound
        out.steps["lp_s"] = time.perf_counter() - t
        if out.bound is None:
            return None
        t = time.perf_counter()
        if opts.polish_s <= 0:
            fixed = quick_round(problem, built, lp)
            out.steps["rounding_s"] = time.perf_counter() - t
            if fixed is None:
                return None
            # A plan, optimal only for the LP with its integers fixed: what it
            # proves is its gap to the bound (``solve.plan_status``).
            out.status = pulp.LpSolutionIntegerFeasible
            return out
        n = pattern_search(problem, built, lp, lambda: left() - 0.5 * opts.time_limit_s)
        out.steps["pattern_lps"] = float(n)
        out.steps["pattern_s"] = time.perf_counter() - t
        incumbent = _complete(problem, built, ints, saved, lp, left, out)
        if incumbent is None:
            return None
        budget = min(opts.polish_s, left())
        out.steps["proof_left_s"] = budget  # recorded whether or not a proof starts
        if _gap(incumbent, out.bound) > opts.gap and budget >= MIN_PROOF_S:
            _prove(built, ints, saved, incumbent, budget, out, opts.solver, opts.gap)
        return out
    finally:
        _restore(ints, saved)


def _complete(
    problem: PlanningProblem,
    built: BuiltModel,
    ints: list[LpVariable],
    saved: Bounds,
    lp: Callable[[], Outcome],
    left: Callable[[], float],
    out: Search,
) -> float | None:
    """Integer completion with the gang pattern fixed; returns the objective."""
    t = time.perf_counter()
    rounded = round_up(problem, built, lp)
    if rounded is None:
        return None
    gang_r = {id(r) for r, _n in built.gang.values()}
    gang_r |= {id(r) for g in built.gangs.values() for r in g.placement_vars()}  # placements
    for v in ints:
        if id(v) not in gang_r:
            v.cat = pulp.LpInteger
            v.lowBound, v.upBound = saved[v.name]
    values = _values(built.prob)
    opts = problem.options
    done = run_solver(
        built.prob,
        opts.solver,
        gap=opts.gap * _COMPLETION_GAP_SHARE,
        time_limit_s=max(0.5, min(_COMPLETION_S, 0.2 * left())),
        warm=True,
    )
    incumbent = rounded
    out.status = pulp.LpSolutionIntegerFeasible
    if done.has_solution and done.objective is not None and done.objective < rounded:
        incumbent = done.objective
        out.status = done.sol_status
    else:
        load(built.prob, values)
    out.steps["completion_s"] = time.perf_counter() - t
    return incumbent


def _prove(
    built: BuiltModel,
    ints: list[LpVariable],
    saved: Bounds,
    incumbent: float,
    budget_s: float,
    out: Search,
    solver: str,
    gap: float,
) -> None:
    """The full MILP warm-started from the plan loaded in ``built``."""
    values = _values(built.prob)
    _restore(ints, saved)
    t = time.perf_counter()
    out.steps["proof_limit_s"] = budget_s  # what was left of time_limit_s when it began
    proof = run_solver(
        built.prob, solver, gap=gap, time_limit_s=budget_s, warm=True, bound_only=True
    )
    out.steps["proof_s"] = time.perf_counter() - t
    if proof.has_solution and proof.objective is not None and proof.objective <= incumbent + 1e-6:
        out.status = proof.sol_status
    else:  # the solver lost the start (time out before reading it): keep ours
        load(built.prob, values)
    if proof.bound is not None and proof.bound > (out.bound or -math.inf):
        out.bound = proof.bound
        out.proven_by = "milp"


def _gap(objective: float, bound: float | None) -> float:
    if bound is None:
        return math.inf
    return max(0.0, (objective - bound) / max(abs(objective), 1e-9))


def _restore(ints: list[LpVariable], saved: Bounds) -> None:
    for v in ints:
        v.lowBound, v.upBound = saved[v.name]
        v.cat = pulp.LpInteger


def _values(prob: LpProblem) -> dict[str, float | None]:
    return {v.name: v.varValue for v in columns(prob)}
