"""Commitments valued over their term: finite jobs never justify one, demand
that persists does, and every appraisal agrees with itself."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.planning.optimizer.problem import PlanOptions, build_problem
from broker.planning.optimizer.solve import solve
from markets.commitments import TERM_HOURS, CommitmentKind, OwnedCommitment
from markets.model import InstanceType, MarketSnapshot, Pool, PoolSnapshot, Provider
from policies.workloads.spec import parse_workloads

T0 = datetime(2026, 3, 2, tzinfo=UTC)
GROUP = "aws/us-east-1/g1"


def _market(*, od: float = 1.0, discount: float, spot: float | None = None) -> MarketSnapshot:
    inst = InstanceType(
        provider=Provider.AWS, name="g1", family="g", units=1, gpus=1, vcpus=4, memory_gib=16.0
    )
    pools = tuple(
        PoolSnapshot(
            pool=Pool(
                provider=Provider.AWS, region="us-east-1", zone=f"us-east-1{z}", instance_type="g1"
            ),
            instance=inst,
            on_demand_usd_per_hour=od,
            spot_usd_per_hour=spot,
            committed_1y_usd_per_hour=od * (1 - discount),
            committed_3y_usd_per_hour=od * (1 - discount) * 0.8,
            placement_score=10,
            observed_at=T0,
        )
        for z in "ab"
    )
    return MarketSnapshot(at=T0, pools=pools, source="test")


def _job(kind: str, units: int, hours: int, **extra: object) -> dict[str, object]:
    job: dict[str, object] = {
        "name": "job",
        "class": kind,
        "instance_types": ["g1"],
        "unit_hours": float(units * hours),
        "deadline_hours": float(hours),
        "max_units": units,
        "max_spot_share": 0.0,
        **extra,
    }
    if kind == "training":
        job.update(min_units=units, step_units=1)
    return job


@settings(max_examples=12, deadline=None)
@given(
    hours=st.integers(min_value=6, max_value=48),
    units=st.integers(min_value=1, max_value=8),
    discount=st.floats(min_value=0.05, max_value=0.75),
    kind=st.sampled_from(["training", "batch"]),
    term=st.sampled_from([1, 3]),
)
def test_a_short_horizon_never_buys_a_term_for_a_finite_job(
    hours: int, units: int, discount: float, kind: str, term: int
) -> None:
    # Before the term valuation, the horizon's hours of a fully used commitment
    # (any discount) made it pay: these plans bought `units` instances.
    ws = parse_workloads({"workloads": [_job(kind, units, hours)]}, demand_supplied=True)
    opts = PlanOptions(integral=True, churn_usd_per_unit=0.0, term_years=term, time_limit_s=120)
    plan = solve(build_problem(_market(discount=discount), ws, {}, hours=hours, options=opts))
    assert plan.committed_instances() == {}
    assert plan.unmet_unit_hours["job"] == pytest.approx(0.0, abs=1e-6)


def test_the_same_job_marked_recurring_buys_its_steady_units() -> None:
    ws = parse_workloads(
        {"workloads": [_job("batch", 4, 48, recurring=True)]}, demand_supplied=True
    )
    opts = PlanOptions(integral=True, churn_usd_per_unit=0.0)
    plan = solve(build_problem(_market(discount=0.4), ws, {}, hours=48, options=opts))
    assert plan.committed_instances() == {GROUP: 4}
    (c,) = [c for c in plan.commitments if c.instances]
    assert c.obligation_usd == pytest.approx(4 * 0.6 * TERM_HOURS[1])
    # busy every hour, against $1/h on-demand: saves $0.40 per instance-hour
    assert c.utilisation == pytest.approx(1.0)
    assert c.breakeven_utilisation == pytest.approx(0.6)
    assert c.monthly_saving_usd == pytest.approx(4 * 0.4 * 730)
    assert plan.meta["commitments_by"] == "term valuation"


@pytest.mark.parametrize("hours", [pytest.param(24, id="1-day"), pytest.param(72, id="3-days")])
def test_serving_keeps_the_discount_quantile_whatever_the_horizon(hours: int) -> None:
    rng = np.random.default_rng(5)
    daily = rng.integers(2, 20, size=24).astype(float)
    demand = np.tile(daily, hours // 24)
    ws = parse_workloads(
        {
            "workloads": [
                {"name": "api", "class": "serving", "instance_types": ["g1"], "max_spot_share": 0.0}
            ]
        },
        demand_supplied=True,
    )
    opts = PlanOptions(integral=True, churn_usd_per_unit=0.0, allow_spot=False)
    plan = solve(
        build_problem(_market(discount=0.4), ws, {"api": demand}, hours=hours, options=opts)
    )
    got = plan.committed_instances().get(GROUP, 0)

    def term_cost(k: int) -> float:  # the day repeated over the year
        return k * 0.6 * 24 + float(np.maximum(daily - k, 0).sum())

    costs = {k: term_cost(k) for k in range(21)}
    best = min(costs.values())
    assert costs[got] == pytest.approx(best)


def test_spot_is_the_alternative_a_commitment_must_beat() -> None:
    # Spot at $0.30 effective beats a 40 % discount ($0.60): a serving fleet
    # allowed all-spot buys nothing, though on-demand alone would justify it.
    ws = parse_workloads(
        {
            "workloads": [
                {
                    "name": "api",
                    "class": "serving",
                    "instance_types": ["g1"],
                    "max_spot_share": 1.0,
                    "max_zone_share": 1.0,
                    "max_pool_share": 1.0,
                }
            ]
        },
        demand_supplied=True,
    )
    opts = PlanOptions(integral=True, churn_usd_per_unit=0.0)
    demand = {"api": np.full(24, 6.0)}
    plan = solve(build_problem(_market(discount=0.4, spot=0.3), ws, demand, hours=24, options=opts))
    assert plan.committed_instances() == {}


def test_a_fixed_commitment_is_appraised_against_the_mix() -> None:
    import dataclasses

    ws = parse_workloads({"workloads": [_job("batch", 2, 24)]}, demand_supplied=True)
    opts = PlanOptions(integral=True, churn_usd_per_unit=0.0)
    problem = build_problem(_market(discount=0.4), ws, {}, hours=24, options=opts)
    plan = solve(dataclasses.replace(problem, committed_fixed={GROUP: 2}))
    (c,) = [c for c in plan.commitments if c.instances]
    assert c.obligation_usd == pytest.approx(2 * 0.6 * 8760)
    # 48 busy instance-hours of a 17,520-hour obligation: a loss, and it says so
    assert c.utilisation == pytest.approx(48 / (2 * 8760))
    assert c.monthly_saving_usd is not None and c.monthly_saving_usd < 0
    assert c.breakeven_utilisation == pytest.approx(0.6)


def _owned(count: int, end_hours: float) -> OwnedCommitment:
    return OwnedCommitment(
        id="ri-1",
        provider=Provider.AWS,
        kind=CommitmentKind.RESERVED,
        start=T0 - timedelta(days=300),
        end=T0 + timedelta(hours=end_hours),
        region="us-east-1",
        instance_type="g1",
        count=count,
    )


@pytest.mark.parametrize(
    ("end_hours", "bought"),
    [
        # owned for two more years: they cover 6 of the 10, buy the 4 left
        pytest.param(2 * 8760, 4, id="owned-outlive-the-term"),
        # owned expire as the horizon ends: the year ahead needs all 10 anew
        pytest.param(24, 10, id="owned-expire-now"),
    ],
)
def test_what_to_buy_next_given_what_is_owned_and_when_it_expires(
    end_hours: float, bought: int
) -> None:
    ws = parse_workloads(
        {
            "workloads": [
                {"name": "api", "class": "serving", "instance_types": ["g1"], "max_spot_share": 0.0}
            ]
        },
        demand_supplied=True,
    )
    opts = PlanOptions(integral=True, churn_usd_per_unit=0.0, allow_spot=False)
    problem = build_problem(
        _market(discount=0.4),
        ws,
        {"api": np.full(24, 10.0)},
        hours=24,
        options=opts,
        owned=(_owned(6, end_hours),),
    )
    plan = solve(problem)
    assert plan.committed_instances() == {GROUP: bought}
    assert plan.unmet_unit_hours["api"] == pytest.approx(0.0, abs=1e-6)
    # the owned 6 serve in the horizon: the plan pays on-demand for nothing
    assert plan.planned_cost_by_tier()["on_demand"] == pytest.approx(0.0, abs=1e-6)
