"""The plan's wait-or-run-now line: a training job with
a deadline, A100 on-demand now or H100 spot 3x faster at half the price
once its spot capacity appears at hour 2."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from broker.planning.optimizer.problem import build_problem
from broker.planning.optimizer.solve import solve
from broker.planning.optimizer.waits import wait_advice, wait_options
from markets.model import Hazard, HazardSource, InstanceType, MarketSnapshot, Pool, PoolSnapshot
from markets.model import Provider as Cloud
from policies.workloads.spec import parse_workloads

T0 = datetime(2026, 3, 2, tzinfo=UTC)
P = 20.0  # $/h of one 8-GPU A100 instance on-demand
A = "aws/us-east-1/us-east-1a/a100x8"
H = "aws/us-east-1/us-east-1b/h100x8"


def _pool(zone: str, itype: str, *, od: float, spot: float | None) -> PoolSnapshot:
    inst = InstanceType(
        provider=Cloud.AWS,
        name=itype,
        family=itype[:4],
        units=8,
        gpus=8,
        vcpus=96,
        memory_gib=1152.0,
    )
    return PoolSnapshot(
        pool=Pool(provider=Cloud.AWS, region="us-east-1", zone=zone, instance_type=itype),
        instance=inst,
        on_demand_usd_per_hour=od,
        spot_usd_per_hour=spot,
        placement_score=10,
        hazard=Hazard(rate_per_hour=0.0, source=HazardSource.ASSUMED),
        observed_at=T0,
    )


def _problem(a100_hours: float, **job: object):
    snap = MarketSnapshot(
        at=T0,
        pools=(
            _pool("us-east-1a", "a100x8", od=P, spot=None),
            # H100 on-demand priced out: the choice is A100 now or H100 spot later.
            _pool("us-east-1b", "h100x8", od=1000 * P, spot=P / 2),
        ),
        source="test",
    )
    ws = parse_workloads(
        {
            "workloads": [
                {
                    "name": "ft",
                    "class": "training",
                    "instance_types": ["h100x8", "a100x8"],
                    "throughput": {"h100x8": 3.0, "a100x8": 1.0},
                    "min_units": 8,
                    "unit_hours": 8 * a100_hours,
                    "deadline_hours": 48,
                    "checkpoint_write_seconds": 0,
                    "restart_minutes": 0,
                    "max_zone_share": 1.0,
                    "max_pool_share": 1.0,
                    "min_on_non_revocable": False,
                    **job,
                },
            ]
        }
    )
    cap = np.array([0.0, 0.0] + [4.0] * 22)
    return build_problem(snap, ws, {}, hours=24, spot_capacity_instances={H: cap}), ws


def test_the_options_are_a100_now_and_h100_spot_from_the_hour_its_capacity_appears() -> None:
    problem, ws = _problem(6.0)
    got = {
        o.label: (o.wait_hours, o.run_hours, o.cost_usd)
        for o in wait_options(problem, ws.by_name("ft"))
    }
    assert got["a100x8 on-demand in us-east-1a"] == pytest.approx((0.0, 6.0, 6 * P))
    assert got["h100x8 spot in us-east-1b"] == pytest.approx((2.0, 2.0, 2 * P / 2))


@pytest.mark.parametrize(("t", "waits"), [(2.0, False), (2.75, False), (3.25, True), (6.0, True)])
def test_the_job_waits_iff_the_a100_run_exceeds_3_h(t: float, waits: bool) -> None:
    problem, ws = _problem(t)
    advice = wait_advice(problem, ws.by_name("ft"))
    assert advice is not None and advice.waits is waits


def test_the_explanation_says_it_waits_and_what_that_buys() -> None:
    problem, _ = _problem(6.0)
    plan = solve(problem)
    line = plan.explanations["ft"].waiting
    assert line == (
        "waits 2 h for h100x8 spot in us-east-1b: finishes 2 h earlier at 17 % of the cost "
        "than a100x8 on-demand in us-east-1a now"
    )
    assert line in plan.explain()


def test_a_job_with_no_value_of_time_is_told_to_wait_even_for_a_slower_finish() -> None:
    problem, ws = _problem(2.0, value_of_time_usd_per_hour=0)
    advice = wait_advice(problem, ws.by_name("ft"))
    assert advice is not None and advice.waits
    assert "finishes 0.667 h later at 17 % of the cost" in advice.sentence()


def test_a_gang_minimum_held_off_spot_has_no_spot_option() -> None:
    problem, ws = _problem(6.0, min_on_non_revocable=True)
    labels = [o.label for o in wait_options(problem, ws.by_name("ft"))]
    assert labels and not any("spot" in label for label in labels)


def test_no_deadline_no_advice() -> None:
    problem, ws = _problem(6.0, deadline_hours=None)
    assert wait_advice(problem, ws.by_name("ft")) is None


def test_where_the_plan_differs_from_the_advice_the_line_says_so() -> None:
    # advice: run now (2.75 h on A100s vs 2 + 0.92 h); the MILP's hourly
    # periods finish both at hour 3 (``finish``), so it takes the cheap spot
    problem, _ = _problem(2.75)
    plan = solve(problem)
    line = plan.explanations["ft"].waiting
    assert line is not None and line.startswith("runs now on a100x8 on-demand")
    assert line.endswith("(the plan starts it at hour 2)")


def test_nothing_to_wait_for_no_advice_and_no_line() -> None:
    problem, ws = _problem(6.0, min_on_non_revocable=True)  # every option starts now
    assert wait_advice(problem, ws.by_name("ft")) is None
    assert solve(problem).explanations["ft"].waiting is None
