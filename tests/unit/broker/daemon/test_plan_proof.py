"""The daemon's re-plan reaches its gap target: a quick plan further than
``plan_gap_target`` from its bound gets the proof, within ``plan_proof_s``,
and a proof ending dearer than the quick plan keeps the quick plan."""

from __future__ import annotations

import dataclasses

import pytest

from broker.daemon.config import DaemonConfig
from broker.daemon.plan_job import prove
from broker.planning.optimizer.problem import PlanningProblem, PlanOptions, build_problem
from broker.planning.optimizer.solve import solve
from markets.default.market import open_default_market
from markets.errors import InputError
from markets.validation import input_error_from
from policies.workloads.spec import parse_workloads


def _value_of_time() -> PlanningProblem:
    """A training job with a $1,000/h value of time: 3,000 A100-hours due
    in 40 h, on H100 or A100 nodes (the quick solve proves a ~50 % gap)."""
    ws = parse_workloads({"workloads": [{
        "name": "train", "class": "training",
        "instance_types": ["p5.48xlarge", "a3-highgpu-8g", "p4d.24xlarge", "a2-highgpu-8g"],
        "throughput": {"p5.48xlarge": 3.0, "a3-highgpu-8g": 3.0, "p4d.24xlarge": 1.0,
                       "a2-highgpu-8g": 1.0},
        "elastic": True, "min_units": 16, "step_units": 8, "max_units": 64,
        "unit_hours": 3000, "deadline_hours": 40, "value_of_time_usd_per_hour": 1000}]},
        demand_supplied=True)  # fmt: skip
    snap = open_default_market().snapshot(None)
    return build_problem(snap, ws, {}, hours=40, options=PlanOptions(period_hours=1))


@pytest.mark.slow
def test_a_quick_plan_far_from_its_bound_gets_the_proof_and_is_never_dearer() -> None:
    problem = _value_of_time()
    quick = solve(problem)
    gap = quick.meta["gap"]
    assert isinstance(gap, float) and gap > 0.05  # far off: the proof must run
    plan = prove(problem, quick, 0.02, 600.0)  # generous: a loaded machine is slow
    assert plan.meta["proof_kept"] in ("proof", "quick")
    assert plan.objective_usd <= quick.objective_usd + 1e-6
    proven = plan.meta["gap"] if plan.meta["proof_kept"] == "proof" else plan.meta["proof_gap"]
    assert isinstance(proven, float) and proven <= 0.05


def test_a_plan_within_the_target_is_kept_as_it_is() -> None:
    problem = _value_of_time()
    quick = solve(problem)
    assert isinstance(quick.meta["gap"], float)
    kept = prove(problem, quick, 1.0, 600.0)
    assert kept is quick and "proof_kept" not in kept.meta


def test_a_proof_ending_dearer_than_its_start_keeps_the_start() -> None:
    problem = _value_of_time()
    quick = solve(problem)
    # A start cheaper than any plan of the problem: whatever the proof
    # finds is dearer, so the start is what the re-plan returns.
    start = dataclasses.replace(quick, objective_usd=quick.objective_usd / 10,
                                meta={**quick.meta, "gap": 0.9})  # fmt: skip
    plan = prove(problem, start, 0.02, 600.0)
    assert plan is start and plan.meta["proof_kept"] == "quick"
    assert isinstance(plan.meta["proof_s"], float)


@pytest.mark.parametrize(("field", "value"), [("plan_gap_target", 1.5),
                                              ("plan_proof_s", 0)])  # fmt: skip
def test_the_gap_target_and_proof_time_are_validated(field: str, value: float) -> None:
    with pytest.raises(Exception) as info:
        DaemonConfig.model_validate({"owner": "t", field: value})
    err = input_error_from("daemon.yaml", info.value)  # type: ignore[arg-type]
    assert isinstance(err, InputError) and err.field == field


def test_the_gap_target_defaults_to_two_percent() -> None:
    c = DaemonConfig.model_validate({"owner": "t"})
    assert (c.plan_gap_target, c.plan_proof_s) == (0.02, 60.0)
