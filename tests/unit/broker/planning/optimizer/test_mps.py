"""``broker.planning.optimizer.mps``: the MPS file is PuLP's, byte for byte,
and CBC's solution read back is what PuLP reads, so the faster CBC path
cannot change a plan."""

from __future__ import annotations

from pathlib import Path

import pulp
import pytest

from broker.planning.optimizer.backend import run_solver
from broker.planning.optimizer.model import BuiltModel, build_model
from broker.planning.optimizer.mps import columns, write_mps
from broker.planning.optimizer.problem import PlanOptions, build_problem


def _default_model(integral: bool) -> BuiltModel:
    from broker.planning.demand import DemandSet
    from markets.default.market import open_default_market
    from policies.workloads.spec import default_workloads

    snap = open_default_market().snapshot(None)
    ws = default_workloads()
    ds = DemandSet.from_shapes(ws, snap.at, 24, seed=3)
    demand = {k: v.to_numpy() for k, v in ds.serving.items()}
    problem = build_problem(snap, ws, demand, hours=24, options=PlanOptions(period_hours=1))
    return build_model(problem, integral=integral)


def _pulp_mps(prob: pulp.LpProblem, path: Path) -> bytes:
    prob.writeMPS(str(path), rename=1)
    return path.read_bytes()


@pytest.mark.parametrize("integral", [pytest.param(False, id="lp"), pytest.param(True, id="milp")])
def test_the_file_is_the_one_pulp_writes_after_bounds_and_categories_change(
    tmp_path: Path, integral: bool
) -> None:
    prob = _default_model(integral).prob
    write_mps(prob, str(tmp_path / "ours.mps"))
    assert (tmp_path / "ours.mps").read_bytes() == _pulp_mps(prob, tmp_path / "pulp.mps")
    # as relax-and-fix does between solves: relax, fix some, free one
    ints = [v for v in columns(prob) if v.cat == pulp.LpInteger]
    assert ints
    was_int = {id(v) for v in ints}
    for v in ints:
        v.cat = pulp.LpContinuous
    ints[0].lowBound = ints[0].upBound = 1.0
    cont = next(v for v in columns(prob) if id(v) not in was_int)
    cont.lowBound = None
    write_mps(prob, str(tmp_path / "ours2.mps"))
    assert (tmp_path / "ours2.mps").read_bytes() == _pulp_mps(prob, tmp_path / "pulp2.mps")
    assert (tmp_path / "ours2.mps").read_bytes() != (tmp_path / "ours.mps").read_bytes()


def test_columns_are_pulps_variables_and_follow_an_added_row() -> None:
    prob = _default_model(False).prob
    assert columns(prob) == prob.variables()
    extra = pulp.LpVariable("zz_extra", lowBound=0)
    prob += extra >= 1, "extra_row"
    assert columns(prob) == prob.variables()
    assert columns(prob)[-1] is extra


def test_a_cbc_solve_sets_what_pulps_own_cbc_sets() -> None:
    # the LP relaxation (as relax-and-fix's first solve): proven optimal
    # well within the limit even on a loaded machine, so both runs end alike
    ours = _default_model(False).prob
    theirs = _default_model(False).prob
    for v in [*columns(ours), *theirs.variables()]:
        v.cat = pulp.LpContinuous
    got = run_solver(ours, "cbc", gap=0.0, time_limit_s=600.0)
    theirs.solve(pulp.PULP_CBC_CMD(msg=False, timeLimit=600.0))
    assert got.sol_status == theirs.sol_status == pulp.LpSolutionOptimal
    assert [v.varValue for v in columns(ours)] == [v.varValue for v in theirs.variables()]
    assert [v.dj for v in columns(ours)] == [v.dj for v in theirs.variables()]
    pairs = zip(ours.constraints.values(), theirs.constraints.values(), strict=True)
    assert all((a.pi, a.slack) == (b.pi, b.slack) for a, b in pairs)
    assert pulp.value(ours.objective) == pulp.value(theirs.objective)
