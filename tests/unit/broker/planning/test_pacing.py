"""Pacing a deadline job across re-plans: a lead is kept, work ahead bought while spot is there."""

from __future__ import annotations

import pytest

from broker.planning.optimizer.problem import PlanOptions
from broker.planning.optimizer.solve import solve
from broker.planning.pacing import ahead_usd_per_unit_hour, due_unit_hours
from broker.planning.rolling import RollingState, window_problem
from markets.model import MarketSnapshot, Tier
from policies.workloads.spec import Workload, parse_workloads
from tests.unit.broker.planning.optimizer.test_solve import _market, _pool


def _training(**extra: object) -> dict[str, object]:
    # 240 unit-hours in 48 h: Uniform Progress's line asks 5 unit-hours an hour.
    # No value of time: the deadline is all that matters (at the training
    # class's $1,000/h the plan would buy on-demand to finish sooner,
    # broker.planning.optimizer.finish).
    return {
        "name": "train",
        "class": "training",
        "instance_types": ["g1"],
        "elastic": True,
        "min_units": 2,
        "step_units": 2,
        "max_units": 8,
        "unit_hours": 240,
        "deadline_hours": 48,
        "max_zone_share": 1.0,
        "max_pool_share": 1.0,
        "max_spot_share": 0.75,
        "min_dwell_minutes": 0,
        "value_of_time_usd_per_hour": 0,
        **extra,
    }


def _job() -> Workload:
    return parse_workloads({"workloads": [_training()]}).workloads[0]


def test_a_job_ahead_of_the_line_owes_nothing_until_the_line_catches_up() -> None:
    # At hour 12 the line is at 60 unit-hours; 120 are done (120 left).
    w = _job()
    assert due_unit_hours(w, 120.0, 12.0, 6.0) == 0.0  # the line reaches 90 by hour 18
    assert due_unit_hours(w, 120.0, 12.0, 18.0) == pytest.approx(150.0 - 120.0)
    state = RollingState(hour=12, remaining_unit_hours={"train": 120.0})
    ws = parse_workloads({"workloads": [_training()]})
    # Re-spread over the time left, the step would owe 120 x 6 / 36 = 20.
    assert state.milestones(6, ws) == {"train": (6, 0.0)}


def test_a_job_behind_the_line_catches_up_no_faster_than_its_work_spread_over_the_time_left() -> (
    None
):
    w = _job()
    # 40 done at hour 12 (the line: 60): the line by hour 18 asks 50 more,
    # the remaining 200 spread over the 36 h left ask 200 x 6 / 36.
    assert due_unit_hours(w, 200.0, 12.0, 6.0) == pytest.approx(200.0 * 6 / 36)
    assert due_unit_hours(w, 200.0, 40.0, 12.0) == 200.0  # the deadline is inside: all of it
    assert due_unit_hours(w, 0.0, 12.0, 6.0) == 0.0


def test_a_job_ahead_of_the_line_waits_out_a_spot_outage_instead_of_running_on_on_demand() -> None:
    ws = parse_workloads({"workloads": [_training()]})
    snap = _market(_pool("us-east-1a", spot=None, committed=None))  # no spot now
    state = RollingState(hour=12, remaining_unit_hours={"train": 120.0})
    problem = window_problem(
        snap, ws, {}, state, hours=12, step_hours=6, options=PlanOptions(integral=True)
    )
    plan = solve(problem)
    assert plan.allocations.empty or plan.allocations.units.sum() == 0
    assert plan.unmet_unit_hours["train"] == pytest.approx(0.0, abs=1e-6)


def _held_half() -> MarketSnapshot:
    """On-demand $1, spot $0.2 held now and half of the time."""
    pool = _pool("us-east-1a", spot=0.2, committed=None).model_copy(update={"available_share": 0.5})
    return _market(pool)


def test_a_job_ahead_runs_at_full_size_while_spot_is_there() -> None:
    # A gang whose minimum may sit on spot: later, a unit-hour costs
    # 0.5 x (2 x 1 + 6 x 0.2) / 8 + 0.5 x 1 = $0.70 (on-demand alone while
    # spot is lost); now, at full size, $0.40.
    ws = parse_workloads({"workloads": [_training(min_on_non_revocable=False)]})
    snap = _held_half()
    assert ahead_usd_per_unit_hour(
        window_problem(snap, ws, {}, RollingState(), hours=1, step_hours=1).costs, ws
    ) == {"train": pytest.approx(0.5 * (2 * 1.0 + 6 * 0.2) / 8 + 0.5 * 1.0)}
    state = RollingState(hour=12, remaining_unit_hours={"train": 120.0})
    plan = solve(
        window_problem(
            snap, ws, {}, state, hours=12, step_hours=6, options=PlanOptions(integral=True)
        )
    )
    a = plan.allocations
    first = a[a.hour_start < 6]
    per_hour = first.groupby("hour_start").units.sum()
    assert len(per_hour) == 6 and set(per_hour.round(6)) == {8.0}  # full size, every hour
    spot = first[first.tier == Tier.SPOT.value].groupby("hour_start").units.sum()
    assert set(spot.round(6)) == {6.0}  # its spot share, 0.75; the rest on on-demand


