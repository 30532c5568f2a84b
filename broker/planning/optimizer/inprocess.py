"""A PuLP model held in HiGHS's own memory, as arrays, changed in place between solves.

Owns: ``solve_in_process`` (one solve of a PuLP model by ``highspy``, its
values, reduced costs, row activities and duals set on the model as PuLP's
HiGHS interface sets them) and the ``_Held`` model kept with the PuLP model.

Why: relax-and-fix solves one step's model ~9 times, changing only column
bounds and categories between solves (``search``, ``rounding``). The model's
arrays (CSC matrix, costs, row bounds: ``numpy``) are built once per model
structure (the signature of ``mps``: rows and objective are not edited after
the first solve) and passed to one ``highspy.Highs``; each later solve hands
over only the columns whose bounds or category changed, and HiGHS starts from
the basis it holds (a warm start) instead of a cold solve after writing and
reading an MPS file through a CBC process.

Must not: decide solver options beyond what it is told (``backend``) or build
models (``model``).
"""

# PuLP ships no type hints: its objects are Any here (see ``backend``).

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pulp

from broker.planning.optimizer.mps import columns

__all__ = ["solve_in_process"]

_ATTR = "_spotfolio_highs"  # where the held model lives on the LpProblem
_INF = math.inf
FloatArray = npt.NDArray[np.float64]

# HiGHS heuristics turned off when only the bound is wanted (``backend``)
BOUND_ONLY = (
    "mip_heuristic_run_rins",
    "mip_heuristic_run_rens",
    "mip_heuristic_run_root_reduced_cost",
    "mip_heuristic_run_feasibility_jump",
)


@dataclass
class _Held:
    signature: tuple[int, int, int]
    highs: Any  # highspy.Highs with the model passed
    lower: FloatArray  # column bounds and integrality as HiGHS holds them now
    upper: FloatArray
    integer: npt.NDArray[np.bool_]
    le_rows: npt.NDArray[np.bool_]  # rows of sense <= (their slack's sign flips)
    constants: FloatArray  # each row's constant (PuLP keeps it on the left)


_banner_done = False


def _quiet_banner() -> None:
    """HiGHS prints a two-line banner on stdout when the first ``Highs`` is
    made, before any option can silence it; it would corrupt ``--json``
    output. Make that first one with stdout pointed at /dev/null."""
    global _banner_done
    if _banner_done:
        return
    import highspy

    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            # highspy's constructor carries no annotations: called through a
            # typed name so the strict check knows what it returns.
            make: Callable[[], object] = highspy.Highs
            make()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    _banner_done = True


def _signature(prob: Any) -> tuple[int, int, int]:
    obj = prob.objective
    return (len(prob._constraints), id(obj), 0 if obj is None else len(obj))


def _column_state(vs: list[Any]) -> tuple[FloatArray, FloatArray, npt.NDArray[np.bool_]]:
    lower = np.fromiter((-_INF if v.lowBound is None else v.lowBound for v in vs), float, len(vs))
    upper = np.fromiter((_INF if v.upBound is None else v.upBound for v in vs), float, len(vs))
    integer = np.fromiter((v.cat == pulp.LpInteger for v in vs), bool, len(vs))
    return lower, upper, integer


def _build(prob: Any, signature: tuple[int, int, int]) -> _Held:
    import highspy

    vs = columns(prob)
    at = {id(v): i for i, v in enumerate(vs)}
    cons = list(prob._constraints.values())
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    row_lower = np.full(len(cons), -_INF)
    row_upper = np.full(len(cons), _INF)
    for j, c in enumerate(cons):
        for v, value in c.items():
            if value:
                rows.append(j)
                cols.append(at[id(v)])
                vals.append(value)
        lb, ub = c.getLb(), c.getUb()
        if lb is not None:
            row_lower[j] = lb
        if ub is not None:
            row_upper[j] = ub
    sign = -1.0 if prob.sense == pulp.LpMaximize else 1.0
    cost = np.zeros(len(vs))
    if prob.objective is not None:
        for v, value in prob.objective.items():
            i = at.get(id(v))
            if i is not None:
                cost[i] = sign * value
    order = np.lexsort((np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)))
    col_idx = np.asarray(cols, dtype=np.int64)[order]
    lower, upper, integer = _column_state(vs)
    lp = highspy.HighsLp()
    lp.num_col_ = len(vs)
    lp.num_row_ = len(cons)
    lp.col_cost_ = cost
    # the objective's constant: HiGHS's bound is on the whole objective, as PuLP's value
    lp.offset_ = sign * float(prob.objective.constant) if prob.objective is not None else 0.0
    lp.col_lower_ = lower
    lp.col_upper_ = upper
    lp.row_lower_ = row_lower
    lp.row_upper_ = row_upper
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = np.searchsorted(col_idx, np.arange(len(vs) + 1)).astype(np.int32)
    lp.a_matrix_.index_ = np.asarray(rows, dtype=np.int32)[order]
    lp.a_matrix_.value_ = np.asarray(vals, dtype=float)[order]
    lp.integrality_ = [
        highspy.HighsVarType.kInteger if x else highspy.HighsVarType.kContinuous for x in integer
    ]
    _quiet_banner()
    # highspy's constructor carries no annotations (as in ``backend``)
    make: Callable[[], Any] = highspy.Highs
    h = make()
    h.setOptionValue("output_flag", False)
    h.passModel(lp)
    le = np.fromiter((c.sense == pulp.LpConstraintLE for c in cons), bool, len(cons))
    consts = np.fromiter((c.constant for c in cons), float, len(cons))
    return _Held(signature, h, lower, upper, integer, le, consts)


