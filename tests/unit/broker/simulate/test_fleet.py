"""The serving-fleet engine, its baselines and the hindsight ILP.

A small fixed trace gives each baseline's exact run (derived by hand in the
comments); on random traces the ILP equals one replica's shortest path times
N, money is conserved, and the optimum is a lower bound for every rule once
its shortfall is priced at on-demand (for rules that are always available, a
plain lower bound).

The fixed trace: ticks of 300 s, cold start 180 s, notice 120 s, N = 2,
on-demand $1/h, spot $1/3 per hour; zone A has spot in ticks 0-1 and 4-5,
zone B in all six. Measurement runs from 180 s to 1800 s (1620 s).
"""

from __future__ import annotations

import numpy as np
import pytest

from broker.planning.optimizer.fleet_ilp import fleet_shortest_path, solve_fleet_ilp
from broker.simulate.fleet import FleetSetting, FleetWindow, simulate_fleet, spot_prices
from policies.online.fleet import spread
from policies.online.registry import FLEET_POLICIES, fleet_policy
from tests.paths import SHARED_DATA

SETTING = FleetSetting(replicas=2, cold_start_s=180, notice_s=120, price_ratio=3.0)
HELD = np.array([[1, 1, 0, 0, 1, 1], [1, 1, 1, 1, 1, 1]], dtype=bool)
MEASURED_H = 1620 / 3600
DATA = SHARED_DATA


def _window(held: np.ndarray, tick_s: int = 300) -> FleetWindow:
    return FleetWindow(
        group="g",
        zones=tuple(f"us-west-2{c}" for c in "abcdefgh"[: held.shape[0]]),
        tick_s=tick_s,
        held=held,
        past=np.zeros((held.shape[0], 0), dtype=bool),
    )


def test_on_demand_is_always_ready_at_full_price() -> None:
    out = simulate_fleet(SETTING, _window(HELD), fleet_policy("on_demand"))
    assert out.availability == 1.0
    assert out.cost_usd == pytest.approx(2 * MEASURED_H)  # 2 x 1620 s x $1/h


def test_even_spread_waits_for_its_zone() -> None:
    out = simulate_fleet(SETTING, _window(HELD), fleet_policy("even_spread"))
    # one replica per zone, ready at 180 s; A's is revoked at 600 s and
    # relaunched at 1200 s (ready 1380 s): 2 ready over 180-600 and 1380-1800
    assert out.availability == pytest.approx(840 / 1620)
    assert out.unserved_replica_hours == pytest.approx(780 / 3600)
    # billed spot seconds: A 420 + 600, B 1620 -> 2640 s at $1/3 per hour
    assert out.cost_usd == pytest.approx(2640 / 3600 / 3)
    assert out.revocations == 1 and out.launches == 3


def test_static_mix_moves_spot_on_the_notice_without_fallback() -> None:
    out = simulate_fleet(SETTING, _window(HELD), fleet_policy("static_mix"))
    # base 1 on-demand + round(20 % of 1) = 1 on-demand, 1 spot in A (cheapest
    # ties by zone order); the notice at 480 s moves it to B (ready 660 s): one
    # replica short over 600-660
    assert out.availability == pytest.approx(1560 / 1620)
    assert out.unserved_replica_hours == pytest.approx(60 / 3600)
    # on-demand 1620 s x $1/h; spot A 180-600 (420 s) + B 480-1800 (1320 s)
    assert out.cost_usd == pytest.approx(1620 / 3600 + 1740 / 3600 / 3)


def test_spothedge_overprovisions_and_falls_back_on_demand() -> None:
    out = simulate_fleet(SETTING, _window(HELD), fleet_policy("spothedge"))
    # N + 2 = 4 spot: the first two in the cheapest zones not in use (A, B:
    # equal prices, zone order), the rest in the cheapest active (A, A); on-
    # demand min(2, 4 - 0 ready) = 2, gone at 300 s when 4 are ready. A's
    # notice at 480 s: A preempted, 1 active left -> both active again; the 3
    # replacements cannot go to A (its launch would fail) so go to B (ready
    # 660 s), and on-demand is min(2, 4 - 1 ready) = 2 again (ready 660 s,
    # gone at 900 s). Over 600-660 s only B's first replica is ready: 1 short.
    assert out.availability == pytest.approx(1560 / 1620)
    assert out.unserved_replica_hours == pytest.approx(60 / 3600)
    od = (2 * 120 + 2 * 420) / 3600  # 180-300 s and 480-900 s, two each
    spot = (3 * 420 + 1620 + 3 * 1320) / 3600 / 3  # A 180-600 s; B 180- and 480-1800 s
    assert out.cost_usd == pytest.approx(od + spot)
    assert out.on_demand_usd == pytest.approx(od)


