"""Whole gang blocks and whole commitments from the LP relaxation.

Owns the rounding steps of relax-and-fix (``search``), each working on a
``BuiltModel`` whose integer variables are temporarily continuous, through a
``resolve`` callback that re-solves the LP in place:

- ``quick_round``: the fast rounding every plain solve uses. Commitments to
  the nearest whole instance; reserved-ahead offerings bought whole
  (``fix_blocks``: those the relaxation used, or none); each gang narrowed to one placement per
  block (``placement.narrow_placements``); per gang, run whole blocks in the k blocks the
  relaxation used most, for a few k (the cheapest LP wins); then each block's
  size rounded up to an allowed step, the rounding error carried forward so
  the cumulative size never falls behind the relaxation's (each running
  block's placement is fixed first, ``placement.fix_placements``, so the
  size adapts to that placement's capacity); last, a placed gang's
  instance counts whole (``placement.whole_instances``).
- ``pattern_search``: the thorough one (when a proven gap is asked for).
  Consecutive blocks with about the same relaxed R_b (hours with the same
  demand and prices get the same R) form a run; a run with mass sum(R_b)
  becomes k whole blocks, contiguous and next to a running neighbour (a stop
  and restart costs churn), k = round(mass) first, then moved one block at a
  time while the LP (R fixed, C and N free) gets cheaper.
- ``round_up``: each running block's placement fixed, commitments rounded
  up (down if a budget binds) and steps carried as above: a whole plan
  before the integer completion.

Must not: choose solvers or report (``search``/``solve`` do).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pulp

from broker.planning.optimizer.backend import LpProblem, LpVariable, Outcome
from broker.planning.optimizer.model import BuiltModel
from broker.planning.optimizer.mps import restore, solution
from broker.planning.optimizer.placement import (
    fix_placements,
    narrow_placements,
    whole_instances,
)
from broker.planning.optimizer.problem import PlanningProblem
from policies.workloads.spec import Workload

__all__ = ["pattern_search", "quick_round", "round_up"]

Resolve = Callable[[], Outcome]
_EPS = 1e-6
# Blocks whose relaxed R differs by less than this form one run.
_RUN_TOLERANCE = 0.05


def _val(v: LpVariable) -> float:
    x = v.value()
    return 0.0 if x is None else float(x)


def _solved(res: Outcome) -> float | None:
    if res.sol_status != pulp.LpSolutionOptimal or res.objective is None:
        return None
    return res.objective


def _gang_keys(built: BuiltModel, w: Workload) -> list[tuple[str, int]]:
    return sorted(k for k in built.gang if k[0] == w.name)


def _fix(built: BuiltModel, key: tuple[str, int], on: float) -> None:
    r, _n = built.gang[key]
    r.lowBound = r.upBound = on


def fix_blocks(built: BuiltModel, resolve: Resolve) -> None:
    """Each reserved-ahead offering bought whole or not (``blocks``): every
    offering the relaxation used bought, or none, whichever LP is cheaper."""
    ys = [] if built.blocks is None else [
        y for y in built.blocks.bought.values() if y.lowBound != y.upBound]  # fmt: skip
    if not ys:
        return
    used = {y.name: _val(y) > _EPS for y in ys}
    best: tuple[float, bool] | None = None
    for buy in (True, False):
        for y in ys:
            y.lowBound = y.upBound = 1.0 if buy and used[y.name] else 0.0
        obj = _solved(resolve())
        if obj is not None and (best is None or obj < best[0] - 1e-9):
            best = (obj, buy)
    buy = best is not None and best[1]
    for y in ys:
        y.lowBound = y.upBound = 1.0 if buy and used[y.name] else 0.0


def _carry_steps(built: BuiltModel, w: Workload) -> None:
    """Each running block's steps rounded up with the error carried forward."""
    steps = ((w.max_units or 0) - w.min_units) // max(1, w.step_units)
    carry = 0.0
    for key in _gang_keys(built, w):
        r, n = built.gang[key]
        if _val(r) < 0.5:
            n.lowBound = n.upBound = 0.0
            continue
        target = _val(n) + carry
        k = min(steps, max(0, math.ceil(target - _EPS)))
        carry = target - k
        n.lowBound = n.upBound = float(k)


# --- quick ----------------------------------------------------------------------


def _final_solve(built: BuiltModel, resolve: Resolve) -> float | None:
    """The rounded plan's LP objective, each job charged its true finish hour
    (``finish.FinishTerms.round_done``: its done-by variables fixed to what the
    rounded plan's work shows, then solved once more)."""
    if built.finish is not None and built.finish.done:
        if _solved(resolve()) is None:
            return None
        built.finish.round_done()
    return _solved(resolve())


