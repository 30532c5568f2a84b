"""A re-plan's move of running capacity pays or stays (broker.planning.moves).

Pools of the tiny market: one V100 (p3.2xlarge) each, hazard 0.01/h, so an
instance's expected remaining life over a need of N hours is
(1 - exp(-0.01 N)) / 0.01 (21.3 h for N = 24) and a move's cold start is
$0.25 per unit (the planner's churn term)."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import pandas as pd
import pytest

from broker.planning.moves import need_hours, unpaid_moves
from broker.planning.plan import Plan
from markets.cloud_fleet import OWNER_TAG, Instance, InstanceState
from markets.model import Tier
from policies.workloads.spec import WorkloadSet, parse_workloads
from tests.fakes.tiny_market import T0, TinyMarket, pool_key

OWNER = "me"
A, B, C = pool_key("a"), pool_key("b"), pool_key("c")
BIG = pool_key("b", "p3.8xlarge")  # four V100s


def _ws(cls: str, **extra: Any) -> WorkloadSet:
    spec: dict[str, Any] = {"name": "w", "class": cls,
                            "instance_types": ["p3.2xlarge", "p3.8xlarge"],
                            "max_spot_share": 1.0, "max_zone_share": 1.0,
                            "max_pool_share": 1.0, **extra}  # fmt: skip
    if cls == "training":
        spec.update(min_units=4, unit_hours=1000, deadline_hours=5000, min_on_non_revocable=False)
    elif cls == "batch":
        spec.update(unit_hours=1000)
    else:
        spec.update(demand={"base_units": 4, "peak_units": 4})
    return parse_workloads({"workloads": [spec]})


def _inst(iid: str, pool: str, tier: Tier = Tier.SPOT) -> Instance:
    return Instance(instance_id=iid, pool_key=pool, tier=tier, workload="w",
                    state=InstanceState.RUNNING, units=1,
                    launched_at=T0 - timedelta(hours=2), tags={OWNER_TAG: OWNER})  # fmt: skip


def _unpaid(
    ws: WorkloadSet,
    want: dict[tuple[str, str, str], int],
    fleet: list[Instance],
    spot_usd: dict[str, float],
    need_h: float,
) -> list[str]:
    pools = TinyMarket([A, B, C, BIG], spot_usd=spot_usd).snapshot(T0).by_key()
    gangs = [w.name for w in ws.workloads if w.workload_class.value == "training"]
    kept = unpaid_moves(want, fleet, OWNER, {w.name: w for w in ws.workloads}, pools,
                        {("w", "spot"): need_h}, gangs=gangs)  # fmt: skip
    return sorted(i.instance_id for insts in kept.values() for i in insts)


FOUR_IN_A = [_inst(f"i-{k}", A) for k in range(4)]


@pytest.mark.parametrize("cls", ["serving", "batch"])
def test_a_move_for_a_cent_an_hour_stays(cls: str) -> None:
    # 1 % cheaper for 21.3 h of expected life: ~$0.21 saved against $0.25 of cold start alone.
    got = _unpaid(_ws(cls), {("w", B, "spot"): 4}, FOUR_IN_A, {A: 1.0, B: 0.99}, need_h=24)
    assert got == [f"i-{k}" for k in range(4)]


@pytest.mark.parametrize("cls", ["serving", "batch"])
def test_a_move_that_halves_the_price_over_a_day_goes(cls: str) -> None:
    # $0.50/h less for 21.3 h: ~$10 saved; the move costs about a dollar.
    got = _unpaid(_ws(cls), {("w", C, "spot"): 4}, FOUR_IN_A, {A: 1.0, C: 0.5}, need_h=24)
    assert got == []


def test_the_saving_counts_only_over_the_hours_the_plan_still_needs_the_work() -> None:
    # Half the price, but the plan needs the work for 20 more minutes: ~$0.17 saved.
    got = _unpaid(_ws("batch"), {("w", C, "spot"): 4}, FOUR_IN_A, {A: 1.0, C: 0.5}, need_h=1 / 3)
    assert len(got) == 4


def test_a_scale_down_is_not_a_move() -> None:
    # The plan wants 2 of the 4, nothing elsewhere: not judged here (it ends).
    assert _unpaid(_ws("batch"), {("w", A, "spot"): 2}, FOUR_IN_A, {A: 1.0}, need_h=24) == []


def test_a_gang_node_is_not_moved_for_its_own_saving_that_a_batch_node_would_take() -> None:
    # One of four nodes to a pool 20 % cheaper: ~$4.3 saved over its life. A
    # batch node's move costs ~$1.3 (cold start, restart, half a Daly interval
    # redone) and goes; a training node's (the class's 30 min restart, 120 s
    # checkpoints) ~$2.3, and the gang's three other nodes idle through that
    # restart and redo their lost work (~$6.4 more): it stays.
    want = {("w", A, "spot"): 3, ("w", B, "spot"): 1}
    prices = {A: 1.0, B: 0.8}
    assert _unpaid(_ws("batch"), want, FOUR_IN_A, prices, need_h=24) == []
    assert _unpaid(_ws("training"), want, FOUR_IN_A, prices, need_h=24) == ["i-3"]


def test_a_whole_gang_moves_when_the_saving_of_all_its_nodes_pays_one_restart() -> None:
    want = {("w", B, "spot"): 4}
    assert _unpaid(_ws("training"), want, FOUR_IN_A, {A: 1.0, B: 0.8}, need_h=24) == []


def test_moves_between_tiers_are_the_plans_risk_decision_not_judged_here() -> None:
    want = {("w", A, "on_demand"): 4}
    assert _unpaid(_ws("batch"), want, FOUR_IN_A, {A: 1.0}, need_h=24) == []


def _plan(rows: list[tuple[int, float]]) -> Plan:
    frame = pd.DataFrame(
        [{"workload": "w", "pool_key": A, "tier": "spot", "instances": n, "units": n,
          "work_per_hour": n, "hour_start": h, "hour_end": h + 1} for h, n in rows]
    )  # fmt: skip
    return Plan(start=T0, hours=len(rows), period_hours=1, commitments=(), allocations=frame,
                objective_usd=0.0, status="optimal", solver="test", solve_time_s=0.0,
                integral=True)  # fmt: skip


def test_need_hours_runs_while_the_plan_keeps_the_work_of_the_hour_in_force() -> None:
    plan = _plan([(0, 4.0), (1, 4.0), (2, 6.0), (3, 3.0), (4, 6.0)])
    # From 00:15: the rest of hour 0, hours 1 and 2 (4 and 6 >= 4), stops at hour 3.
    assert math.isclose(need_hours(plan, T0 + timedelta(minutes=15))[("w", "spot")], 2.75)
    assert math.isclose(need_hours(plan, T0 + timedelta(hours=4))[("w", "spot")], 1.0)


def test_instances_are_kept_only_as_far_as_whole_launches_give_way_to_them() -> None:
    # 0.25 % cheaper per GPU on a 4-GPU type: no move pays. Three 1-GPU nodes
    # cannot stand in for one 4-GPU launch (the launch would run beside them):
    # they go; four can, and stay.
    prices = {A: 1.0, BIG: 3.99}
    three = FOUR_IN_A[:3]
    assert _unpaid(_ws("batch"), {("w", BIG, "spot"): 1}, three, prices, need_h=24) == []
    got = _unpaid(_ws("batch"), {("w", BIG, "spot"): 1}, FOUR_IN_A, prices, need_h=24)
    assert got == [f"i-{k}" for k in range(4)]
