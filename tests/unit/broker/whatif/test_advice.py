"""The what-if's "what to do": counts, costs per workload and team, the totals.

On the tiny hand-made market (three p3.2xlarge pools at $1 spot, $3
on-demand, $2 committed), two serving workloads of two teams and a batch job
without one, over two days.
"""

from __future__ import annotations

import math
from collections import defaultdict

import pandas as pd
import pytest

from broker.planning.plan import ALLOCATION_COLUMNS, Commitment, Plan
from broker.whatif.advice import (
    NO_TEAM,
    UNUSED,
    Advice,
    _by_team,
    _by_workload,
    advise,
    whole_instances,
)
from broker.whatif.billing import Bill
from broker.whatif.run import WhatIfResult, run_whatif
from markets.keys import CommitmentKey, PoolKey
from markets.model import Tier
from policies.workloads.spec import WorkloadSet, parse_workloads
from tests.fakes.tiny_market import T0, TinyMarket, pool_key


def workloads() -> WorkloadSet:
    return parse_workloads(
        {
            "workloads": [
                {
                    "name": "api",
                    "class": "serving",
                    "instance_types": ["p3.2xlarge"],
                    "max_spot_share": 0.5,
                    "team": "web",
                    "demand": {"base_units": 2, "peak_units": 5},
                },
                {
                    "name": "search",
                    "class": "serving",
                    "instance_types": ["p3.2xlarge"],
                    "max_spot_share": 0.8,
                    "tags": {"team": "data", "cost-centre": "42"},
                    "demand": {"base_units": 1, "peak_units": 3},
                },
                {
                    "name": "sweep",
                    "class": "batch",
                    "instance_types": ["p3.2xlarge"],
                    "unit_hours": 30,
                    "deadline_hours": 40,
                    "max_units": 4,
                },
            ]
        }
    )


@pytest.fixture(scope="module")
def result() -> WhatIfResult:
    market = TinyMarket(share={pool_key("a"): 0.5})
    return run_whatif(market, workloads(), days=2)


@pytest.fixture(scope="module")
def advice(result: WhatIfResult) -> Advice:
    return advise(result)


def test_counts_are_the_plan_s_instances_per_pool_hour_rounded_up(
    result: WhatIfResult, advice: Advice
) -> None:
    plan = result.scenario("spotfolio").plan
    a = plan.hourly_instances()
    want: dict[tuple[str, str, int], float] = defaultdict(float)
    units: dict[tuple[str, str, int], float] = defaultdict(float)
    for key, tier, hour, n, u in zip(
        a["pool_key"], a["tier"], a["hour"], a["instances"], a["units"], strict=True
    ):
        k = PoolKey.parse(str(key))
        where = (
            str(CommitmentKey(k.provider, k.region, k.instance_type))
            if tier == "committed"
            else str(key)
        )
        want[(where, str(tier), int(hour))] += float(n)
        units[(where, str(tier), int(hour))] += float(u)
    assert advice.first_week_hours == 48
    got = {(p.pool_key, p.tier, h): n for p in advice.pools for h, n in enumerate(p.by_hour)}
    assert {k for k, n in got.items() if n > 0} == {k for k, v in want.items() if v > 1e-6}
    for k, n in got.items():  # type: ignore[assignment]
        assert n == math.ceil(want.get(k, 0.0) - 1e-6), k  # type: ignore[call-overload]
        # whole instances hold the plan's capacity units (p3.2xlarge: 1 unit each)
        assert n * 1 >= units.get(k, 0.0) - 1e-6, k  # type: ignore[call-overload]
    assert all(len(p.by_hour) == 48 for p in advice.pools)
    assert all(isinstance(n, int) for p in advice.pools for n in p.by_hour)


def test_fractions_within_solver_tolerance_are_not_rounded_up(result: WhatIfResult) -> None:
    import dataclasses

    plan = result.scenario("spotfolio").plan
    a = plan.allocations.copy()
    a["instances"] = a["instances"].round() + 1e-9  # a solver's 3.000000001
    counts = whole_instances(dataclasses.replace(plan, allocations=a),
                             result.inputs.snapshot, 48)  # type: ignore[union-attr]  # fmt: skip
    for p in counts:
        assert all(float(n).is_integer() for n in p.by_hour)
    hourly = dataclasses.replace(plan, allocations=a).hourly_instances()
    assert sum(p.instance_hours for p in counts) == round(hourly["instances"].sum())


def test_costs_per_workload_and_per_team_add_up_to_the_bill(
    result: WhatIfResult, advice: Advice
) -> None:
    billed = result.scenario("spotfolio").bill.total_usd
    assert sum(c.total_usd for c in advice.by_workload) == pytest.approx(billed, abs=1e-6)
    assert sum(c.total_usd for c in advice.by_team) == pytest.approx(billed, abs=1e-6)
    teams = {c.name for c in advice.by_team}
    assert {"web", "data", NO_TEAM} <= teams  # Workload.team, a team tag, neither
    rows = {c.name: c for c in advice.by_workload}
    assert (rows["api"].team, rows["search"].team, rows["sweep"].team) == ("web", "data", None)
    unused = sum(c.unused_commitment_usd for c in advice.by_workload)
    bill = result.scenario("spotfolio").bill
    # the bill's committed dollars not charged to any workload are all spread
    assert unused == pytest.approx(bill.total_usd - sum(bill.by_workload_usd.values()), abs=1e-6)
    assert UNUSED not in rows or not bill.by_workload_usd


