"""Exact aggregation: dominated on-demand options and commitment groups are
dropped, and the model's optimum does not move."""

from __future__ import annotations

import dataclasses

import pulp
import pytest

from broker.bench.solver import synthetic_problem
from broker.planning.optimizer.aggregate import undominated_commitments, undominated_on_demand
from broker.planning.optimizer.backend import run_solver
from broker.planning.optimizer.model import build_model
from broker.planning.optimizer.problem import PlanningProblem, PlanOptions
from markets.model import Tier
from policies.cost_table import CostEntry


def _entry(
    itype: str,
    *,
    units: int = 1,
    throughput: float = 1.0,
    od: float = 1.0,
    committed: float | None = 0.6,
    workload: str = "w",
    region: str = "r1",
) -> CostEntry:
    work = units * throughput
    return CostEntry(
        workload=workload,
        pool_key=f"aws/{region}/{region}a/{itype}",
        instance_type=itype,
        units_per_instance=units,
        throughput=throughput,
        spot_factor=None,
        usd_per_work_hour={
            Tier.ON_DEMAND: od / work,
            Tier.COMMITTED: None if committed is None else committed / work,
            Tier.SPOT: None,
        },
        preference_rank=0,
    )


def test_on_demand_keeps_the_cheapest_per_throughput() -> None:
    a = _entry("a", units=1, od=1.0)  # $1.00 per unit-hour
    b = _entry("b", units=8, od=6.0)  # $0.75: dominates a when counts are continuous
    c = _entry("c", units=1, throughput=2.0, od=1.8)  # another throughput: kept
    kept = undominated_on_demand([a, b, c], integral=False)
    assert [e.instance_type for e in kept] == ["b", "c"]
    # integer counts: sizes differ in granularity, so a (1 unit) stays
    kept = undominated_on_demand([a, b, c], integral=True)
    assert [e.instance_type for e in kept] == ["a", "b", "c"]
    # what a rolling horizon is running is kept (leaving it costs churn)
    kept = undominated_on_demand([a, b], integral=False, keep={a.pool_key})
    assert [e.instance_type for e in kept] == ["a", "b"]


def test_a_commitment_group_is_dropped_only_when_another_serves_every_user_alike() -> None:
    cheap = _entry("t1", units=4, committed=2.0)
    dear = _entry("t2", units=4, committed=2.4)  # same units and work: dominated
    small = _entry("t3", units=1, committed=0.7)  # other granularity: kept
    other = _entry("t4", units=4, committed=2.4, workload="v")
    groups = {
        "g1": {"w": cheap},
        "g2": {"w": dear},
        "g3": {"w": small},
        # g4 is usable by workload v, which cannot use g1: kept
        "g4": {"w": dear, "v": other},
    }
    price = {"g1": 2.0, "g2": 2.4, "g3": 0.7, "g4": 2.4}
    assert undominated_commitments(groups, price) == {"g1", "g3", "g4"}
    # an already bought group is never dropped
    assert undominated_commitments(groups, price, keep={"g2"}) == {"g1", "g2", "g3", "g4"}


def _optimum(problem: PlanningProblem, *, relax: bool) -> tuple[float, int]:
    built = build_model(problem)
    assert built.integral is not relax  # the case the test names
    if relax:
        for v in built.prob.variables():
            v.cat = pulp.LpContinuous
    out = run_solver(built.prob, "cbc", gap=0.0, time_limit_s=60.0)
    assert out.sol_status == pulp.LpSolutionOptimal and out.objective is not None
    return out.objective, len(built.prob.variables())


@pytest.mark.parametrize(
    ("types", "zones", "hours", "relax"),
    [(8, 3, 6, True), (3, 2, 3, False)],
    ids=["lp-continuous-counts", "milp-integer-counts"],
)
def test_aggregation_leaves_the_optimum_where_it_was(
    types: int, zones: int, hours: int, relax: bool
) -> None:
    problem = synthetic_problem(types, zones, hours, seed=4)
    plain = dataclasses.replace(problem, options=PlanOptions(aggregate=False))
    obj, n = _optimum(problem, relax=relax)
    obj_plain, n_plain = _optimum(plain, relax=relax)
    # A placed gang's options and commitment groups are all kept (its
    # placement rows tell them apart; so are the other workloads' groups of
    # its types, to stay exact): here the gang lists every type, so little is
    # dropped. The dominance rules themselves are tested above.
    assert n <= n_plain
    assert obj == pytest.approx(obj_plain, rel=1e-7)
