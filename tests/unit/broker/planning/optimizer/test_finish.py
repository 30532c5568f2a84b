"""The value of finishing sooner in the MILP
(``broker.planning.optimizer.finish``), on the fleet chapter's hand check: a
training job runs A100 on-demand now for ``T`` hours at ``$P/h``, or waits
2 h for H100 spot 3x faster at half the price. The MILP's periods are hours,
so a finish counts to the end of its hour: A100 finishes at ``ceil(T)``,
H100 at ``2 + ceil(T / 3)``."""

from __future__ import annotations

import pytest

from broker.planning.optimizer.finish import fastest_rate
from broker.planning.optimizer.solve import solve
from tests.unit.broker.planning.optimizer.test_waits import A, H, P, _problem


def _started_on(plan, pool: str) -> int | None:
    a = plan.allocations
    a = a[(a["workload"] == "ft") & (a["pool_key"] == pool) & (a["units"] > 0)]
    return None if a.empty else int(a["hour_start"].min())


@pytest.mark.parametrize(
    ("t", "vot", "runs_now"),
    [
        # deadline-critical ($1,000/h, the training default): time decides
        pytest.param(2.0, None, True, id="2h-a100-finishes-at-2-before-h100-at-3"),
        pytest.param(6.0, None, False, id="6h-a100-at-6-h100-at-4"),
        pytest.param(1.0, None, True, id="1h"),
        # $1/h: the saving of waiting ($20) buys the hour it costs
        pytest.param(2.0, 1.0, False, id="2h-cheap-time-waits"),
        # no value of time: the cheapest plan, as before
        pytest.param(2.0, 0.0, False, id="2h-no-value-waits"),
    ],
)
def test_a_job_runs_now_iff_its_finish_is_worth_more_than_the_saving(
    t: float, vot: float | None, runs_now: bool
) -> None:
    job = {} if vot is None else {"value_of_time_usd_per_hour": vot}
    problem, _ = _problem(t, **job)
    plan = solve(problem)
    assert plan.unmet_total() == pytest.approx(0.0, abs=1e-6)
    if runs_now:
        assert _started_on(plan, A) == 0 and _started_on(plan, H) is None
    else:
        assert _started_on(plan, A) is None and _started_on(plan, H) == 2
    if vot != 0.0:
        want = t if runs_now else 2 + -(-t // 3)
        assert plan.meta_number("finish_hour:ft") == pytest.approx(-(-want // 1))
    else:
        assert plan.meta_number("finish_hour:ft") is None  # nothing priced


def test_the_objective_holds_the_value_of_time_beside_the_dollars() -> None:
    problem, ws = _problem(2.0)
    plan = solve(problem)
    vot = ws.by_name("ft").value_of_time_usd_per_hour
    assert plan.meta_number("value_of_time_usd") == pytest.approx(vot * 2.0)
    # the rest of the objective is the dollars (and the launches' churn, $2 here)
    rest = plan.objective_usd - vot * 2.0
    assert plan.planned_cost_usd() <= rest <= plan.planned_cost_usd() + 0.2 * P
    assert plan.planned_cost_usd() == pytest.approx(2 * P)


def test_a_job_that_cannot_finish_in_the_horizon_is_charged_its_leftover_at_full_speed() -> None:
    # 3,200 unit-hours: more than the 24 h horizon of any gang here
    problem, ws = _problem(400.0, deadline_hours=200)
    w = ws.by_name("ft")
    rate = fastest_rate(problem, w)
    assert rate == pytest.approx(8 * 3.0)  # one H100 box of the 8-unit gang
    plan = solve(problem)
    a = plan.allocations
    done = float(
        (a["units"] * (a["hour_end"] - a["hour_start"]) * a["pool_key"].map({A: 1.0, H: 3.0})).sum()
    )
    assert plan.meta_number("finish_hour:ft") == pytest.approx(24 + (3200 - done) / rate, rel=1e-3)  # type: ignore[operator]
