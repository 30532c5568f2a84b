"""Solver machinery benchmark: the portfolio MILP at stated sizes.

Owns: ``synthetic_problem`` (T instance types x Z zones x H hours, seeded)
and ``run`` which, per size, builds and solves Spotfolio's formulation
(aggregation, spot-pool pruning, relax-and-fix) and, side by side in the same
run, the *naive* formulation (every pool a spot candidate, integer instance
counts, the MILP solved directly, with a time limit), plus the fast path,
reporting times and cost gaps as ratios (design/benchmarks.md section 4:
sizes 10x6x24, 40x20x24 and 40x20x168 at a 0.5 % gap; a naive PuLP + CBC
formulation took 2.5 s, 16 s and 40 s on these machines).

Must not: assert targets (benchmarks report; tests check schema).
"""

from __future__ import annotations

import dataclasses
import time
from datetime import UTC, datetime
from typing import Any

import numpy as np

from broker.optimizer.problem import PlanningProblem, PlanOptions, build_problem
from markets.model import (
    Hazard,
    HazardSource,
    InstanceType,
    MarketSnapshot,
    Pool,
    PoolSnapshot,
    Provider,
)
from policies.workloads import parse_workloads

__all__ = ["DEFAULT_SIZES", "run", "synthetic_problem"]

DEFAULT_SIZES: tuple[tuple[int, int, int], ...] = ((10, 6, 24), (40, 20, 24), (40, 20, 168))
T0 = datetime(2026, 1, 5, tzinfo=UTC)


def synthetic_problem(types: int, zones: int, hours: int, *, seed: int = 0,
                      options: PlanOptions | None = None) -> PlanningProblem:  # fmt: skip
    """A seeded market of ``types`` x ``zones`` pools and a three-class fleet."""
    rng = np.random.default_rng(seed)
    units = rng.choice([1, 4, 8], size=types)
    od_per_unit = rng.uniform(0.5, 12.0, size=types)
    pools = []
    for z in range(zones):
        region = f"us-r{z // 3}"
        zone = f"{region}{'abc'[z % 3]}"
        for t in range(types):
            od = float(od_per_unit[t] * units[t])
            inst = InstanceType(provider=Provider.AWS, name=f"t{t}", family=f"f{t % 5}",
                                units=int(units[t]), gpus=int(units[t]), vcpus=8 * int(units[t]),
                                memory_gib=32.0 * int(units[t]))  # fmt: skip
            pools.append(PoolSnapshot(
                pool=Pool(provider=Provider.AWS, region=region, zone=zone, instance_type=f"t{t}"),
                instance=inst,
                on_demand_usd_per_hour=od,
                spot_usd_per_hour=od * float(rng.uniform(0.1, 0.4)),
                committed_1y_usd_per_hour=od * 0.62,
                placement_score=int(rng.integers(3, 11)),
                hazard=Hazard(rate_per_hour=float(rng.uniform(0.001, 0.05)),
                              source=HazardSource.MODEL, confidence=0.5),
                available_share=float(rng.uniform(0.5, 1.0)),
                observed_at=T0,
            ))  # fmt: skip
    snap = MarketSnapshot(at=T0, pools=tuple(pools), source="synthetic")
    names = [f"t{t}" for t in range(types)]
    ws = parse_workloads({"workloads": [
        {"name": "serve", "class": "serving", "instance_types": names},
        {"name": "train", "class": "training", "instance_types": names, "elastic": True,
         "min_units": 8, "step_units": 8, "max_units": 64, "unit_hours": 40.0 * hours,
         "deadline_hours": float(hours)},
        {"name": "batch", "class": "batch", "instance_types": names, "unit_hours": 20.0 * hours},
    ]}, demand_supplied=True)  # fmt: skip
    hod = np.arange(hours) % 24
    demand = {"serve": np.where((hod >= 9) & (hod < 21), 96.0, 48.0)}
    return build_problem(snap, ws, demand, hours=hours, options=options or PlanOptions())


def _timed(fn: Any) -> tuple[Any, float]:
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def run(sizes: tuple[tuple[int, int, int], ...] = DEFAULT_SIZES, *, seed: int = 0,
        naive: bool = True, naive_time_limit_s: float = 60.0) -> dict[str, Any]:  # fmt: skip
    """Per size: Spotfolio's solve, the fast path and the naive MILP, side by side."""
    from broker.optimizer.fast import fast_plan
    from broker.optimizer.solve import solve

    out: dict[str, Any] = {}
    for types, zones, hours in sizes:
        key = f"{types}x{zones}x{hours}"
        problem = synthetic_problem(types, zones, hours, seed=seed)
        plan, secs = _timed(lambda p=problem: solve(p))
        fixed = dataclasses.replace(problem, committed_fixed=plan.committed_instances())
        fast, fast_s = _timed(lambda p=fixed: fast_plan(p))
        row: dict[str, Any] = {
            "seconds": round(secs, 3),
            "build_s": round(plan.meta["build_s"], 3),
            "variables": plan.meta["variables"],
            "method": plan.meta["method"],
            "objective_usd": round(plan.objective_usd, 2),
            "gap_to_lp_bound": plan.meta.get("gap"),
            "fast_ms": round(fast_s * 1000, 1),
            "fast_cost_vs_milp": round(fast.planned_cost_usd() / plan.planned_cost_usd(), 4),
        }
        if naive:
            opts = dataclasses.replace(problem.options, max_spot_pools=10**6, integral=True,
                                       time_limit_s=naive_time_limit_s)  # fmt: skip
            naive_problem = dataclasses.replace(problem, options=opts)
            nplan, nsecs = _timed(lambda p=naive_problem: solve(p, integral=True))
            row.update({
                "naive_seconds": round(nsecs, 3),
                "naive_variables": nplan.meta["variables"],
                "naive_status": nplan.status,
                "naive_objective_usd": round(nplan.objective_usd, 2),
                "speedup_vs_naive": round(nsecs / max(secs, 1e-9), 2),
                "objective_vs_naive": round(plan.objective_usd / nplan.objective_usd, 4),
            })  # fmt: skip
        out[key] = row
    return out
