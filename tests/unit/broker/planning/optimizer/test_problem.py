"""The planning problem carries one cost table: handed in or computed once,
kept through every variant, refused when it prices something else."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import numpy as np
import pytest

import policies.cost_table as cost_table
from broker.planning.optimizer.fast import fast_plan
from broker.planning.optimizer.problem import PlanOptions, build_problem
from broker.planning.optimizer.solve import solve
from markets.errors import InputError
from markets.model import (
    Hazard,
    HazardSource,
    InstanceType,
    MarketSnapshot,
    Pool,
    PoolSnapshot,
    Provider,
)
from policies.cost_table import CostOptions, CostTable
from policies.workloads.spec import WorkloadSet, parse_workloads

T0 = datetime(2026, 3, 2, tzinfo=UTC)


def _snapshot() -> MarketSnapshot:
    inst = InstanceType(
        provider=Provider.AWS, name="g1", family="g", units=1, gpus=1, vcpus=4, memory_gib=16.0
    )
    pools = tuple(
        PoolSnapshot(
            pool=Pool(provider=Provider.AWS, region="us-east-1", zone=z, instance_type="g1"),
            instance=inst,
            on_demand_usd_per_hour=1.0,
            spot_usd_per_hour=0.3,
            committed_1y_usd_per_hour=0.6,
            placement_score=10,
            hazard=Hazard(rate_per_hour=0.01, source=HazardSource.ASSUMED),
            observed_at=T0,
        )
        for z in ("us-east-1a", "us-east-1b")
    )
    return MarketSnapshot(at=T0, pools=pools, source="test")


def _workloads() -> WorkloadSet:
    return parse_workloads(
        {
            "workloads": [
                {"name": "api", "class": "serving", "instance_types": ["g1"], "max_spot_share": 0.5}
            ]
        },
        demand_supplied=True,
    )


DEMAND = {"api": np.full(6, 4.0)}


@pytest.fixture
def entries_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every ``cost_entries`` call (the table is its only caller): workload names."""
    calls: list[str] = []
    real = cost_table.cost_entries

    def counting(workload: object, *args: object, **kwargs: object) -> object:
        calls.append(getattr(workload, "name", "?"))
        return real(workload, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(cost_table, "cost_entries", counting)
    return calls


def test_build_problem_computes_the_table_once_and_every_solve_reads_it(
    entries_calls: list[str],
) -> None:
    problem = build_problem(_snapshot(), _workloads(), DEMAND, hours=6)
    assert entries_calls == ["api"]
    solve(problem)
    fast_plan(problem)
    swept = dataclasses.replace(problem, committed_fixed={"aws/us-east-1/g1": 2})
    assert swept.costs is problem.costs
    solve(swept)
    assert entries_calls == ["api"]  # no solve, variant or fast path recomputed it


def test_a_handed_table_is_used_as_is(entries_calls: list[str]) -> None:
    snap, ws = _snapshot(), _workloads()
    costs = CostTable.compute(snap, ws, CostOptions(term_years=1))
    problem = build_problem(snap, ws, DEMAND, hours=6, costs=costs)
    assert problem.costs is costs
    assert entries_calls == ["api"]


def test_a_table_priced_with_other_options_is_refused() -> None:
    snap, ws = _snapshot(), _workloads()
    costs = CostTable.compute(snap, ws)
    with pytest.raises(InputError, match="costs: options"):
        build_problem(
            snap, ws, DEMAND, hours=6, costs=costs, options=PlanOptions(interruption_multiplier=2.0)
        )


def test_a_table_of_another_snapshot_is_refused() -> None:
    snap, ws = _snapshot(), _workloads()
    other = snap.model_copy(update={"at": datetime(2026, 3, 3, tzinfo=UTC)})
    with pytest.raises(InputError, match="costs: snapshot"):
        build_problem(snap, ws, DEMAND, hours=6, costs=CostTable.compute(other, ws))


def test_a_variant_with_other_cost_options_needs_its_own_table() -> None:
    problem = build_problem(_snapshot(), _workloads(), DEMAND, hours=6)
    # knobs the costs do not depend on: the same table serves
    same = dataclasses.replace(problem, options=PlanOptions(gap=0.01, aggregate=False))
    assert same.costs is problem.costs
    with pytest.raises(InputError, match="costs: options"):
        dataclasses.replace(problem, options=PlanOptions(term_years=3))
