"""Deadline-job decision rules (policies.online.deadline): the published rules
applied one tick at a time, and exact schedules on a small hand-made trace.

The fixed trace (derivations in the comments): tick 0.1 h, changeover d = 0.2 h
(2 ticks), C = 1 h (10 ticks of progress), deadline R = 2 h (20 ticks), k = 3;
spot is held in ticks 0-3, lost in ticks 4-11, back in ticks 12-19.
"""

from __future__ import annotations

import pytest

from broker.simulate.deadline import (
    DeadlineSetting,
    DeadlineWindow,
    held_array,
    simulate_deadline,
)
from broker.simulate.omniscient import omniscient_deadline
from markets.errors import InputError
from policies.online.deadline import (
    Greedy,
    JobSpec,
    Mode,
    PoolHistory,
    TickView,
    UniformProgress,
    last_net,
    last_safe_moment,
)
from policies.online.registry import deadline_policy

SETTING = DeadlineSetting(compute_hours=1.0, changeover_hours=0.2, price_ratio=3.0)
TRACE = [True] * 4 + [False] * 8 + [True] * 8
JOB = JobSpec(compute_hours=1.0, deadline_hours=2.0, changeover_hours=0.2, tick_hours=0.1)


def _window(held: list[bool]) -> DeadlineWindow:
    return DeadlineWindow("fixed", 0, 360, 0.5, held_array(held))


def _schedule(modes: tuple[int, ...]) -> str:
    return "".join(".SO"[m] for m in modes)


def test_on_demand_runs_changeover_then_ten_ticks() -> None:
    out = simulate_deadline(SETTING, _window(TRACE), deadline_policy("on_demand"), record=True)
    # 2 ticks of changeover + 10 of progress, done at 1.2 h, 1.2 h x $3
    assert _schedule(out.schedule) == "O" * 12
    assert out.cost_usd == pytest.approx(3.6)
    assert out.finish_hours == pytest.approx(1.2)
    assert out.overhead_hours == pytest.approx(0.2)


def test_greedy_waits_then_commits_at_the_last_safe_moment() -> None:
    out = simulate_deadline(SETTING, _window(TRACE), deadline_policy("greedy"), record=True)
    # ticks 0-3 spot (2 changeover, 0.2 h progress); revoked at tick 4 and idle
    # while ceil((C(t) + 2d) / tick) = 12 < remaining ticks (16, 15, 14, 13);
    # at tick 8, 12 >= 12: on-demand to the end (2 changeover + 8 progress),
    # done at 1.8 h, blind to the spot that returned at tick 12.
    assert _schedule(out.schedule) == "SSSS....OOOOOOOOOO"
    assert out.spot_hours == pytest.approx(0.4)
    assert out.on_demand_hours == pytest.approx(1.0)
    assert out.cost_usd == pytest.approx(0.4 + 3.0)
    assert out.finished and out.finish_hours == pytest.approx(1.8)
    assert out.preemptions == 1


def test_uniform_progress_follows_the_published_rules() -> None:
    out = simulate_deadline(
        SETTING, _window(TRACE), deadline_policy("uniform_progress"), record=True
    )
    # ticks 0-3 spot -> cp 0.2 = ep(0.4): tick 4 idle (rule 7); tick 5 cp 0.2 <
    # ep(0.5) = 0.25: on-demand (rule 6); ticks 6-13 stay while cp < ep(t + 0.4)
    # (rule 4: at tick 13 cp 0.8 < ep(1.7) = 0.85); tick 14 cp 0.9 = ep(1.8):
    # spot is back (rule 5), 2 changeover ticks, tick 16 finishes at 1.7 h.
    assert _schedule(out.schedule) == "SSSS.OOOOOOOOOSSS"
    assert out.spot_hours == pytest.approx(0.7)
    assert out.on_demand_hours == pytest.approx(0.9)
    assert out.cost_usd == pytest.approx(0.7 + 2.7)
    assert out.finish_hours == pytest.approx(1.7)
    assert out.changeovers == 3


