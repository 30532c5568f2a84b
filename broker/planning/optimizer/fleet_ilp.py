"""The serving-fleet hindsight optimum as an ILP (PuLP + CBC), and the same
optimum by a shortest path to check it.

Owns: ``solve_fleet_ilp`` and ``fleet_shortest_path``. Inputs are plain arrays
(``broker.simulate.fleet`` builds them from a window), so this module knows
nothing of traces or rules. Must not: be an input to any online rule.

The model (time in ticks ``i = 0..T-1``, zones ``z``; ``w_i`` the measured
seconds of tick ``i``: ``tick - cold`` for the first, ``tick`` after; ``c`` the
cold start; ``h[z, i]`` spot can be held; ``p_z`` spot and ``p_o`` on-demand
$/h)::

    x[z, i] >= 0 int   spot replicas in zone z ready for all of tick i
    o[i]    >= 0 int   on-demand replicas ready for all of tick i
    n[z, i], m[i] >= 0 replicas newly ready at tick i (i >= 1)

    min  sum_i w_i (sum_z p_z x[z, i] + p_o o[i]) / 3600
         + sum_{i>=1} l_i (sum_z p_z n[z, i] + p_o m[i]) / 3600
    s.t. sum_z x[z, i] + o[i] >= N                  every tick: N ready
         x[z, i] = 0                   if not h[z, i] (no spot, or revoked)
         n[z, i] >= x[z, i] - x[z, i-1],  m[i] >= o[i] - o[i-1]
         n[z, i] = 0                   if not h[z, i-1] (the cold start runs in
                                        tick i-1: the request needs spot then)

``l_i`` is the billed part of a launch made exactly one cold start before tick
``i`` (``c``, less what falls before measurement starts). Knowing the future,
the optimum launches each replacement just in time and never holds a spare;
online rules can only act at tick starts and on notices, so any run they
make with ``N`` ready all the time costs at least this.

Replicas are interchangeable and no zone has a capacity limit, so the ILP is
``N`` copies of one replica's cheapest path through (tick, where) states:
``fleet_shortest_path`` computes that path by dynamic programming; the tests
hold the two equal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:  # a name only: PuLP itself is imported when an ILP is solved
    from broker.planning.optimizer.backend import LpVariable

__all__ = ["FleetOptimum", "fleet_shortest_path", "launch_seconds", "solve_fleet_ilp"]


@dataclass(frozen=True)
class FleetOptimum:
    """The hindsight optimum: cost, spot/on-demand replica-hours, how solved."""

    cost_usd: float
    spot_hours: float
    on_demand_hours: float
    status: str


def measured_seconds(ticks: int, tick_s: float, cold_s: float) -> npt.NDArray[np.float64]:
    w = np.full(ticks, float(tick_s))
    w[0] = tick_s - cold_s
    return w


def launch_seconds(i: int, tick_s: float, cold_s: float) -> float:
    """Billed seconds of a launch one cold start before tick ``i`` (``i >= 1``)."""
    start = i * tick_s
    return start - max(start - cold_s, cold_s)


def _check(
    held: npt.NDArray[np.bool_], spot_usd: Sequence[float], tick_s: float, cold_s: float
) -> None:
    if held.ndim != 2 or held.shape[0] != len(spot_usd):
        raise ValueError("held must be zones x ticks, one spot price per zone")
    if not 0 < cold_s <= tick_s:
        raise ValueError(f"cold start {cold_s} s must be within one tick ({tick_s} s)")


def solve_fleet_ilp(
    held: npt.NDArray[np.bool_],
    replicas: int,
    spot_usd_per_hour: Sequence[float],
    on_demand_usd_per_hour: float,
    tick_s: float,
    cold_start_s: float,
    *,
    time_limit_s: float = 60.0,
) -> FleetOptimum:
    """Build and solve the ILP of the module docstring with CBC."""
    import pulp

    # lazy like pulp itself: the module imports PuLP
    from broker.planning.optimizer.children import solver_children

    _check(held, spot_usd_per_hour, tick_s, cold_start_s)
    n_z, ticks = held.shape
    w = measured_seconds(ticks, tick_s, cold_start_s)
    prob = pulp.LpProblem("fleet_hindsight", pulp.LpMinimize)
    x: dict[tuple[int, int], LpVariable] = {}
    new: dict[tuple[int, int], LpVariable] = {}
    o = [pulp.LpVariable(f"o_{i}", lowBound=0, cat=pulp.LpInteger) for i in range(ticks)]
    m = [pulp.LpVariable(f"m_{i}", lowBound=0) for i in range(ticks)]
    for z in range(n_z):
        for i in range(ticks):
            if held[z, i]:
                x[z, i] = pulp.LpVariable(f"x_{z}_{i}", lowBound=0, cat=pulp.LpInteger)
    cost = []
    for i in range(ticks):
        hours = w[i] / 3600.0
        cost.append(hours * on_demand_usd_per_hour * o[i])
        cost += [hours * spot_usd_per_hour[z] * x[z, i] for z in range(n_z) if (z, i) in x]
        prob += pulp.lpSum([x[z, i] for z in range(n_z) if (z, i) in x]) + o[i] >= replicas
        if i == 0:
            continue
        launch_h = launch_seconds(i, tick_s, cold_start_s) / 3600.0
        prob += m[i] >= o[i] - o[i - 1]
        cost.append(launch_h * on_demand_usd_per_hour * m[i])
        for z in range(n_z):
            if (z, i) not in x:
                continue
            before = x.get((z, i - 1), 0)
            if not held[z, i - 1]:
                prob += x[z, i] <= 0  # nothing can have warmed up during tick i-1
                continue
            new[z, i] = pulp.LpVariable(f"n_{z}_{i}", lowBound=0)
            prob += new[z, i] >= x[z, i] - before
            cost.append(launch_h * spot_usd_per_hour[z] * new[z, i])
    prob += pulp.lpSum(cost)
    solver = pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit_s)
    with solver_children():  # a killed or failed solve leaves no CBC running
        prob.solve(solver)
    status = pulp.LpStatus[prob.status]
    if prob.status != pulp.LpStatusOptimal:
        raise RuntimeError(f"fleet ILP: CBC returned {status}")
    spot_h = sum(w[i] / 3600.0 * float(v.value() or 0.0) for (z, i), v in x.items()) + sum(
        launch_seconds(i, tick_s, cold_start_s) / 3600.0 * float(v.value() or 0.0)
        for (z, i), v in new.items()
    )
    od_h = sum(w[i] / 3600.0 * float(o[i].value() or 0.0) for i in range(ticks)) + sum(
        launch_seconds(i, tick_s, cold_start_s) / 3600.0 * float(m[i].value() or 0.0)
        for i in range(1, ticks)
    )
    return FleetOptimum(float(pulp.value(prob.objective)), spot_h, od_h, status)


def fleet_shortest_path(
    held: npt.NDArray[np.bool_],
    replicas: int,
    spot_usd_per_hour: Sequence[float],
    on_demand_usd_per_hour: float,
    tick_s: float,
    cold_start_s: float,
) -> float:
    """``N`` x one replica's cheapest path (states: a zone's spot, or on-demand)."""
    _check(held, spot_usd_per_hour, tick_s, cold_start_s)
    ticks = held.shape[1]
    w = measured_seconds(ticks, tick_s, cold_start_s) / 3600.0
    price = np.array([*spot_usd_per_hour, on_demand_usd_per_hour])
    can = np.vstack([held.astype(bool), np.ones((1, ticks), dtype=bool)])
    cost = np.where(can[:, 0], w[0] * price, np.inf)
    for i in range(1, ticks):
        launch_h = launch_seconds(i, tick_s, cold_start_s) / 3600.0
        stay = np.where(can[:, i], cost, np.inf)
        best = float(cost.min())
        # switching in: the new place's cold start runs in tick i-1
        switch = np.where(can[:, i] & can[:, i - 1], best + launch_h * price, np.inf)
        cost = np.minimum(stay, switch) + np.where(can[:, i], w[i] * price, np.inf)
    return replicas * float(cost.min())