def test_omniscient_keeps_both_replicas_in_the_zone_that_never_fails() -> None:
    args = (HELD, 2, spot_prices(SETTING, _window(HELD)), 1.0, 300, 180)
    ilp = solve_fleet_ilp(*args)
    assert ilp.cost_usd == pytest.approx(2 * MEASURED_H / 3)
    assert fleet_shortest_path(*args) == pytest.approx(ilp.cost_usd)
    assert ilp.spot_hours == pytest.approx(2 * MEASURED_H)


def test_spread_keeps_placements_and_balances() -> None:
    assert spread(5, [3, 0, 0], [True, True, True], [0, 1, 2]) == [3, 1, 1]
    assert spread(2, [3, 1, 0], [True, True, False], [0, 1, 2]) == [1, 1, 0]
    assert spread(4, [0, 0], [False, False], [0, 1]) == [0, 0]


def _random_held(rng: np.random.Generator, zones: int, ticks: int) -> np.ndarray:
    rows = []
    for _ in range(zones):
        row: list[bool] = []
        state = bool(rng.random() < 0.7)
        while len(row) < ticks:
            row += [state] * int(rng.geometric(0.08 if state else 0.3))
            state = not state
        rows.append(row[:ticks])
    return np.array(rows, dtype=bool)


@pytest.mark.parametrize("seed", range(8))
def test_ilp_is_a_lower_bound_and_equals_the_shortest_path(seed: int) -> None:
    rng = np.random.default_rng(seed)
    held = _random_held(rng, int(rng.integers(2, 4)), 60)
    window = _window(held, tick_s=int(rng.choice([195, 300, 600])))
    setting = FleetSetting(replicas=int(rng.integers(2, 6)))
    prices = spot_prices(setting, window)
    args = (held, setting.replicas, prices, 1.0, window.tick_s, setting.cold_start_s)
    best = solve_fleet_ilp(*args)
    assert best.cost_usd == pytest.approx(fleet_shortest_path(*args), rel=1e-7)
    for name in FLEET_POLICIES:
        out = simulate_fleet(setting, window, fleet_policy(name))
        assert out.spot_usd + out.on_demand_usd == pytest.approx(out.cost_usd)
        assert out.cost_usd + out.cover_usd >= best.cost_usd - 1e-7, name
        if out.availability == 1.0:
            assert out.cost_usd >= best.cost_usd - 1e-7, name
        assert 0.0 <= out.availability <= 1.0


@pytest.mark.slow
def test_fleet_on_the_development_traces() -> None:
    from broker.bench.fleet import evaluate_window, sample_windows, summarize
    from broker.cli.bench import traces_from_spot_traces
    from markets.files.traces import load_spot_traces

    root = DATA / "spot-availability-traces"
    if not root.is_dir():
        pytest.skip(f"development traces not found at {root}")
    traces = traces_from_spot_traces(load_spot_traces(root))
    wins = sample_windows(traces, SETTING, 1, seed=5)
    assert len({w.group for w in wins}) >= 5
    results = [evaluate_window(FleetSetting(replicas=4), w) for w in wins]
    for r in results:
        for name, out in r.outcomes.items():
            assert out.cost_usd + out.cover_usd >= r.omniscient_usd - 1e-6, name
    pol = summarize(results)["policies"]
    assert pol["on_demand"]["cost_vs_on_demand"] == pytest.approx(1.0)
    # published shapes: even spread far from always available; SpotHedge close
    assert pol["even_spread"]["availability"] < 0.8
    assert pol["spothedge"]["availability"] > 0.97
