"""The deadline tick engine and the hindsight optimum (broker.simulate).

Invariants on random and real traces: work and money conserved for every
policy; the omniscient DP is a lower bound on every window, equals an
exhaustive search on tiny windows, and its schedule replays to the same cost;
no policy but greedy misses a deadline. On the public V100 traces
(``tests.paths.SHARED_DATA``), Uniform Progress lies between greedy and the optimum and
holds more spot hours than greedy, as published.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from broker.bench.deadline import POLICIES, evaluate, sample_windows, summarize
from broker.bench.rules import deadline_policy
from broker.simulate import AvailabilityTrace, coarsen
from broker.simulate.deadline import (
    DeadlineSetting,
    DeadlineWindow,
    Scripted,
    held_array,
    on_demand_cost,
    simulate_deadline,
)
from broker.simulate.omniscient import omniscient_deadline
from policies.online.deadline import Mode
from tests.paths import SHARED_DATA

DATA = SHARED_DATA
TINY = DeadlineSetting(compute_hours=0.5, changeover_hours=0.2, price_ratio=3.0)


def _random_window(rng: np.random.Generator, ticks: int, tick_s: int = 360) -> DeadlineWindow:
    """Spells with geometric lengths: clustered like real availability."""
    held: list[bool] = []
    state = bool(rng.random() < 0.6)
    while len(held) < ticks:
        held += [state] * int(rng.geometric(0.25 if state else 0.35))
        state = not state
    past = held_array([bool(x) for x in rng.random(int(rng.integers(0, 200))) < 0.7])
    return DeadlineWindow("random", 0, tick_s, 0.6, held_array(held[:ticks]), past=past)


def _brute_force(setting: DeadlineSetting, window: DeadlineWindow) -> float:
    best = np.inf
    for modes in itertools.product((0, 1, 2), repeat=window.ticks):
        if any(m == 1 and not h for m, h in zip(modes, window.held, strict=True)):
            continue  # the cloud would refuse: the same run as asking for idle
        out = simulate_deadline(setting, window, Scripted("x", modes))
        if out.finished:
            best = min(best, out.cost_usd)
    return float(best)


@pytest.mark.parametrize("seed", range(6))
def test_dp_equals_exhaustive_search_on_tiny_windows(seed: int) -> None:
    rng = np.random.default_rng(seed)
    window = _random_window(rng, ticks=8)  # C = 5 ticks of work, d = 2 ticks
    best = omniscient_deadline(TINY, window)
    assert best.cost_usd == pytest.approx(_brute_force(TINY, window))
    if np.isfinite(best.cost_usd):
        assert best.outcome.cost_usd == pytest.approx(best.cost_usd)
        assert best.outcome.finished


@pytest.mark.parametrize("seed", range(20))
def test_invariants_on_random_windows(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    setting = DeadlineSetting(compute_hours=4.0, changeover_hours=0.2)
    window = _random_window(rng, ticks=int(rng.integers(45, 80)))  # f = 0.5-0.9
    best = omniscient_deadline(setting, window)
    best.outcome.check(setting)
    assert best.outcome.cost_usd == pytest.approx(best.cost_usd)
    for name in POLICIES:
        out = simulate_deadline(setting, window, deadline_policy(name))
        out.check(setting)  # progress + lost + overhead = held; money attributed
        assert out.cost_usd >= best.cost_usd - 1e-9, name
        if name != "greedy":
            assert out.finished, name
    assert simulate_deadline(setting, window, deadline_policy("on_demand")).cost_usd == (
        pytest.approx(on_demand_cost(setting, window))
    )


def test_revocation_forfeits_the_changeover_and_keeps_progress() -> None:
    setting = DeadlineSetting(compute_hours=1.0, changeover_hours=0.2)
    held = held_array([True, True, True, False, True, True, True, True, True, True] * 3)
    window = DeadlineWindow("w", 0, 360, 0.5, held)
    out = simulate_deadline(setting, window, Scripted("spot", [int(Mode.SPOT)] * 30), record=True)
    # ticks 0-1 changeover, 2 work; revoked at 3 (idle, unbilled); 4-5
    # changeover again, 6-9 work; revoked at 13; ...
    assert out.preemptions >= 1
    assert out.schedule[3] == int(Mode.IDLE)
    assert out.overhead_hours == pytest.approx(0.2 * out.changeovers)
    out.check(setting)


def test_refused_spot_request_is_idle_and_unbilled() -> None:
    window = DeadlineWindow("w", 0, 360, 0.5, held_array([False] * 20))
    out = simulate_deadline(TINY, window, Scripted("spot", [int(Mode.SPOT)] * 20))
    assert out.cost_usd == 0.0 and not out.finished and out.changeovers == 0


def test_coarsen_holds_a_tick_only_if_every_fine_tick_held() -> None:
    tr = AvailabilityTrace("t", "z", "g", 200, held_array([1, 1, 1, 1, 0, 1, 1, 1, 1, 1]))
    c = coarsen(tr, 600)
    assert c.tick_s == 600 and c.held.tolist() == [True, False, True]
    assert coarsen(tr, 100) is tr


def _data_traces() -> list[AvailabilityTrace]:
    from broker.cli.bench import traces_from_spot_traces
    from markets.files.traces import load_spot_traces

    root = DATA / "spot-availability-traces"
    if not root.is_dir():
        pytest.skip(f"development traces not found at {root}")
    return list(traces_from_spot_traces(load_spot_traces(root)))


@pytest.mark.slow
def test_development_traces_as_published() -> None:
    setting = DeadlineSetting()
    windows = sample_windows(_data_traces(), setting, 3, seed=11)
    assert len(windows) >= 30
    results = evaluate(setting, windows)
    for r in results:
        for name, out in r.outcomes.items():
            assert out.cost_usd >= r.omniscient_usd - 1e-9, (name, r.window.trace)
            if name != "greedy":
                assert out.finished, (name, r.window.trace, r.window.start_tick)
    pol = summarize(results)["policies"]
    up, greedy, omni = (
        pol[n]["mean_cost_vs_on_demand"] for n in ("uniform_progress", "greedy", "omniscient")
    )
    assert omni < up < greedy
    assert (
        pol["uniform_progress"]["spot_hours_vs_omniscient"]  # type: ignore[operator]
        > pol["greedy"]["spot_hours_vs_omniscient"]
    )
    assert pol["spotfolio"]["mean_cost_vs_on_demand"] < up
