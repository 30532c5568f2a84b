"""Wait vs run now, by hand: reserved A100 now vs spot
H100 3x faster at half the price in 2 h."""

from __future__ import annotations

import pytest

from policies.waiting import RunOption, decide
from policies.workloads.classes import BUILTIN_CLASS_DEFAULTS, WorkloadClass

P = 20.0  # $/h of the reserved A100s
TRAINING_VOT = BUILTIN_CLASS_DEFAULTS[WorkloadClass.TRAINING].value_of_time_usd_per_hour


def _options(t_hours: float) -> list[RunOption]:
    now = RunOption("p4d.24xlarge committed", 0.0, t_hours, P * t_hours)
    later = RunOption("p5.48xlarge spot", 2.0, t_hours / 3, P / 2 * t_hours / 3)
    return [now, later]


def _threshold(vot: float) -> float:
    """T* = 2V / (5P/6 + 2V/3): where P T (5/6) = V (2 - 2T/3)."""
    return 2 * vot / (5 * P / 6 + 2 * vot / 3)


@pytest.mark.parametrize("t", [3.0 + 1e-3, 3.25, 4.0, 8.0, 100.0])
def test_a_deadline_critical_job_waits_when_the_a100_run_exceeds_3_h(t: float) -> None:
    v = decide(_options(t), value_of_time_usd_per_hour=1e9)
    assert v.waits and v.chosen.label == "p5.48xlarge spot"


@pytest.mark.parametrize("t", [0.5, 1.0, 2.0, 2.75, 3.0 - 1e-3])
def test_a_deadline_critical_job_runs_now_when_the_a100_run_is_under_3_h(t: float) -> None:
    v = decide(_options(t), value_of_time_usd_per_hour=1e9)
    assert not v.waits and v.chosen.label == "p4d.24xlarge committed"


def test_the_training_default_flips_at_the_hand_computed_threshold() -> None:
    t_star = _threshold(TRAINING_VOT)
    assert 2.9 < t_star < 3.0  # a finite value of time: the saving buys a little delay
    assert not decide(_options(t_star - 1e-3), value_of_time_usd_per_hour=TRAINING_VOT).waits
    assert decide(_options(t_star + 1e-3), value_of_time_usd_per_hour=TRAINING_VOT).waits
    # 2.75 h and 3.25 h are on the sides the issue states, at the class default too.
    assert not decide(_options(2.75), value_of_time_usd_per_hour=TRAINING_VOT).waits
    assert decide(_options(3.25), value_of_time_usd_per_hour=TRAINING_VOT).waits


def test_the_sentence_says_how_long_for_what_and_what_it_buys() -> None:
    v = decide(_options(6.0), value_of_time_usd_per_hour=TRAINING_VOT)
    # 2 + 6/3 = 4 h against 6 h; $20 against $120.
    assert v.sentence() == (
        "waits 2 h for p5.48xlarge spot: finishes 2 h earlier at 17 % of the cost "
        "than p4d.24xlarge committed now"
    )
    v = decide(_options(2.0), value_of_time_usd_per_hour=TRAINING_VOT)
    assert v.sentence().startswith(
        "runs now on p4d.24xlarge committed: waiting 2 h for p5.48xlarge spot "
        "finishes 0.667 h later at 17 % of the cost: not worth it at $1,000"
    )


def test_research_waits_for_any_saving_its_deadline_allows() -> None:
    vot = BUILTIN_CLASS_DEFAULTS[WorkloadClass.BATCH].value_of_time_usd_per_hour
    assert vot == 0.0
    assert decide(_options(1.0), value_of_time_usd_per_hour=vot).waits  # 2.33 h vs 1 h, cheaper
    # ... unless the wait misses the deadline: 2 + 1/3 h > 2 h.
    v = decide(_options(1.0), value_of_time_usd_per_hour=vot, deadline_hours=2.0)
    assert not v.waits and "misses the 2 h deadline" in v.sentence()


def test_when_nothing_that_starts_now_is_in_time_the_job_waits() -> None:
    v = decide(_options(6.0), value_of_time_usd_per_hour=0.0, deadline_hours=5.0)
    assert v.waits and v.now is not None and v.now.finish_hours == 6.0


def test_when_nothing_meets_the_deadline_the_earliest_finish_is_kept() -> None:
    v = decide(_options(6.0), value_of_time_usd_per_hour=0.0, deadline_hours=1.0)
    assert v.waits and v.chosen.finish_hours == 4.0


def test_a_tie_runs_now() -> None:
    a = RunOption("a", 0.0, 2.0, 10.0)
    b = RunOption("b", 1.0, 1.0, 10.0)
    assert not decide([a, b], value_of_time_usd_per_hour=5.0).waits


def test_bad_numbers_are_refused() -> None:
    with pytest.raises(ValueError, match="run_hours"):
        RunOption("x", 0.0, float("nan"), 1.0)
    with pytest.raises(ValueError, match="value of time"):
        decide(_options(1.0), value_of_time_usd_per_hour=-1.0)
    with pytest.raises(ValueError, match="at least one"):
        decide([], value_of_time_usd_per_hour=0.0)