def test_the_totals_reconcile_each_difference_named(result: WhatIfResult, advice: Advice) -> None:
    r = advice.reconciliation
    ours = result.scenario("spotfolio")
    assert result.inputs is not None
    assert r.objective_usd == result.inputs.period_plan.objective_usd
    assert r.planned_usd == pytest.approx(ours.plan.planned_cost_usd())
    assert r.billed_usd == ours.bill.total_usd
    assert r.period_planned_usd + sum(v for _, v in r.objective_less_planned) == pytest.approx(
        r.objective_usd, abs=1e-6
    )
    assert r.planned_usd + sum(v for _, v in r.billed_less_planned) == pytest.approx(
        r.billed_usd, abs=0.01
    )
    doc = r.to_dict()
    assert set(doc["definitions"]) == {  # type: ignore[call-overload]
        "objective_usd",
        "period_planned_usd",
        "planned_usd",
        "billed_usd",
    }


def test_commitments_to_buy_are_the_period_plan_s_with_their_term_figures(
    result: WhatIfResult, advice: Advice
) -> None:
    assert result.inputs is not None
    bought = {c.group: c for c in result.inputs.period_plan.commitments if c.instances}
    assert {c.group: c.count for c in advice.commitments} == {
        g: c.instances for g, c in bought.items()
    }
    for c in advice.commitments:
        src = bought[c.group]
        assert (c.provider, c.region, c.instance_type) == ("aws", "us-east-1", "p3.2xlarge")
        assert c.family == "p3"
        assert c.obligation_usd == src.obligation_usd
        assert c.breakeven_utilisation == src.breakeven_utilisation
        assert c.term_years == src.term_years and c.payment == src.payment
    assert advice.commitments_from == "period plan"
    doc = advice.to_dict()
    assert doc["first_week"]["hours"] == 48  # type: ignore[index]


def _plan_with(committed_rows: list[tuple[str, float]], bought: int) -> Plan:
    rows = [
        (0, 0, 10, w, "committed", "aws/us-east-1/us-east-1a/p3.2xlarge", n, n, n, 2.0)
        for w, n in committed_rows
    ]
    return Plan(
        start=T0,
        hours=10,
        period_hours=10,
        commitments=(
            Commitment(
                "aws/us-east-1/p3.2xlarge",
                "aws/us-east-1/us-east-1a/p3.2xlarge",
                bought,
                bought,
                2.0,
                1,
            ),
        ),
        allocations=pd.DataFrame(rows, columns=ALLOCATION_COLUMNS),
        objective_usd=0.0,
        status="optimal",
        solver="cbc",
        solve_time_s=0.0,
        integral=True,
    )


def _bill(plan: Plan, spot: dict[str, float]) -> Bill:
    bill = Bill()
    bill.add(Tier.COMMITTED, None, plan.committed_usd_per_hour() * plan.hours)
    a = plan.hourly_instances()
    for w, n, usd in zip(a["workload"], a["instances"], a["usd_per_instance_hour"], strict=True):
        bill.by_workload_usd[w] = bill.by_workload_usd.get(w, 0.0) + n * usd
    for w, usd in spot.items():
        bill.add(Tier.SPOT, w, usd)
    return bill


def test_unused_commitments_go_to_their_users_pro_rata_else_to_their_own_row() -> None:
    ws = workloads()
    # 3 bought at $2 for 10 h ($60); api uses 1 ($20), search 0.5 ($10): $30 unused
    plan = _plan_with([("api", 1.0), ("search", 0.5)], 3)
    rows = {c.name: c for c in _by_workload(plan, _bill(plan, {"sweep": 5.0}), ws)}
    assert rows["api"].unused_commitment_usd == pytest.approx(20.0)
    assert rows["search"].unused_commitment_usd == pytest.approx(10.0)
    assert rows["api"].total_usd == pytest.approx(40.0)
    assert rows["sweep"].total_usd == pytest.approx(5.0)
    assert sum(r.total_usd for r in rows.values()) == pytest.approx(65.0)
    assert UNUSED not in rows
    idle = _plan_with([], 3)
    rows = {c.name: c for c in _by_workload(idle, _bill(idle, {"sweep": 5.0}), ws)}
    assert rows[UNUSED].total_usd == pytest.approx(60.0)
    assert sum(r.total_usd for r in rows.values()) == pytest.approx(65.0)
    teams = {c.name: c.total_usd for c in _by_team(tuple(rows.values()))}
    assert teams[NO_TEAM] == pytest.approx(65.0)  # the unused row and the team-less job


def test_a_savings_plan_is_bought_as_dollars_an_hour_not_a_count() -> None:
    from broker.whatif.advice import CommitmentBuy

    sp = CommitmentBuy(
        "aws",
        "us-east-1",
        "savings-plan-ec2-g5",
        "g5",
        1,
        "no_upfront",
        11,
        0.001,
        96.36,
        3.16,
        1.0,
        0.72,
        savings_plan=True,
    )
    ri = CommitmentBuy(
        "gcp",
        "us-east1",
        "g2-standard-4",
        "g2",
        1,
        "no_upfront",
        29,
        0.445,
        113125.0,
        5302.0,
        1.0,
        0.64,
    )
    assert (sp.size, sp.to_dict()["kind"]) == ("$0.011/h", "savings_plan")
    assert (ri.size, ri.to_dict()["kind"]) == ("29", "instances")
