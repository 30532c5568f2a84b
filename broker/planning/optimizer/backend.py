"""Run one PuLP model through CBC or HiGHS and say what was proven.

Owns: ``run_solver`` (a solve with a relative gap, a time limit and an
optional warm start from the variables' current values) and ``Outcome``:
the solution status (a time limit reached with no solution is "not
solved", ``Outcome.stopped_without_plan``, never "infeasible"), the objective
and the best *proven lower bound* the solver reached (an LP's optimum; a
MILP's best bound), so callers can report
a gap that is a fact, not a hope.

CBC (bundled with PuLP, the default) runs as a process on an MPS file; its
bound is read from its log (``Lower bound:``, or the objective when it
reports the search complete). HiGHS runs in-process through ``highspy``
(optional; ``inprocess``: the model held as arrays, changed in place between
solves, each LP warm-started from the last basis); its bound is
``mip_dual_bound``, and a MILP's warm start is handed over with
``setSolution``. ``bound_only`` (a good start is given; only the bound is
wanted) turns both solvers' primal heuristics off: measured at the
benchmark's 40 x 20 x 24 from a near-optimal start, HiGHS 4.8 s -> 0.7 s
and CBC 3.0 s -> 1.3 s to a proven 0.5 % (CBC also with strong branching
on 2 candidates instead of 5).

Must not: build models or read solutions into plans (``model``/``solve``).
"""

# PuLP is untyped (mypy sees its classes as Any), and a customised PuLP solver
# is a subclass of PuLP's: allowed in this file only (``_CBC``).
# mypy: disallow-subclassing-any=False

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulp
from pulp.apis import coin_api

from broker.planning.optimizer.children import install, solver_children
from broker.planning.optimizer.mps import columns, read_solution, write_mps
from markets.errors import InputError
from markets.extras import require

__all__ = ["LpExpression", "LpProblem", "LpVariable", "Outcome", "run_solver"]

install()  # every CBC PuLP starts dies with us (broker.planning.optimizer.children)
# PuLP 3.x warns (DeprecationWarning, ignored by default and in pyproject's
# pytest filters) on every ``LpVariable(...)`` made directly, which is how the
# model makes its ~2,000 a step; the warning machinery ran each time, ~4 % of
# a what-if replay step (py-spy, whatif --days 365). Off, where PuLP has the switch.
_v4_switch = getattr(getattr(pulp, "v4_migration", None), "set_v4_migration_warnings", None)
if _v4_switch is not None:
    _v4_switch(False)

# PuLP ships no type hints (pyproject: ignore_missing_imports for pulp.*), so
# mypy sees every PuLP object as Any. These names say which PuLP object an Any
# stands for; they are the optimizer's only Any.
LpProblem = Any  # pulp.LpProblem
LpVariable = Any  # pulp.LpVariable
LpExpression = Any  # pulp.LpAffineExpression (or a variable, or a number)

# CBC options when only the bound is wanted: no primal heuristics, and
# strong branching on 2 candidates instead of 5 (measured on the benchmark's
# 40 x 20 x 24, seeds 0-4: proof 1.0-3.0 s -> 0.5-1.2 s).
_CBC_BOUND_ONLY = ("heuristicsOnOff off", "strongBranching 2")
_BOUND_RE = re.compile(r"^Lower bound:\s+(\S+)", re.MULTILINE)
_DONE_RE = re.compile(r"^Result - Optimal solution found\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Outcome:
    """``sol_status`` is PuLP's (``LpSolutionOptimal``, ``...IntegerFeasible``,
    ...); ``bound`` a proven lower bound on the model's optimum, or ``None``."""

    sol_status: int
    objective: float | None
    bound: float | None

    @property
    def has_solution(self) -> bool:
        return self.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)

    @property
    def stopped_without_plan(self) -> bool:
        """The solver stopped (its time limit) before it found any solution,
        and proved nothing: PuLP's "not solved", not "infeasible"."""
        return bool(self.sol_status == pulp.LpSolutionNoSolutionFound)


def _is_mip(prob: LpProblem) -> bool:
    return any(v.cat == pulp.LpInteger for v in columns(prob))


def run_solver(
    prob: LpProblem,
    name: str,
    *,
    gap: float,
    time_limit_s: float,
    warm: bool = False,
    bound_only: bool = False,
) -> Outcome:
    """Solve ``prob`` in place (variable values are set); see the module
    docstring. ``bound_only``: the warm start is taken as good, so the
    solver's primal heuristics are off and its time goes to the bound."""
    if name == "cbc":
        return _cbc(prob, gap, time_limit_s, warm, bound_only)
    if name == "highs":
        return _highs(prob, gap, time_limit_s, warm, bound_only)
    raise InputError("--solver", None, "one of cbc, highs", got=name)


