"""Reserved-ahead blocks in the plan, golden: the example fine-tune of
``tests/unit/policies/test_blocks.py`` (10,000 A100-GPU-hours on a two-node
p5.48xlarge gang, an H100 three A100s: 625/3 h a node) planned by the MILP.

Spot at $12/h with a time factor of 1.25 (a hazard of 0.2/h, an hour's
restart, no checkpoint writes: 1 / (1 - 0.2)), on-demand $98.32/h. A 9-day
block of 2 x p5.48xlarge from hour 12 costs 2 x 216 x $31.464 = $13,592.448.
- 10-day deadline: the mix costs $19,858.93 by hand (in whole 6-hour
  periods a little more); the plan buys the block and pays its price.
- 20-day deadline: spot alone, $6,250 by hand ($6,336 in whole periods);
  the plan buys no block.
- A block held: sunk, the plan runs the job in it at $0.
The plan's choice is policies.blocks' ``choose_block`` on the same job.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from broker.planning.optimizer.fast import fast_plan
from broker.planning.optimizer.problem import PlanOptions, build_problem
from broker.planning.optimizer.solve import solve
from broker.planning.plan import Plan
from markets import catalog
from markets.blocks import BlockKind, CapacityBlock
from markets.model import Hazard, MarketSnapshot, Pool, PoolSnapshot, Provider, Tier
from policies.blocks import BlockJob, choose_block
from policies.workloads.spec import parse_workloads

NOW = datetime(2026, 12, 7, 12, tzinfo=UTC)
H = 10_000 / 3 / 16  # productive hours a node
# 6-hour periods of whole instances, the gang's size decided per period
# (``gang_blocks``): the block's window (hours 12 to 228) opens and closes
# between periods.
STEP = 6
OPTIONS = PlanOptions(
    integral=True,
    time_limit_s=120.0,
    churn_usd_per_unit=0.0,
    period_hours=STEP,
    gang_blocks=80,
    allow_committed=False,
)
KEY = "aws/us-east-1/us-east-1a/p5.48xlarge"


def _snapshot() -> MarketSnapshot:
    return MarketSnapshot(at=NOW, source="test", pools=(PoolSnapshot(
        pool=Pool(provider=Provider.AWS, region="us-east-1", zone="us-east-1a",
                  instance_type="p5.48xlarge"),
        instance=catalog.instance_type("p5.48xlarge"), on_demand_usd_per_hour=98.32,
        spot_usd_per_hour=12.0, placement_score=10, hazard=Hazard(rate_per_hour=0.2),
        observed_at=NOW),))  # fmt: skip


def _job(deadline: float) -> object:
    return parse_workloads({"workloads": [{
        "name": "finetune", "class": "training", "instance_types": ["p5.48xlarge"],
        "throughput": {"p5.48xlarge": 3.0}, "min_units": 16, "max_units": 16,
        "unit_hours": 10_000.0, "deadline_hours": deadline, "min_on_non_revocable": False,
        "restart_minutes": 60, "checkpoint_write_seconds": 0, "value_of_time_usd_per_hour": 0,
        "unmet_penalty_usd_per_unit_hour": 1_000,
    }]}, demand_supplied=True)  # fmt: skip


def _block(start_h: float = 12, held: bool = False) -> CapacityBlock:
    start = NOW + timedelta(hours=start_h)
    return CapacityBlock(kind=BlockKind.AWS_CAPACITY_BLOCK, provider=Provider.AWS,
                         block_id="cb-0a1", instance_type="p5.48xlarge", region="us-east-1",
                         zone="us-east-1a", count=2, start=start,
                         end=start + timedelta(days=9), upfront_usd=2 * 216 * 31.464,
                         held=held)  # fmt: skip


def _plan(deadline: float, *blocks: CapacityBlock) -> Plan:
    problem = build_problem(_snapshot(), _job(deadline), {}, hours=int(deadline),  # type: ignore[arg-type]
                            options=OPTIONS, blocks=blocks)  # fmt: skip
    plan = solve(problem)
    assert plan.unmet_total() < 1e-6
    return plan


def _in_block(plan: Plan) -> float:
    a = plan.allocations
    rows = a[(a["tier"] == Tier.ON_DEMAND.value) & (a["usd_per_instance_hour"] == 0.0)]
    return float((rows["instances"] * (rows["hour_end"] - rows["hour_start"])).sum())


def _policy(deadline: float, *blocks: CapacityBlock) -> object:
    job = BlockJob(instance_type="p5.48xlarge", nodes=2, work_hours=H, deadline_hours=deadline,
                   spot_usd_per_hour=12.0, on_demand_usd_per_hour=98.32,
                   spot_time_factor=1.25)  # fmt: skip
    return choose_block(job, blocks, NOW).block


def _mix_in_steps(deadline: float) -> float:
    """The hand mix in whole periods: the gang runs n periods (2 n instance-
    periods), k of them on spot, the rest on-demand."""
    best = float("inf")
    for n in range(int(deadline) // STEP + 1):
        for k in range(2 * n + 1):
            spot_h, od_h = k * STEP, (2 * n - k) * STEP
            if spot_h / 1.25 + od_h >= 2 * H - 1e-9:
                best = min(best, 12.0 * spot_h + 98.32 * od_h)
    return best


def test_the_mix_alone_costs_the_hand_figure_in_whole_periods() -> None:
    plan = _plan(240)
    assert plan.blocks == ()
    by_hand = 2 * (380 / 3 * 15 + 245 / 3 * 98.32)  # $19,858.93, the hours not whole
    assert _mix_in_steps(240) >= by_hand
    assert plan.planned_cost_usd() == pytest.approx(_mix_in_steps(240), abs=0.005)


def test_ten_day_deadline_buys_the_block_at_its_price() -> None:
    block = _block()
    plan = _plan(240, block)
    assert _policy(240, block) == block
    assert plan.blocks == (block,)
    assert plan.blocks_usd() == pytest.approx(13_592.448)
    assert plan.planned_cost_usd() == pytest.approx(13_592.448, abs=0.005)
    assert plan.objective_usd == pytest.approx(13_592.448, abs=0.005)
    assert _in_block(plan) >= 2 * H  # the whole job in the block
    assert ("block cb-0a1 (aws_capacity_block): 2 x p5.48xlarge in us-east-1a for 216 h "
            "from 2026-12-08 00:00 UTC, buy for $13,592.45") in plan.explain()  # fmt: skip
    outside = plan.allocations[plan.allocations["hour_start"] < 12]
    assert outside.empty  # nothing runs before the block's window opens


def test_twenty_day_deadline_keeps_spot_and_buys_no_block() -> None:
    block = _block()
    plan = _plan(480, block)
    assert _policy(480, block) is None
    assert plan.blocks == ()
    assert set(plan.allocations["tier"]) == {Tier.SPOT.value}
    assert _mix_in_steps(480) == pytest.approx(2 * 264 * 12.0)  # $6,250 by hand, in steps
    assert plan.planned_cost_usd() == pytest.approx(_mix_in_steps(480), abs=0.005)


def test_a_held_block_is_sunk_and_runs_the_job() -> None:
    block = _block(held=True)
    plan = _plan(480, block)
    assert plan.blocks == (block,)
    assert plan.blocks_usd() == 0.0
    assert plan.planned_cost_usd() == pytest.approx(0.0, abs=0.005)
    assert _in_block(plan) >= 2 * H


def test_a_block_that_opens_late_is_topped_up_with_spot_before_it() -> None:
    late = _block(start_h=36)  # 204 h of it before the deadline, 4.33 h a node short
    plan = _plan(240, late)
    assert _policy(240, late) is None  # policies.blocks wants the whole job in the block
    assert plan.blocks == (late,)  # the plan runs the rest on spot first: cheaper than the mix
    # 4.33 productive hours a node short: one period of spot on both nodes
    # (6 / 1.25 = 4.8 h a node), 12 spot instance-hours at $12
    assert plan.planned_cost_usd() == pytest.approx(13_592.448 + 2 * STEP * 12.0, abs=0.005)


def test_a_block_that_opens_too_late_to_pay_is_not_bought() -> None:
    late = _block(start_h=198)  # 42 h before the deadline: the mix does most of the work
    plan = _plan(240, late)
    assert _policy(240, late) is None
    assert plan.blocks == ()
    assert plan.planned_cost_usd() == pytest.approx(_mix_in_steps(240), abs=0.005)


def test_the_fast_plan_runs_in_a_held_block_and_buys_none() -> None:
    held = _block(start_h=0, held=True)
    offer = _block(start_h=0).model_copy(update={"block_id": "cb-offer"})
    problem = build_problem(_snapshot(), _job(240), {}, hours=240, options=OPTIONS,  # type: ignore[arg-type]
                            blocks=(held, offer))  # fmt: skip
    plan = fast_plan(problem)
    assert plan.blocks == (held,)
    a = plan.allocations
    free = a[a["usd_per_instance_hour"] == 0.0]
    assert set(free["pool_key"]) == {KEY} and set(free["tier"]) == {Tier.ON_DEMAND.value}
    inside = (free["hour_start"] >= 0) & (free["hour_end"] <= 216)
    assert bool(inside.all()) and float(free.groupby("period")["instances"].sum().max()) <= 2
    assert plan.unmet_total() < 1e-6
    assert plan.planned_cost_usd() < _mix_in_steps(240)  # the held block's hours are free


@pytest.mark.parametrize(
    "deadline,start_h,bought",
    [(240, 12, True), (480, 12, False), (240, 198, False)],
    ids=["ten-days", "twenty-days", "too-late"],
)
def test_relax_and_fix_buys_the_same_blocks_at_the_same_cost(
    deadline: int, start_h: float, bought: bool
) -> None:
    """The relaxed model (Y_b continuous, ``rounding.fix_blocks``) comes to
    the MILP's plan in each golden case."""
    block = _block(start_h=start_h)
    relaxed = dataclasses.replace(OPTIONS, integral=False)
    problem = build_problem(_snapshot(), _job(deadline), {}, hours=deadline, options=relaxed,  # type: ignore[arg-type]
                            blocks=(block,))  # fmt: skip
    plan = solve(problem)
    assert plan.meta_text("method") == "relax-and-fix"
    assert plan.blocks == ((block,) if bought else ())
    assert plan.planned_cost_usd() == pytest.approx(_plan(deadline, block).planned_cost_usd(),
                                                    abs=0.005)  # fmt: skip
