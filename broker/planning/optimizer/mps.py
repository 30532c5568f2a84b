"""A PuLP model as CBC reads it: the MPS file PuLP writes, written faster,
and CBC's solution read back into the model.

Owns: ``columns`` (the model's variables in PuLP's order, kept with the
model), ``write_mps`` (the file ``LpProblem.writeMPS(path, rename=1)``
writes, byte for byte: rows ``C0000000...`` in the order they were added,
columns ``X0000000...`` in PuLP's name order, the objective ``OBJ``) and
``read_solution`` (CBC's ``-printingOptions all`` solution file, set on the
model as PuLP's ``readsol_MPS`` and ``assign*`` set it: values, reduced
costs, row activities and duals, status).

Why: a what-if of a year solves ~9,000 step models of ~4,000 columns;
PuLP recomputes and re-sorts the variable list on every
``LpProblem.variables()`` call (several per solve), and builds the MPS
column by column through a dict of dicts and a property per name. Measured
on ``whatif --days 7`` (cProfile): writeMPS, variables() and the solution
read were ~40 % of the process's CPU. The file is the same, so CBC's
decisions are the same (tests/unit/broker/planning/test_mps.py compares the
bytes with PuLP's).

What is kept with the model (``_Columns``): the variable order and each
column's coefficient lines, which depend only on the rows and the objective.
``solution`` and ``restore`` keep and put back a solve's variable values.
A model's rows and objective are not edited after its first solve here
(``model`` builds it; ``search`` and ``rounding`` change only bounds and
categories, which are written afresh every time); a row or variable added,
or another objective, is seen (the signature below) and the cache rebuilt.

Must not: decide solver options (``backend``) or build models (``model``).
"""

# PuLP ships no type hints: its objects are Any here (see ``backend``).

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulp
from pulp import constants as pulp_const
from pulp.mps_lp import writeMPSBoundLines

__all__ = ["columns", "read_solution", "restore", "solution", "write_mps"]

_ATTR = "_spotfolio_columns"  # where the cache lives on the LpProblem
_INT_START = "    MARK      'MARKER'                 'INTORG'\n"
_INT_END = "    MARK      'MARKER'                 'INTEND'\n"
# PuLP's own %-formats (pulp.mps_lp), kept as they are so the bytes are its bytes
_ENTRY = "    %-8s  %-8s  % .12e\n"
_NUMBER = "% .12e"  # the number of an ``_ENTRY``
_RHS = "    RHS       %-8s  % .12e\n"


@dataclass
class _Columns:
    signature: tuple[int, int, int]
    variables: list[Any]  # PuLP's order (``LpProblem.variables()``)
    names: list[str]  # X0000000 ...
    rows: list[str]  # C0000000 ..., in the order the constraints were added
    row_lines: str  # the ROWS section's constraint lines
    coef_lines: list[str]  # per column: its rows' and the objective's lines
    var_names: dict[str, str]  # PuLP's variable name -> X0000000
    row_names: dict[str, str]  # PuLP's constraint name -> C0000000
    dummy: frozenset[int]  # columns of PuLP's ``__dummy`` (never given a value)
    # Per column, the (category, lower, upper) its last written lines were
    # made for, and those lines (its COLUMNS block, integer markers around it
    # when integer, and its BOUNDS lines): a re-solve changes a few bounds
    # and categories, so most columns' lines are the last solve's.
    last: list[tuple[Any, Any, Any] | None] = field(default_factory=list)
    body: list[str] = field(default_factory=list)
    bounds: list[str] = field(default_factory=list)


def _signature(prob: Any) -> tuple[int, int, int]:
    obj = prob.objective  # a new objective is a new object
    return (len(prob._constraints), id(obj), 0 if obj is None else len(obj))


def _build(prob: Any, signature: tuple[int, int, int]) -> _Columns:
    vs = list(prob.variables())  # PuLP's own order, once
    names = [f"X{i:07d}" for i in range(len(vs))]
    at = {id(v): i for i, v in enumerate(vs)}
    rows = [f"C{j:07d}" for j in range(len(prob._constraints))]
    per_col: list[list[str]] = [[] for _ in vs]
    row_lines = []
    # A model repeats few coefficients (1, -1, the work rates): each one's
    # ``% .12e`` is formatted once (zero never kept: 0.0 and -0.0 are one key
    # but two texts).
    text: dict[float, str] = {}
    for cname, c in zip(rows, prob._constraints.values(), strict=True):
        row_lines.append(f" {pulp_const.LpConstraintTypeToMps[c.sense]}  {cname}\n")
        for v, value in c.items():
            i = at[id(v)]
            number = text.get(value)
            if number is None:
                number = _NUMBER % value
                if value:
                    text[value] = number
            per_col[i].append(f"    {names[i]:<8}  {cname:<8}  {number}\n")
    obj = prob.objective
    if obj is not None:
        for v, value in obj.items():
            j = at.get(id(v))
            if j is not None:
                per_col[j].append(_ENTRY % (names[j], "OBJ", value))
    n = len(vs)
    return _Columns(signature, vs, names, rows, "".join(row_lines),
                    ["".join(lines) for lines in per_col],
                    {v.name: x for v, x in zip(vs, names, strict=True)},
                    dict(zip(prob._constraints, rows, strict=True)),
                    frozenset(i for i, v in enumerate(vs) if v.name == "__dummy"),
                    [None] * n, [""] * n, [""] * n)  # fmt: skip