def quick_round(problem: PlanningProblem, built: BuiltModel, resolve: Resolve) -> float | None:
    """See the module docstring; the LP objective after rounding, or ``None``
    if the rounded plan breaks a hard constraint."""
    for v in built.commit_vars.values():
        v.lowBound = v.upBound = float(round(_val(v)))
    fix_blocks(built, resolve)
    # one placement per block
    narrow_placements(list(built.gangs.values()), resolve, prob=built.prob)
    for w in problem.workloads.workloads:
        keys = _gang_keys(built, w)
        if not keys:
            continue
        order = sorted(keys, key=lambda k: (-_val(built.gang[k][0]), k[1]))
        used = sum(_val(built.gang[k][0]) for k in keys)
        # k = 0 is a candidate when the relaxation runs no block at all (a job
        # whose work is done, or not due in this horizon): forcing one block on
        # ran a finished gang for an hour at every re-plan.
        candidates = sorted({min(len(keys), math.ceil(used * f - _EPS)) for f in (1, 2)})
        candidates.append(len(keys))
        best: tuple[float, int] | None = None
        tried = list(dict.fromkeys(candidates))
        kept: list[float | None] = []  # the best k's solution, loaded again below
        for k in tried:
            for i, key in enumerate(order):
                _fix(built, key, 1.0 if i < k else 0.0)
            obj = _solved(resolve())
            if obj is not None and (best is None or obj < best[0] - 1e-9):
                best = (obj, k)
                kept = solution(built.prob)
        k_best = best[1] if best is not None else len(keys)
        for i, key in enumerate(order):
            _fix(built, key, 1.0 if i < k_best else 0.0)
        if best is not None and k_best != tried[-1]:
            # the same LP's solution, kept rather than solved again (else it
            # is the LP solved last, and loaded)
            restore(built.prob, kept)
        if w.name in built.gangs:  # where each running block is, before its size
            fix_placements([built.gangs[w.name]], resolve)
        _carry_steps(built, w)
    return whole_instances(list(built.gangs.values()), resolve, _final_solve(built, resolve))


# --- thorough -------------------------------------------------------------------


def _runs(r: list[float]) -> list[tuple[int, int]]:
    """Maximal runs [i, j) of fractional blocks with about the same value."""
    out: list[tuple[int, int]] = []
    i = 0
    while i < len(r):
        if _EPS < r[i] < 1 - _EPS:
            j = i + 1
            while j < len(r) and _EPS < r[j] < 1 - _EPS and abs(r[j] - r[i]) <= _RUN_TOLERANCE:
                j += 1
            out.append((i, j))
            i = j
        else:
            i += 1
    return out


def _values(prob: LpProblem) -> dict[str, float | None]:
    return {v.name: v.varValue for v in prob.variables()}


def load(prob: LpProblem, values: dict[str, float | None]) -> None:
    """Put saved variable values back (a solve that lost them)."""
    for v in prob.variables():
        v.varValue = values[v.name]


def pattern_search(
    problem: PlanningProblem,
    built: BuiltModel,
    resolve: Resolve,
    time_left_s: Callable[[], float],
) -> int:
    """Fix every gang's R_b to whole blocks (module docstring); leaves the
    best pattern's LP solution loaded. Returns the number of LPs solved."""
    # one placement per block
    narrow_placements(list(built.gangs.values()), resolve, prob=built.prob)
    n = 3 * len(built.gangs)
    for w in problem.workloads.workloads:
        keys = _gang_keys(built, w)
        if keys:
            n += _gang_pattern(built, keys, resolve, time_left_s)
    return n


def _gang_pattern(
    built: BuiltModel,
    keys: list[tuple[str, int]],
    resolve: Resolve,
    time_left_s: Callable[[], float],
) -> int:
    r0 = [_val(built.gang[k][0]) for k in keys]
    runs = _runs(r0)
    base = [1 if x >= 0.5 else 0 for x in r0]
    counts = {run: min(run[1] - run[0], round(sum(r0[run[0] : run[1]]))) for run in runs}

    def fix(ks: dict[tuple[int, int], int]) -> None:
        p = list(base)
        for (i, j), k in ks.items():
            p[i:j] = [0] * (j - i)
            left_on = i > 0 and base[i - 1] == 1
            right_on = j < len(p) and base[j] == 1
            if right_on and not left_on:
                p[j - k : j] = [1] * k
            else:
                p[i : i + k] = [1] * k
        for key, on in zip(keys, p, strict=True):
            _fix(built, key, float(on))

    fix(counts)
    if not runs:
        return 0
    best = _solved(resolve()) or math.inf
    best_values = _values(built.prob)
    n = 1
    # One pass of coordinate descent, biggest runs first.
    for run in sorted(runs, key=lambda rn: -sum(r0[rn[0] : rn[1]])):
        length = run[1] - run[0]
        for step in (1, -1):
            moved = False
            while time_left_s() > 0:
                k = counts[run] + step
                if not 0 <= k <= length:
                    break
                trial = {**counts, run: k}
                fix(trial)
                obj = _solved(resolve())
                n += 1
                if obj is None or obj >= best - 1e-7:
                    break
                best, counts, moved = obj, trial, True
                best_values = _values(built.prob)
            if moved:
                break
    fix(counts)
    load(built.prob, best_values)
    return n


def round_up(problem: PlanningProblem, built: BuiltModel, resolve: Resolve) -> float | None:
    """Commitments rounded up (never short of what the relaxation used; down
    instead when that breaks a budget) and the LP re-solved, so the gang
    sizes adapt to them; then steps carried. The LP objective, ``None`` if a
    hard constraint still breaks."""
    fix_placements(list(built.gangs.values()), resolve)  # one placement per running block
    fix_blocks(built, resolve)
    relaxed = {g: _val(v) for g, v in built.commit_vars.items()}
    ways: tuple[Callable[[float], int], ...] = (
        lambda x: math.ceil(x - _EPS),
        lambda x: math.floor(x + _EPS),
    )
    for how in ways:
        for g, v in built.commit_vars.items():
            v.lowBound = v.upBound = float(how(relaxed[g]))
        if _solved(resolve()) is not None:
            break
    else:
        return None
    for w in problem.workloads.workloads:
        _carry_steps(built, w)
    return _final_solve(built, resolve)