def test_omniscient_uses_both_spot_spells_and_a_short_on_demand_run() -> None:
    best = omniscient_deadline(SETTING, _window(TRACE))
    # spot 0-3 (0.2 h of work), on-demand for 4 ticks in the outage (0.2 h),
    # spot 12-19 (6 ticks of work): exactly C at the deadline;
    # $0.4 + 0.4 h x $3 + $0.8 = $2.4 and nothing cheaper finishes.
    assert best.cost_usd == pytest.approx(2.4)
    assert best.outcome.cost_usd == pytest.approx(2.4)
    assert best.outcome.finished
    assert best.outcome.spot_hours == pytest.approx(1.2)
    assert best.outcome.on_demand_hours == pytest.approx(0.4)


def test_last_safe_moment_is_on_the_tick_grid() -> None:
    # R(t) = 1.2 h = 12 ticks; C(t) + 2d = 1.2 h: 12 >= 12 -> now
    view = TickView(elapsed_hours=0.8, progress_hours=0.2, mode=Mode.IDLE, spot_available=False)
    assert last_safe_moment(JOB, view)
    earlier = TickView(elapsed_hours=0.7, progress_hours=0.2, mode=Mode.IDLE, spot_available=False)
    assert not last_safe_moment(JOB, earlier)


@pytest.mark.parametrize(
    ("view", "expected"),
    [
        pytest.param(TickView(0.5, 1.0, Mode.SPOT, True), Mode.IDLE, id="done-idles"),
        pytest.param(
            TickView(1.4, 0.0, Mode.IDLE, True), Mode.ON_DEMAND, id="safety-net-beats-spot"
        ),
        pytest.param(
            TickView(0.5, 0.1, Mode.SPOT, True), Mode.SPOT, id="stays-on-spot-when-behind"
        ),
        pytest.param(TickView(0.5, 0.3, Mode.ON_DEMAND, True), Mode.ON_DEMAND, id="hysteresis"),
        pytest.param(
            TickView(0.5, 0.46, Mode.ON_DEMAND, True), Mode.SPOT, id="leaves-od-when-ahead"
        ),
        pytest.param(TickView(0.5, 0.2, Mode.IDLE, False), Mode.ON_DEMAND, id="behind-buys-od"),
        pytest.param(TickView(0.5, 0.25, Mode.IDLE, False), Mode.IDLE, id="on-pace-waits"),
        # ahead by more than 2d (0.46 >= ep(0.9) = 0.45) but no spot: on-demand
        # is left only for spot, never for idle (rule 4)
        pytest.param(
            TickView(0.5, 0.46, Mode.ON_DEMAND, False), Mode.ON_DEMAND, id="od-never-idles"
        ),
        pytest.param(TickView(0.5, 0.9, Mode.ON_DEMAND, False), Mode.ON_DEMAND, id="od-far-ahead"),
    ],
)
def test_uniform_progress_rule_order(view: TickView, expected: Mode) -> None:
    mode, _ = UniformProgress().decide(JOB, view, None)
    assert mode == expected


def test_uniform_progress_on_demand_never_goes_idle_before_completion() -> None:
    # no spot at all: tick 0 on the line (0 = ep(0)) idles; tick 1 is behind
    # (0 < ep(0.1) = 0.05): on-demand, 2 changeover ticks + 10 of progress.
    # From tick 10 it is 2d ahead (cp 0.7 >= ep(1.0 + 0.4) = 0.7) with no spot:
    # the old variant went idle there and paid a second changeover later; the
    # published rule stays on on-demand to completion.
    out = simulate_deadline(
        SETTING, _window([False] * 20), deadline_policy("uniform_progress"), record=True
    )
    assert _schedule(out.schedule) == "." + "O" * 12
    assert out.changeovers == 1
    assert out.finish_hours == pytest.approx(1.3)
    assert out.cost_usd == pytest.approx(1.2 * 3.0)


