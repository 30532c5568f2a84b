"""The what-if computes its cost tables once and hands the same object on.

On the tiny hand-made market (three p3.2xlarge pools): the optimizer, the
three baselines, every bill and the committed sweep all read one table with
the default options; a stress option adds exactly one (the optimizer's).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import broker.whatif.run as whatif_run
from broker.planning.optimizer.problem import PlanOptions
from policies.cost_table import CostTable
from policies.workloads.spec import WorkloadSet, parse_workloads
from tests.fakes.tiny_market import TinyMarket


def _workloads() -> WorkloadSet:
    return parse_workloads(
        {
            "workloads": [
                {
                    "name": "api",
                    "class": "serving",
                    "instance_types": ["p3.2xlarge"],
                    "max_spot_share": 0.5,
                    "demand": {"base_units": 2, "peak_units": 4},
                }
            ]
        }
    )


@pytest.fixture
def handed(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[CostTable]]]:
    """The tables computed, and the table each part of the run was handed."""
    seen: dict[str, list[CostTable]] = {"computed": [], "bill": [], "baseline": [], "plan": []}
    compute = CostTable.compute.__func__  # type: ignore[attr-defined]

    def counting(cls: type[CostTable], *args: object, **kwargs: object) -> CostTable:
        table: CostTable = compute(cls, *args, **kwargs)
        seen["computed"].append(table)
        return table

    monkeypatch.setattr(CostTable, "compute", classmethod(counting))

    def spy(name: str, fn: object) -> object:
        def wrapper(*args: object, **kwargs: object) -> object:
            seen[name].append(kwargs["costs"])  # type: ignore[arg-type]
            return fn(*args, **kwargs)  # type: ignore[operator]

        return wrapper

    monkeypatch.setattr(whatif_run, "bill_plan", spy("bill", whatif_run.bill_plan))
    monkeypatch.setattr(whatif_run, "bill_reacted", spy("bill", whatif_run.bill_reacted))
    monkeypatch.setattr(whatif_run, "bill_reaction", spy("bill", whatif_run.bill_reaction))
    for base in ("all_on_demand", "committed_quantile", "static_mix"):
        monkeypatch.setattr(whatif_run, base, spy("baseline", getattr(whatif_run, base)))
    monkeypatch.setattr(whatif_run, "build_problem", spy("plan", whatif_run.build_problem))
    yield seen


def test_one_table_serves_the_optimizer_baselines_bills_and_sweep(
    handed: dict[str, list[CostTable]],
) -> None:
    result = whatif_run.run_whatif(TinyMarket(), _workloads(), days=1, committed_levels=(0.5, 1.0))
    assert len(result.scenarios) == 4 and len(result.sweep) == 2
    # One table for the run's snapshot; the replayed loop's later steps plan
    # on the snapshots of their own hours, one table each.
    table, *later = handed["computed"]
    assert len(later) == len({id(t.snapshot) for t in later}) == 3  # 1 day, 6-hour steps
    assert all(t.snapshot is not table.snapshot for t in later)
    assert all(t is table for t in handed["plan"] + handed["baseline"] + handed["bill"])
    assert len(handed["bill"]) == 4 + 2  # every scenario and every sweep level


def test_a_stress_option_prices_the_optimizer_apart_and_the_baselines_as_listed(
    handed: dict[str, list[CostTable]],
) -> None:
    opts = PlanOptions(interruption_multiplier=3.0)
    whatif_run.run_whatif(TinyMarket(), _workloads(), days=1, options=opts)
    computed = handed["computed"]
    # the run's stressed table, the listed one (the lifecycle manager ranks on
    # it from the replay's first step; the baselines are priced on it), the
    # replay's later steps (stressed)
    assert [t.options.interruption_multiplier for t in computed] == [3.0, 1.0] + [3.0] * 3
    stressed, listed = computed[0], computed[1]
    assert handed["plan"] == [stressed]
    assert all(t is listed for t in handed["baseline"])
    assert all(t is stressed for t in handed["bill"])
