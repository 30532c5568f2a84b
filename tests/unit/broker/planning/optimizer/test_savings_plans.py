"""AWS Savings Plans in the MILP: a $/h commitment over the usage in its scope."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from broker.planning.optimizer.problem import PlanOptions, build_problem
from broker.planning.optimizer.savings_plans import COMPUTE_GROUP, ec2_group, steps
from broker.planning.optimizer.solve import solve
from markets.catalog import savings_plan_discount
from markets.commitments import CommitmentKind, OwnedCommitment
from markets.model import InstanceType, MarketSnapshot, Pool, PoolSnapshot, Provider
from policies.workloads.spec import parse_workloads

T0 = datetime(2026, 3, 2, tzinfo=UTC)
DISCOUNT = 0.4
COMPUTE_RATE = 1.0 - DISCOUNT * 66 / 72  # $0.6333/h per $1/h instance (catalog rule)


def _market(types: dict[str, str], regions: tuple[str, ...] = ("us-east-1",)) -> MarketSnapshot:
    """$1/h types (name -> family), RIs 40 % off, in ``regions``."""
    pools = []
    for name, family in types.items():
        inst = InstanceType(
            provider=Provider.AWS,
            name=name,
            family=family,
            units=1,
            gpus=1,
            vcpus=4,
            memory_gib=16.0,
        )
        for region in regions:
            pools.append(
                PoolSnapshot(
                    pool=Pool(
                        provider=Provider.AWS, region=region, zone=f"{region}a", instance_type=name
                    ),
                    instance=inst,
                    on_demand_usd_per_hour=1.0,
                    committed_1y_usd_per_hour=1.0 - DISCOUNT,
                    committed_3y_usd_per_hour=(1.0 - DISCOUNT) * 0.8,
                    placement_score=10,
                    observed_at=T0,
                )
            )
    return MarketSnapshot(at=T0, pools=tuple(pools), source="test")


def _serving(name: str, types: list[str]) -> dict[str, object]:
    return {"name": name, "class": "serving", "instance_types": types, "max_spot_share": 0.0}


OPTS = PlanOptions(integral=True, churn_usd_per_unit=0.0, allow_spot=False, time_limit_s=300)


def _owned(kind: CommitmentKind, usd: float, **extra: object) -> OwnedCommitment:
    return OwnedCommitment(id="sp-1", provider=Provider.AWS, kind=kind,
                           start=T0 - timedelta(days=30), end=T0 + timedelta(days=3 * 365),
                           usd_per_hour=usd, **extra)  # type: ignore[arg-type]  # fmt: skip


def test_the_catalog_prices_savings_plans_by_the_published_rule() -> None:
    # p4d: RI 60 % (3y), EC2 Instance SP the same, Compute SP 60 % x 66/72 = 55 %
    assert savings_plan_discount("savings_plan_ec2", "p4d.24xlarge", 3) == pytest.approx(0.60)
    assert savings_plan_discount("savings_plan_compute", "p4d.24xlarge", 3) == pytest.approx(0.55)
    assert savings_plan_discount("savings_plan_compute", "p4d.24xlarge", 1) == pytest.approx(
        0.40 * 66 / 72
    )
    assert savings_plan_discount("savings_plan_compute", "a2-highgpu-8g", 1) is None  # GCP


def test_a_compute_plan_beats_per_type_reservations_when_usage_moves_between_families() -> None:
    # One instance busy every hour, on g1 (family g) in even hours and on h1
    # (family h) in odd ones. Per hour: on-demand $1; an RI of each type
    # $1.20; an EC2 Instance SP per family $1.20; an RI for g1 and h1 on
    # demand $1.10; one Compute SP covering one instance $0.633.
    ws = parse_workloads(
        {"workloads": [_serving("a", ["g1"]), _serving("b", ["h1"])]}, demand_supplied=True
    )
    even = np.tile([1.0, 0.0], 12)
    demand = {"a": even, "b": 1.0 - even}
    plan = solve(build_problem(_market({"g1": "g", "h1": "h"}), ws, demand, hours=24, options=OPTS))
    assert plan.committed_instances() == {COMPUTE_GROUP: steps(COMPUTE_RATE)}
    assert plan.committed_usd_per_hour() == pytest.approx(0.634)
    assert plan.planned_cost_by_tier()["on_demand"] == pytest.approx(0.0, abs=1e-6)
    assert sum(plan.unmet_unit_hours.values()) == pytest.approx(0.0, abs=1e-6)
    (c,) = [c for c in plan.commitments if c.instances]
    assert c.obligation_usd == pytest.approx(0.634 * 8760)
    # busy every hour: saves $1 - $0.634 a month-hour against on-demand
    assert c.utilisation == pytest.approx(COMPUTE_RATE / 0.634, rel=1e-6)
    assert c.monthly_saving_usd == pytest.approx((1.0 - 0.634) * 730, rel=1e-3)
    assert c.breakeven_utilisation == pytest.approx(COMPUTE_RATE, rel=1e-6)
    assert plan.status == "optimal"  # the MILP still proves its gap
    assert plan.meta["gap"] == pytest.approx(0.0, abs=1e-6)


def test_steady_usage_in_one_family_keeps_reservations() -> None:
    # An EC2 Instance SP costs what the RI does ($0.60): the RI stays.
    ws = parse_workloads({"workloads": [_serving("a", ["g1"])]}, demand_supplied=True)
    plan = solve(
        build_problem(_market({"g1": "g"}), ws, {"a": np.full(24, 3.0)}, hours=24, options=OPTS)
    )
    assert plan.committed_instances() == {"aws/us-east-1/g1": 3}


@pytest.mark.parametrize(
    ("types", "family", "region", "covered"),
    [
        pytest.param(["g1"], "g", "us-east-1", True, id="its-family-and-region"),
        pytest.param(["h1"], "g", "us-east-1", False, id="another-family"),
        pytest.param(["g1"], "g", "us-west-2", False, id="another-region"),
    ],
)
def test_an_ec2_instance_plan_covers_only_its_family_in_its_region(
    types: list[str], family: str, region: str, covered: bool
) -> None:
    ws = parse_workloads({"workloads": [_serving("a", types)]}, demand_supplied=True)
    opts = PlanOptions(
        integral=True, churn_usd_per_unit=0.0, allow_spot=False, allow_committed=False
    )
    owned = _owned(CommitmentKind.SAVINGS_PLAN_EC2, 0.6, family=family, region=region)
    problem = build_problem(
        _market({"g1": "g", "h1": "h"}),
        ws,
        {"a": np.full(24, 1.0)},
        hours=24,
        options=opts,
        owned=(owned,),
    )
    plan = solve(problem)
    on_demand = plan.planned_cost_by_tier()["on_demand"]
    assert on_demand == pytest.approx(0.0 if covered else 24.0, abs=1e-6)
    assert plan.committed_instances() == {}


@pytest.mark.parametrize(("demand", "buys"), [(1.0, False), (2.0, True)])
def test_an_owned_plan_is_used_before_buying_more(demand: float, buys: bool) -> None:
    ws = parse_workloads({"workloads": [_serving("a", ["g1", "h1"])]}, demand_supplied=True)
    # a 3-year no-upfront plan: $0.650 an instance-hour here (the catalog rule)
    owned = _owned(CommitmentKind.SAVINGS_PLAN_COMPUTE, 0.66)
    problem = build_problem(
        _market({"g1": "g", "h1": "h"}),
        ws,
        {"a": np.full(24, demand)},
        hours=24,
        options=OPTS,
        owned=(owned,),
    )
    plan = solve(problem)
    assert plan.planned_cost_by_tier()["on_demand"] == pytest.approx(0.0, abs=1e-6)
    bought = plan.committed_usd_per_hour()
    # The owned $0.66/h pays 0.66 / 0.6501 = 1.015 instances (3-year no
    # upfront: $1 x (1 - 52 % x 66/72) x 1.369/1.102); the rest of the
    # second instance goes on a new EC2 Instance plan at $0.60 an
    # instance-hour: 0.985 x 0.60 = $0.591/h, never a whole second RI.
    owned_rate = (1 - 0.52 * 66 / 72) * 1.369 / 1.102
    assert bought == (pytest.approx(0.6 * (2 - 0.66 / owned_rate), abs=1e-3) if buys else 0.0)
    assert (plan.committed_instances() != {}) is buys


def test_an_owned_plan_with_its_account_rates_uses_them() -> None:
    ws = parse_workloads({"workloads": [_serving("a", ["g1"])]}, demand_supplied=True)
    opts = PlanOptions(
        integral=True, churn_usd_per_unit=0.0, allow_spot=False, allow_committed=False
    )
    # $1/h at $0.5 an instance-hour of g1 covers two instances
    owned = _owned(CommitmentKind.SAVINGS_PLAN_COMPUTE, 1.0, rates=(("g1", "us-east-1", 0.5),))
    problem = build_problem(
        _market({"g1": "g"}), ws, {"a": np.full(24, 3.0)}, hours=24, options=opts, owned=(owned,)
    )
    plan = solve(problem)
    assert plan.planned_cost_by_tier()["on_demand"] == pytest.approx(24.0, abs=1e-6)


def test_an_owned_plan_that_expires_mid_horizon_covers_only_until_then() -> None:
    ws = parse_workloads({"workloads": [_serving("a", ["g1"])]}, demand_supplied=True)
    opts = PlanOptions(
        integral=True, churn_usd_per_unit=0.0, allow_spot=False, allow_committed=False
    )
    owned = OwnedCommitment(
        id="sp-1",
        provider=Provider.AWS,
        kind=CommitmentKind.SAVINGS_PLAN_COMPUTE,
        start=T0 - timedelta(days=300),
        end=T0 + timedelta(hours=10),
        usd_per_hour=0.7,
    )
    demand = np.full(24, 1.0)
    demand[10:] = 1.0 + 1e-3  # a period boundary at the expiry
    problem = build_problem(
        _market({"g1": "g"}), ws, {"a": demand}, hours=24, options=opts, owned=(owned,)
    )
    plan = solve(problem)
    assert plan.planned_cost_by_tier()["on_demand"] == pytest.approx(
        14.0, abs=1e-6
    )  # 10 h covered, 14 h not


@pytest.mark.parametrize("kind", ["training", "batch"])
def test_a_two_day_horizon_never_buys_a_plan_for_a_finite_job(kind: str) -> None:
    job: dict[str, object] = {
        "name": "job",
        "class": kind,
        "instance_types": ["g1", "h1"],
        "unit_hours": 4 * 48.0,
        "deadline_hours": 48.0,
        "max_units": 4,
        "max_spot_share": 0.0,
    }
    if kind == "training":
        job.update(min_units=4, step_units=1)
    ws = parse_workloads({"workloads": [job]}, demand_supplied=True)
    for term in (1, 3):
        opts = PlanOptions(integral=True, churn_usd_per_unit=0.0, term_years=term, time_limit_s=300)
        plan = solve(build_problem(_market({"g1": "g", "h1": "h"}), ws, {}, hours=48, options=opts))
        assert plan.committed_instances() == {}
        assert plan.unmet_unit_hours["job"] == pytest.approx(0.0, abs=1e-6)


def test_the_ec2_group_key_names_family_and_region() -> None:
    assert ec2_group("us-east-1", "p4d") == "aws/us-east-1/savings-plan-ec2-p4d"
    assert steps(0.6333333) == 634
    assert steps(0.634) == 634


def test_an_owned_plan_pays_for_aws_though_another_cloud_is_cheaper_on_demand() -> None:
    # GCP on-demand $0.90 beats AWS's $1.00, so dominance alone would drop
    # AWS; an owned $0.70/h Compute plan covering g1 makes AWS the free one.
    aws = _market({"g1": "g"})
    inst = InstanceType(
        provider=Provider.GCP, name="c1", family="c", units=1, gpus=1, vcpus=4, memory_gib=16.0
    )
    gcp = PoolSnapshot(
        pool=Pool(
            provider=Provider.GCP, region="us-central1", zone="us-central1-a", instance_type="c1"
        ),
        instance=inst,
        on_demand_usd_per_hour=0.9,
        placement_score=10,
        observed_at=T0,
    )
    market = MarketSnapshot(at=T0, pools=(*aws.pools, gcp), source="test")
    ws = parse_workloads({"workloads": [_serving("a", ["g1", "c1"])]}, demand_supplied=True)
    opts = PlanOptions(
        integral=True, churn_usd_per_unit=0.0, allow_spot=False, allow_committed=False
    )
    without = solve(build_problem(market, ws, {"a": np.full(24, 1.0)}, hours=24, options=opts))
    assert without.planned_cost_by_tier()["on_demand"] == pytest.approx(24 * 0.9)
    owned = _owned(CommitmentKind.SAVINGS_PLAN_COMPUTE, 0.7)
    plan = solve(
        build_problem(market, ws, {"a": np.full(24, 1.0)}, hours=24, options=opts, owned=(owned,))
    )
    assert plan.planned_cost_by_tier()["on_demand"] == pytest.approx(0.0, abs=1e-6)
    rows = plan.allocations
    assert set(rows["tier"]) == {"committed"}
    assert set(rows["pool_key"]) == {"aws/us-east-1/us-east-1a/g1"}