def _held(prob: Any) -> _Held:
    sig = _signature(prob)
    got: _Held | None = getattr(prob, _ATTR, None)
    if got is not None and got.signature == sig:
        _update(got, columns(prob))
        return got
    got = _build(prob, sig)
    setattr(prob, _ATTR, got)
    return got


def _update(held: _Held, vs: list[Any]) -> None:
    """Hand HiGHS the columns whose bounds or category changed since it last saw them."""
    import highspy

    lower, upper, integer = _column_state(vs)
    moved = np.flatnonzero((lower != held.lower) | (upper != held.upper))
    if moved.size:
        held.highs.changeColsBounds(moved.size, moved.astype(np.int32), lower[moved], upper[moved])
    kind = np.flatnonzero(integer != held.integer)
    if kind.size:
        types = np.where(
            integer[kind], int(highspy.HighsVarType.kInteger), int(highspy.HighsVarType.kContinuous)
        ).astype(np.uint8)
        held.highs.changeColsIntegrality(kind.size, kind.astype(np.int32), types)
    held.lower, held.upper, held.integer = lower, upper, integer


def solve_in_process(
    prob: Any, *, gap: float, time_limit_s: float, warm: bool, bound_only: bool
) -> tuple[int, float | None]:
    """Solve ``prob`` in place; returns PuLP's solution status and, for a MILP,
    HiGHS's best bound (``None`` when it has none). ``warm``: a MILP starts
    from the variables' current values."""
    import highspy

    held = _held(prob)
    h = held.highs
    mip = bool(held.integer.any())
    h.setOptionValue("time_limit", float(max(0.1, time_limit_s)))
    h.setOptionValue("mip_rel_gap", float(gap))
    for option in BOUND_ONLY:  # the held solver keeps options: set both ways
        h.setOptionValue(option, not (bound_only and mip))
    h.setOptionValue("mip_heuristic_effort", 0.0 if bound_only and mip else 0.05)
    vs = columns(prob)
    if warm and mip:
        start = highspy.HighsSolution()
        start.col_value = [float(v.varValue or 0.0) for v in vs]
        h.setSolution(start)
    h.run()
    status = h.getModelStatus()
    s = highspy.HighsModelStatus
    solution = h.getSolution()
    has_values = bool(solution.value_valid)
    if has_values:
        for v, x in zip(vs, list(solution.col_value), strict=True):
            v.varValue = x
        if solution.dual_valid:  # an LP's: a MILP has no duals
            for v, d in zip(vs, list(solution.col_dual), strict=True):
                v.dj = d
        acts = np.asarray(solution.row_value, dtype=float)
        slack = held.constants + acts
        slack[held.le_rows] *= -1.0
        duals = list(solution.row_dual) if solution.dual_valid else [None] * len(slack)
        for c, sl, pi in zip(prob._constraints.values(), slack.tolist(), duals, strict=True):
            c.slack = sl
            c.pi = pi
    if status == s.kOptimal:
        pair = (pulp.LpStatusOptimal, pulp.LpSolutionOptimal)
    elif status in (s.kInfeasible, s.kUnboundedOrInfeasible):
        pair = (pulp.LpStatusInfeasible, pulp.LpSolutionInfeasible)
    elif status == s.kUnbounded:
        pair = (pulp.LpStatusUnbounded, pulp.LpSolutionUnbounded)
    elif status in (s.kTimeLimit, s.kIterationLimit, s.kInterrupt) and has_values:
        pair = (pulp.LpStatusOptimal, pulp.LpSolutionIntegerFeasible)
    else:
        pair = (pulp.LpStatusNotSolved, pulp.LpSolutionNoSolutionFound)
    prob.assignStatus(*pair)
    bound: float | None = None
    if mip:
        b = float(getattr(h.getInfo(), "mip_dual_bound", math.nan))
        bound = b if math.isfinite(b) else None
    return pair[1], bound