def _cached(prob: Any) -> _Columns:
    sig = _signature(prob)
    got: _Columns | None = getattr(prob, _ATTR, None)
    if got is None or got.signature != sig:
        got = _build(prob, sig)
        setattr(prob, _ATTR, got)
    return got


def columns(prob: Any) -> list[Any]:
    """``prob.variables()`` (the same list, in the same order), computed once
    per model rather than on every call."""
    return _cached(prob).variables


def write_mps(prob: Any, path: str) -> tuple[list[Any], dict[str, str], dict[str, str]]:
    """Write ``prob`` to ``path`` as ``prob.writeMPS(path, rename=1)`` does;
    returns PuLP's ``(variables, variable names, row names)`` maps."""
    was_none, dummy = prob.fixObjective()
    try:
        cols = _cached(prob)
        prob.objective.name = "OBJ"  # as PuLP's normalisedNames leaves it
        parts = [
            f"*SENSE:{pulp_const.LpSenses[prob.sense]}\n",
            "NAME          MODEL\n",
            "ROWS\n",
            " N  OBJ\n",
            cols.row_lines,
            "COLUMNS\n",
        ]
        integer = pulp.LpInteger
        last, body, bounds = cols.last, cols.body, cols.bounds
        for i, v in enumerate(cols.variables):
            key = (v.cat, v.lowBound, v.upBound)
            if last[i] != key:  # NaN bounds never match: written afresh
                lines = cols.coef_lines[i]
                body[i] = f"{_INT_START}{lines}{_INT_END}" if v.cat == integer else lines
                bounds[i] = "".join(writeMPSBoundLines(cols.names[i], v, True))
                last[i] = key
        parts += body
        parts.append("RHS\n")
        for cname, c in zip(cols.rows, prob._constraints.values(), strict=True):
            rhs = -c.constant if c.constant != 0 else 0
            parts.append(_RHS % (cname, rhs))
        parts.append("BOUNDS\n")
        parts += bounds
        parts.append("ENDATA\n")
        with open(path, "w") as f:
            f.write("".join(parts))
        return cols.variables, cols.var_names, cols.row_names
    finally:
        prob.restoreObjective(was_none, dummy)


def read_solution(prob: Any, path: str, status: int, sol_status: int) -> None:
    """Set CBC's solution file ``path`` (written for ``write_mps``'s names)
    on ``prob``: what PuLP's ``readsol_MPS`` and ``assignVarsVals``,
    ``assignVarsDj``, ``assignConsPi``, ``assignConsSlack(activity=True)``
    and ``assignStatus`` set."""
    cols = _cached(prob)
    vs, cons = cols.variables, list(prob._constraints.values())
    with open(path) as f:
        lines = f.read().splitlines()[1:]  # the first is the status (``status``)
    for i, line in enumerate(lines):
        if len(line) <= 2:  # PuLP's reader stops at a short line
            del lines[i:]
            break
    # ``-printingOptions all``: every row, then every column, in file order;
    # an infeasible one is marked ``**`` in front
    tokens = " ".join(lines).replace("**", " ").split()
    names = tokens[1::4]
    values: list[float] = [0] * len(vs)  # PuLP's default: an int 0 for a column not listed
    djs: dict[int, float] = {}
    if len(tokens) == 4 * len(names) and names == cols.rows + cols.names:
        acts, duals = tokens[2::4], tokens[3::4]
        m = len(cons)
        for c, a, d in zip(cons, acts[:m], duals[:m], strict=True):
            c.slack = -1 * (c.constant + float(a))
            c.pi = float(d)
        values = [float(x) for x in acts[m:]]
        djs = {i: float(d) for i, d in enumerate(duals[m:])}
    else:
        for line in lines:
            parts = line.split()
            if parts[0] == "**":
                parts = parts[1:]
            name = parts[1]
            if len(name) != 8 or not name[1:].isdigit():
                continue
            i = int(name[1:])
            if name[0] == "X" and i < len(vs):
                values[i] = float(parts[2])
                djs[i] = float(parts[3])
            elif name[0] == "C" and i < len(cons):
                cons[i].slack = -1 * (cons[i].constant + float(parts[2]))
                cons[i].pi = float(parts[3])
    dummy = cols.dummy
    for i, (v, x) in enumerate(zip(vs, values, strict=True)):
        if i not in dummy:
            v.varValue = x
            if i in djs:
                v.dj = djs[i]
    prob.assignStatus(status, sol_status)


def solution(prob: Any) -> list[float | None]:
    """The model's variable values, in ``columns`` order (to ``restore`` later)."""
    return [v.varValue for v in _cached(prob).variables]


def restore(prob: Any, values: list[float | None]) -> None:
    """Put values taken by ``solution`` back: the solution of an LP solved
    before, instead of solving it again (the same solver on the same LP gives it)."""
    for v, x in zip(_cached(prob).variables, values, strict=True):
        v.varValue = x