def _objective(prob: LpProblem) -> float | None:
    v = pulp.value(prob.objective)
    return None if v is None else float(v)


def _cbc(prob: LpProblem, gap: float, time_limit_s: float, warm: bool, bound_only: bool) -> Outcome:
    mip = _is_mip(prob)
    log: Path | None = None
    if mip:  # an LP's bound is its optimum: no log to read
        fd, log_name = tempfile.mkstemp(prefix="spotfolio-cbc-", suffix=".log")
        os.close(fd)
        log = Path(log_name)
    try:
        solver = _CBC(
            msg=False,
            gapRel=gap if mip else None,
            timeLimit=max(0.1, time_limit_s),
            warmStart=warm and mip,
            logPath=None if log is None else str(log),
            options=list(_CBC_BOUND_ONLY) if bound_only and mip else None,
        )
        with solver_children():  # a killed or failed solve leaves no CBC running
            prob.solve(solver)
        text = "" if log is None else log.read_text(errors="replace")
    finally:
        if log is not None:
            log.unlink(missing_ok=True)
    status = prob.sol_status
    obj = _objective(prob)
    bound: float | None = None
    if status == pulp.LpSolutionOptimal and (not mip or _DONE_RE.search(text)):
        bound = obj  # an LP's optimum, or a search CBC completed
    elif mip:
        found = _BOUND_RE.findall(text)
        if found:
            with contextlib.suppress(ValueError):
                bound = float(found[-1])
    return Outcome(status, obj, bound)


class _CBC(pulp.PULP_CBC_CMD):
    """PuLP's CBC with its model file written and its solution read by
    ``broker.planning.optimizer.mps`` (the same file, so the same solve:
    only PuLP's Python overhead goes). The command line is PuLP's
    ``solve_CBC`` for the options used here (no presolve, cuts or LP-file
    switches; never Windows)."""

    def solve_CBC(self, lp: LpProblem, use_mps: bool = True) -> int:
        if not self.executable(self.path):
            raise pulp.PulpSolverError(f"Pulp: cannot execute {self.path}")
        _lp_file, mps, sol, mst = self.create_tmp_files(lp.name, "lp", "mps", "sol", "mst")
        try:
            return self._run(lp, mps, sol, mst)
        finally:
            # The model, start and solution files go with every solve, an
            # interrupted (a daemon stopped mid-solve: SIGTERM, Ctrl-C) or
            # failed one too: each is the whole model, 0.2-5 MB in /tmp.
            self.delete_tmp_files(mps, _lp_file, sol, mst)

    def _run(self, lp: LpProblem, mps: str, sol: str, mst: str) -> int:
        vs, var_names, row_names = write_mps(lp, mps)
        cmds = " " + mps + " "
        if lp.sense == pulp.LpMaximize:
            cmds += "-max "
        if self.optionsDict.get("warmStart", False):
            self.writesol(mst, lp, vs, var_names, row_names)
            cmds += f"-mips {mst} "
        if self.timeLimit is not None:
            cmds += f"-sec {self.timeLimit} "
        for option in self.options + self.getOptions():
            cmds += "-" + option + " "
        cmds += "-solve " if self.mip else "-initialSolve "
        cmds += "-printingOptions all -solution " + sol + " "
        log_path = self.optionsDict.get("logPath")
        pipe = open(log_path, "w") if log_path else self.get_pipe()  # noqa: SIM115
        try:
            # PuLP's own ``subprocess`` name: the shim of ``children`` (CBC dies
            # with its caller, and with a solve that raises)
            code = coin_api.subprocess.Popen(
                [self.path, *cmds[1:].split()], stdout=pipe, stderr=pipe,
                stdin=subprocess.DEVNULL,
            ).wait()  # fmt: skip
        finally:
            if pipe is not None:
                pipe.close()
        if code != 0 or not os.path.exists(sol):
            raise pulp.PulpSolverError(f"Pulp: Error while executing {self.path}")
        status, sol_status = self.get_status(sol)
        read_solution(lp, sol, status, sol_status)
        return int(status)


def _highs(
    prob: LpProblem, gap: float, time_limit_s: float, warm: bool, bound_only: bool
) -> Outcome:
    require("highspy", "--solver", got="highs")
    from broker.planning.optimizer.inprocess import solve_in_process

    mip = _is_mip(prob)
    status, bound = solve_in_process(
        prob, gap=gap, time_limit_s=time_limit_s, warm=warm and mip, bound_only=bound_only
    )
    obj = _objective(prob)
    if not mip:
        return Outcome(status, obj, obj if status == pulp.LpSolutionOptimal else None)
    return Outcome(status, obj, bound)