def test_uniform_progress_safety_net_fires_on_the_tick_the_formula_gives() -> None:
    # spot in ticks 0-9: 2 changeover + 8 progress, cp 0.8 at t = 1.0, well
    # ahead of ep; then no spot: idle (rule 2) while cp >= ep(t) = t / 2.
    # Rule 5 with c = 0.2: ceil((0.2 + 0.4) / 0.1) * 0.1 = 0.6 >= T = floor((2 - t)
    # / 0.1) * 0.1 first at t = 1.4 (T = 0.6; at 1.3, T = 0.7): tick 14, before
    # the line (cp 0.8 < ep(t) only from t = 1.7) would have bought on-demand.
    held = [True] * 10 + [False] * 10
    out = simulate_deadline(
        SETTING, _window(held), deadline_policy("uniform_progress"), record=True
    )
    assert _schedule(out.schedule) == "S" * 10 + "...." + "OOOO"
    assert out.finished and out.finish_hours == pytest.approx(1.8)
    idle_at_13 = TickView(1.3, 0.8, Mode.IDLE, False)
    assert not last_safe_moment(JOB, idle_at_13)
    assert last_safe_moment(JOB, TickView(1.4, 0.8, Mode.IDLE, False))


def test_uniform_progress_last_net_moves_an_unpaid_spot_to_on_demand_on_its_tick() -> None:
    # cp 0.7, c = 0.3: rule 6 when ceil((0.3 + 0.2) / 0.1) * 0.1 = 0.5 >= T, i.e.
    # from t = 1.5 (T = 0.5; at 1.4, T = 0.6). On spot with 0.1 h of changeover
    # still to pay: spot at 1.4, on-demand at 1.5; with it paid, spot at both.
    rule = UniformProgress()
    at_14 = TickView(1.4, 0.7, Mode.SPOT, True, changeover_left_hours=0.1)
    at_15 = TickView(1.5, 0.7, Mode.SPOT, True, changeover_left_hours=0.1)
    assert not last_net(JOB, at_14) and last_net(JOB, at_15)
    assert rule.decide(JOB, at_14, None)[0] == Mode.SPOT
    assert rule.decide(JOB, at_15, None)[0] == Mode.ON_DEMAND
    paid = TickView(1.5, 0.7, Mode.SPOT, True, changeover_left_hours=0.0)
    assert rule.decide(JOB, paid, None)[0] == Mode.SPOT
    # idle at the last net: on-demand, even with spot on offer
    assert rule.decide(JOB, TickView(1.5, 0.7, Mode.IDLE, True), None)[0] == Mode.ON_DEMAND


def test_greedy_stays_on_demand_once_committed_even_when_spot_returns() -> None:
    # tick 8 of the fixed trace (see the schedule test): committed; at tick 12
    # spot is back and ahead of any line, greedy stays on on-demand.
    back = TickView(1.2, 0.4, Mode.ON_DEMAND, True)
    assert Greedy().decide(JOB, back, True) == (Mode.ON_DEMAND, True)
    assert Greedy().decide(JOB, back, False) == (Mode.ON_DEMAND, True)


def test_greedy_keeps_spot_and_commits_only_off_spot() -> None:
    late = TickView(1.5, 0.3, Mode.SPOT, True)
    assert Greedy().decide(JOB, late, False) == (Mode.SPOT, False)
    late_idle = TickView(1.5, 0.3, Mode.IDLE, False)
    assert Greedy().decide(JOB, late_idle, False) == (Mode.ON_DEMAND, True)


def test_pool_history_counts_complete_spells_only() -> None:
    h = PoolHistory.from_held([True, True, False, True, True, True, False, False, True], 0.5)
    assert h is not None
    assert h.up_spells_hours == (1.5,)  # the first and last spells are cut by the ends
    assert h.down_spells_hours == (0.5, 1.0)
    assert h.held_share == pytest.approx(6 / 9)
    assert PoolHistory.from_held([], 0.5) is None


def test_unknown_policy_names_the_option() -> None:
    with pytest.raises(InputError) as e:
        deadline_policy("optimal")
    assert "--policy" in str(e.value) and "uniform_progress" in str(e.value)