def test_a_gang_with_an_on_demand_minimum_runs_ahead_only_where_now_beats_later() -> None:
    """Its minimum runs while its spot is lost, so later an hour of the gang
    at full size costs (2 x 1 + 6 x 0.5 x 0.2) / (2 + 6 x 0.5) = $0.52 a
    unit-hour (``policies.held``), not $0.70. Now the pool holds spot, but
    over the window's gang block its expected share falls back to half:
    no cheaper than later once the launch is paid, so the job ahead of its
    line waits (it ran the whole window at $0.70: on the 30-day portfolio
    bench the fine-tune then ran 85 gang-hours where hindsight needs 60)."""
    ws = parse_workloads({"workloads": [_training()]})
    snap = _held_half()
    state = RollingState(hour=12, remaining_unit_hours={"train": 120.0})
    problem = window_problem(
        snap, ws, {}, state, hours=12, step_hours=6, options=PlanOptions(integral=True)
    )
    later = (2 * 1.0 + 6 * 0.5 * 0.2) / (2 + 6 * 0.5)
    assert problem.ahead_usd_per_unit_hour == {"train": pytest.approx(later)}
    plan = solve(problem)
    assert plan.allocations.empty or plan.allocations.units.sum() == 0
    assert plan.objective_usd == pytest.approx(120.0 * later)
    # Behind its line (80 done at hour 24, the line at 120), it runs what is due.
    behind = RollingState(hour=24, remaining_unit_hours={"train": 160.0})
    plan = solve(
        window_problem(
            snap, ws, {}, behind, hours=12, step_hours=6, options=PlanOptions(integral=True)
        )
    )
    assert plan.allocations.units.sum() > 0


def _batch() -> dict[str, object]:
    # 240 unit-hours in 48 h, spot-first, all of it in one pool if need be.
    return {
        "name": "sweep",
        "class": "batch",
        "instance_types": ["g1"],
        "max_units": 8,
        "unit_hours": 240,
        "deadline_hours": 48,
        "max_zone_share": 1.0,
        "max_pool_share": 1.0,
    }


def _two_zones(b_spot: float, b_offered: bool) -> MarketSnapshot:
    """On-demand $1; zone a: spot $0.4, held now and half of the time; zone
    b: spot ``b_spot``, half of the time, offered now or not."""
    a = _pool("us-east-1a", spot=0.4, committed=None).model_copy(update={"available_share": 0.5})
    b = _pool("us-east-1b", spot=b_spot, committed=None).model_copy(
        update={"available_share": 0.5, "spot_available": b_offered}
    )
    return _market(a, b)


def test_a_batch_job_s_work_ahead_is_worth_the_spot_it_would_hold_later() -> None:
    """Later, a unit-hour runs on the cheapest spot then held: here zone b's
    $0.1 half of the time, zone a's $0.4 half of what is left, on-demand the
    rest: 0.5 x 0.1 + 0.25 x 0.4 + 0.25 x 1 = $0.40, counting zone b though
    it offers no spot now (no hazard: a spot factor of 1). Without this value
    a job without a gang keeps to its line: the 30-day portfolio bench's
    research sweeps run every step at the line's pace, wherever spot is, and
    hindsight runs them in the hours a pool 2.2 times cheaper is held (seed 7:
    $2,469 against $1,342)."""
    ws = parse_workloads({"workloads": [_batch()]})
    ahead = RollingState(hour=12, remaining_unit_hours={"sweep": 120.0})  # the line: 60
    opts = PlanOptions(integral=True)
    problem = window_problem(
        _two_zones(0.1, b_offered=False), ws, {}, ahead, hours=12, step_hours=6, options=opts
    )
    later = 0.5 * 0.1 + 0.25 * 0.4 + 0.25 * 1.0
    assert problem.ahead_usd_per_unit_hour == {"sweep": pytest.approx(later)}
    # Ahead of its line, with zone a's $0.4 no cheaper than later: it waits.
    plan = solve(problem)
    assert plan.allocations.empty or plan.allocations.units.sum() == 0
    # Zone b offered now at $0.1: it runs ahead there, at full size.
    problem = window_problem(
        _two_zones(0.1, b_offered=True), ws, {}, ahead, hours=12, step_hours=6, options=opts
    )
    a = solve(problem).allocations
    first = a[a.hour_start < 6]
    assert set(first.pool_key) == {"aws/us-east-1/us-east-1b/g1"}
    assert set(first.groupby("hour_start").units.sum().round(6)) == {8.0}
