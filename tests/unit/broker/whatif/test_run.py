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

    monkeypatch.setattr(CostTable, "compute", classmethod(counting))  # type: ignore[arg-type]

    def spy(name: str, fn: object) -> object:
        def wrapper(*args: object, **kwargs: object) -> object:
            seen[name].append(kwargs["costs"])  # type: ignore[arg-type]
            return fn(*args, **kwargs)  # type: ignore[operator]

        return wrapper

    monkeypatch.setattr(whatif_run, "bill_plan", spy("bill", whatif_run.bill_plan))  # type: ignore[attr-defined]
    monkeypatch.setattr(whatif_run, "bill_reacted", spy("bill", whatif_run.bill_reacted))  # type: ignore[attr-defined]
    monkeypatch.setattr(whatif_run, "bill_reaction", spy("bill", whatif_run.bill_reaction))  # type: ignore[attr-defined]
    for base in ("all_on_demand", "committed_quantile", "static_mix"):
        monkeypatch.setattr(whatif_run, base, spy("baseline", getattr(whatif_run, base)))
    monkeypatch.setattr(whatif_run, "build_problem", spy("plan", whatif_run.build_problem))  # type: ignore[attr-defined]
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


def test_a_stress_is_the_market_s_and_every_part_reads_the_stressed_one(
    handed: dict[str, list[CostTable]],
) -> None:
    opts = PlanOptions(interruption_multiplier=3.0)
    result = whatif_run.run_whatif(TinyMarket(), _workloads(), days=1, options=opts)
    # The stressed market carries the hazard (``broker.whatif.stress``), so no
    # table counts the multiplier again; the x1 run beside it has its own.
    assert {t.options.interruption_multiplier for t in handed["computed"]} == {1.0}
    stressed_plan, x1_plan = handed["plan"]
    rates = [p.hazard.rate_per_hour for p in stressed_plan.snapshot.pools]
    assert rates == [pytest.approx(0.03)] * 3
    assert [p.hazard.rate_per_hour for p in x1_plan.snapshot.pools] == [pytest.approx(0.01)] * 3
    n = len(handed["bill"]) // 2  # the stressed run's bills, then the x1 run's
    assert all(t.snapshot is stressed_plan.snapshot for t in handed["bill"][:n])
    assert all(t is stressed_plan for t in handed["baseline"][:3])
    assert result.unstressed is not None


def test_owned_commitments_report_their_utilisation_coverage_and_expiry() -> None:
    """Two p3.2xlarge owned for the first day of two, against a flat demand
    of 4 instances: the plan uses both while they run (utilisation 1), they
    cover 2 of 4 instances over one day of two (coverage 25 %), and at expiry
    the plan re-decides."""
    from datetime import timedelta

    from markets.commitments import CommitmentKind, OwnedCommitment
    from markets.model import Provider
    from tests.fakes.tiny_market import T0, TinyMarket

    ws = parse_workloads(
        {
            "workloads": [
                {
                    "name": "api",
                    "class": "serving",
                    "instance_types": ["p3.2xlarge"],
                    "max_spot_share": 0.0,
                    "demand": {"base_units": 4, "peak_units": 4},
                },
            ]
        }
    )
    own = OwnedCommitment(
        "ri-1",
        Provider.AWS,
        CommitmentKind.RESERVED,
        T0 - timedelta(days=30),
        T0 + timedelta(days=1),
        region="us-east-1",
        instance_type="p3.2xlarge",
        count=2,
    )
    result = whatif_run.run_whatif(TinyMarket(), ws, days=2, owned=(own,), replan_hours=24)
    use = result.owned_use["ri-1"]
    assert use["utilisation"] == pytest.approx(1.0, abs=1e-6)
    assert isinstance(use["coverage"], float) and 0.2 <= use["coverage"] <= 0.3
    assert isinstance(use["at_expiry"], str) and "re-decided" in use["at_expiry"]
