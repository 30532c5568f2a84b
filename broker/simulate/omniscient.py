"""The hindsight optimum: what a policy that knew the whole trace would pay.

Owns: ``omniscient_deadline`` (exact dynamic programme over ticks x progress
for one deadline window) and ``omniscient_fleet`` (the fleet setting's
hindsight ILP, built and solved in ``broker.planning.optimizer.fleet_ilp`` because PuLP
lives only there).

Must not: be used as a policy's input. Its only job is a lower bound and a
yardstick (gap-closure, spot hours, cost / omniscient).

Deadline DP
-----------
The engine's rules (``broker.simulate.deadline``) on its integer grid: tick
``a`` quanta, changeover ``b``, work ``P``, ``n`` ticks. State at a tick
boundary: progress ``p`` (0..P) and what is held: idle, spot with ``r``
quanta of changeover left, or on-demand with ``r`` left (``r`` in
``{b - a, b - 2a, ..., 0}``). Over tick ``i`` with availability ``h_i``:

- idle: from any state, same ``p``, free (a revoked spot instance is idle);
- spot (only if ``h_i``): continue from spot ``r`` -> ``r' = max(r - a, 0)``,
  ``p += a - min(r, a)``; or start fresh from idle / on-demand with ``r = b``;
- on-demand: continue from on-demand ``r``, or start fresh from idle / spot;

a tick held costs ``tick x price`` of its tier; ``p`` is capped at ``P`` (the
job is done; it then idles for free). Cost-to-reach is minimised forward over
ticks; the answer is the cheapest state with ``p = P`` after ``n`` ticks
(infinite: no schedule meets the deadline). Only progress in
``[P - (n - i) a, i a]`` can still finish on time, so each tick works on that
band. Backpointers give the schedule, which is replayed through the engine so
the optimum is also a legal run of the same simulator.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from broker.simulate.deadline import (
    DeadlineOutcome,
    DeadlineSetting,
    DeadlineWindow,
    Grid,
    Scripted,
    simulate_deadline,
)
from policies.online.deadline import Mode

if TYPE_CHECKING:
    from broker.planning.optimizer.fleet_ilp import FleetOptimum

__all__ = ["OmniscientDeadline", "omniscient_deadline", "omniscient_fleet"]

FloatArray = npt.NDArray[np.float64]
_INF = np.inf


@dataclass(frozen=True)
class OmniscientDeadline:
    """The optimum's cost and the engine's replay of its schedule."""

    cost_usd: float
    outcome: DeadlineOutcome


@dataclass(frozen=True)
class _Moves:
    """The state space of one window: ``m`` changeover values, gains, prices."""

    m: int
    a: int
    b: int
    P: int
    fresh: int  # index into rs of a fresh start after one tick
    r_next: tuple[int, ...]
    gain_cont: tuple[int, ...]
    gain_fresh: int
    c_spot: float
    c_od: float

    @classmethod
    def of(cls, g: Grid, c_spot: float, c_od: float) -> _Moves:
        rs: list[int] = []
        r = g.changeover_q
        while True:  # changeover left after 1, 2, ... ticks of a fresh start
            r = max(r - g.tick_q, 0)
            rs.append(r)
            if r == 0:
                break
        a = g.tick_q
        return cls(
            m=len(rs),
            a=a,
            b=g.changeover_q,
            P=g.work_q,
            fresh=rs.index(max(g.changeover_q - a, 0)),
            r_next=tuple(rs.index(max(x - a, 0)) for x in rs),
            gain_cont=tuple(a - min(x, a) for x in rs),
            gain_fresh=a - min(g.changeover_q, a),
            c_spot=c_spot,
            c_od=c_od,
        )

    def spot(self, j: int) -> int:
        return 1 + j

    def od(self, j: int) -> int:
        return 1 + self.m + j


def _relax(
    new_row: FloatArray, src_row: FloatArray, gain: int, add: float, lo2: int, hi2: int, cap: int
) -> None:
    """``new[min(p + gain, cap)] <- min(new, src[p] + add)`` for targets in
    ``[lo2, hi2]``, in place."""
    t0 = max(lo2, gain)
    t1 = hi2 if gain == 0 else min(hi2, cap - 1)
    if t1 >= t0:
        seg = new_row[t0 : t1 + 1]
        np.minimum(seg, src_row[t0 - gain : t1 - gain + 1] + add, out=seg)
    if gain and hi2 == cap:
        new_row[cap] = min(new_row[cap], float(src_row[cap - gain :].min()) + add)


def omniscient_deadline(setting: DeadlineSetting, window: DeadlineWindow) -> OmniscientDeadline:
    """Exact hindsight optimum of one window (see the module docstring)."""
    g = Grid.of(setting, window)
    tick_h = window.tick_s / 3600.0
    mv = _Moves.of(g, tick_h * setting.spot_usd_per_hour, tick_h * setting.on_demand_usd_per_hour)
    a, P, n, m = mv.a, mv.P, g.ticks, mv.m
    cost = np.full((1 + 2 * m, P + 1), _INF)
    cost[0, 0] = 0.0
    history: list[tuple[int, FloatArray]] = []  # (lo, cost[:, lo:hi + 1]) per boundary
    held = window.held
    for i in range(n):
        lo, hi = max(0, P - (n - i) * a), min(P, i * a)
        history.append((lo, cost[:, lo : hi + 1].copy()))
        lo2, hi2 = max(0, P - (n - i - 1) * a), min(P, (i + 1) * a)
        new = np.full_like(cost, _INF)
        if hi2 >= lo2:
            new[0, lo2 : hi2 + 1] = cost[:, lo2 : hi2 + 1].min(axis=0)
        spot_rows, od_rows = cost[1 : 1 + m], cost[1 + m :]
        fresh_od = np.minimum(cost[0], spot_rows.min(axis=0))
        _relax(new[mv.od(mv.fresh)], fresh_od, mv.gain_fresh, mv.c_od, lo2, hi2, P)
        for j in range(m):
            _relax(new[mv.od(mv.r_next[j])], od_rows[j], mv.gain_cont[j], mv.c_od, lo2, hi2, P)
        if held[i]:
            fresh_spot = np.minimum(cost[0], od_rows.min(axis=0))
            _relax(new[mv.spot(mv.fresh)], fresh_spot, mv.gain_fresh, mv.c_spot, lo2, hi2, P)
            for j in range(m):
                _relax(
                    new[mv.spot(mv.r_next[j])],
                    spot_rows[j],
                    mv.gain_cont[j],
                    mv.c_spot,
                    lo2,
                    hi2,
                    P,
                )
        cost = new
    final = int(np.argmin(cost[:, P]))
    best = float(cost[final, P])
    if np.isfinite(best):
        modes = _backtrack(history, mv, held, final, best)
    else:  # no schedule meets the deadline: report the all-on-demand run (a miss)
        modes = [int(Mode.ON_DEMAND)] * n
    outcome = simulate_deadline(setting, window, Scripted("omniscient", modes), record=True)
    return OmniscientDeadline(cost_usd=best, outcome=outcome)


def _value(history: list[tuple[int, FloatArray]], i: int, state: int, p: int) -> float:
    lo, block = history[i]
    k = p - lo
    return float(block[state, k]) if 0 <= k < block.shape[1] else _INF


def _backtrack(
    history: list[tuple[int, FloatArray]],
    mv: _Moves,
    held: npt.NDArray[np.bool_],
    state: int,
    value: float,
) -> list[int]:
    """Modes per tick of an optimal path ending in ``state`` at progress ``P``.

    Walks back from the last boundary, at each tick taking a predecessor whose
    cost plus the tick's price equals the value reached (spot first)."""
    n, m, P = len(history), mv.m, mv.P
    modes = [int(Mode.IDLE)] * n
    p = P
    tol = 1e-9 * max(1.0, abs(value))
    for i in range(n - 1, -1, -1):
        cands: list[tuple[int, int, float]] = []  # (prev state, prev progress, price)
        if state == 0:
            cands = [(s, p, 0.0) for s in range(1 + 2 * m)]
        else:
            spot = state <= m
            j_to = state - 1 if spot else state - 1 - m
            price = mv.c_spot if spot else mv.c_od
            same = [mv.spot(j) if spot else mv.od(j) for j in range(m) if mv.r_next[j] == j_to]
            gains = {s: mv.gain_cont[(s - 1) % m] for s in same}
            if j_to == mv.fresh:
                other = [0] + [mv.od(j) if spot else mv.spot(j) for j in range(m)]
                gains.update({s: mv.gain_fresh for s in other})
            for s, gain in gains.items():
                sources = range(P - gain, P + 1) if (p == P and gain) else [p - gain]
                cands += [(s, q, price) for q in sources if q >= 0]
        for s, q, price in cands:
            if abs(_value(history, i, s, q) + price - value) <= tol:
                modes[i] = 0 if state == 0 else (1 if state <= m else 2)
                state, p, value = s, q, value - price
                break
        else:  # pragma: no cover - the forward pass guarantees a predecessor
            raise AssertionError(f"omniscient backtrack lost the path at tick {i}")
    del held
    return modes


def omniscient_fleet(
    held: npt.NDArray[np.bool_],
    replicas: int,
    spot_usd_per_hour: Sequence[float],
    on_demand_usd_per_hour: float,
    tick_s: float,
    cold_start_s: float,
) -> FleetOptimum:
    """The fleet setting's hindsight optimum: the ILP of
    ``broker.planning.optimizer.fleet_ilp`` (PuLP lives only under broker/planning/optimizer)."""
    from broker.planning.optimizer.fleet_ilp import solve_fleet_ilp

    return solve_fleet_ilp(
        held, replicas, spot_usd_per_hour, on_demand_usd_per_hour, tick_s, cold_start_s
    )
