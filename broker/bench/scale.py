"""The scale targets of ``spotfolio bench`` (``machinery.scale``).

Owns: ``parallel_efficiency`` (the same N what-if scenarios serially in this
process, then on a 2-worker local Dask cluster through ``broker.scale.fanout``,
the executor ``sweep`` and ``bench --workers`` use; efficiency = serial
seconds / (workers x cluster seconds), both warm: each side has run one
scenario, untimed, first; the cluster's start is reported apart; CPU
seconds of both sides beside it, as a shared machine's load moves the wall
clock of either) and
``year_whatif`` (``spotfolio whatif --days 365``: a year of hourly demand
over the default market's 302 pools, run in a child process so its peak RSS
is its own: the child's ``ru_maxrss``, and its children's, the CBC solver;
CPU seconds beside the wall time, for a shared machine; each phase's CPU,
wall and peak memory, ``broker.whatif.phases``). The same child runs the
default 30-day what-if (``DEFAULT_DAYS``) for its target.

The year is ``whatif``'s defaults, the 20-sample risk band included (each
sample replays a year of the lifecycle's reaction): measured on 2 shared
cores at load ~2, 463 s and 455 CPU-s, 363.5 MiB peak RSS.

Must not: print, or run at small bench sizes (the hook in
``broker.bench.runner`` runs it at full size only: the year takes minutes).
"""

from __future__ import annotations

import functools
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Mapping
from typing import Any

from broker.scale.fanout import Executor, ExecutorSpec

__all__ = ["DEFAULT_DAYS", "PARALLEL_DAYS", "parallel_efficiency", "scenario_cost", "year_whatif"]

YEAR_DAYS = 365
# ``spotfolio whatif``'s own default period: the first answer a user sees
DEFAULT_DAYS = 30


def scenario_cost(seed: int, days: int = 1) -> float:
    """One what-if on the default market and example fleet (``seed`` moves
    the market's draws); Spotfolio's billed total."""
    from broker.planning.optimizer.problem import PlanOptions
    from broker.whatif.run import run_whatif
    from markets.registry import open_market
    from policies.workloads.spec import default_workloads

    src = open_market("default", seed=seed)
    opts = PlanOptions(period_hours=0 if days > 7 else 1)
    result = run_whatif(src, default_workloads(), days=days, options=opts, replan_hours=24)
    return round(result.scenario("spotfolio").bill.total_usd, 2)


def _warm() -> None:
    scenario_cost(0)


def cpu_s() -> float:
    """CPU seconds of this process and its waited-for children (the CBC
    solves): user + system, ``getrusage(2)``."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


# Days of each scenario of ``parallel_efficiency``: ~4 CPU-s of work a
# scenario (a 1-day one was ~1.5 CPU-s, and the scheduler's and workers' own
# CPU, ~1.3 s over 8 scenarios measured here, was 9 % of the serial work).
PARALLEL_DAYS = 3


def parallel_efficiency(
    n: int = 8, workers: int = 2, days: int = PARALLEL_DAYS
) -> dict[str, object]:
    """Efficiency on the wall clock (the target), and the CPU seconds behind
    it: a shared machine slows both sides by what else runs, so
    ``cpu_efficiency`` (serial CPU / the cluster's CPU: this process, which
    runs the scheduler, and every worker with its solver children) says how
    much work the cluster added, whatever the load. ``n`` is a multiple of
    ``workers`` so no worker idles while another runs a last scenario."""
    seeds = list(range(1, n + 1))
    _warm()
    t0, c0 = time.perf_counter(), cpu_s()
    serial = [scenario_cost(s, days) for s in seeds]
    serial_s, serial_cpu = time.perf_counter() - t0, cpu_s() - c0
    t0 = time.perf_counter()
    with Executor(ExecutorSpec(workers=workers)) as ex:
        start_s = time.perf_counter() - t0
        ex.run_on_workers(_warm)
        before = ex.run_on_workers(cpu_s)
        t1, c1 = time.perf_counter(), cpu_s()
        parallel = ex.map(functools.partial(scenario_cost, days=days), seeds)
        cluster_s, here_cpu = time.perf_counter() - t1, cpu_s() - c1
        after = ex.run_on_workers(cpu_s)
        got = ex.workers
    workers_cpu = sum(b - a for a, b in zip(before, after, strict=True))
    cluster_cpu = here_cpu + workers_cpu
    return {
        "scenarios": n,
        "workers": got,
        "what": f"{days}-day what-if, default market and fleet, re-planned daily",
        "serial_s": round(serial_s, 2),
        "cluster_s": round(cluster_s, 2),
        "cluster_start_s": round(start_s, 2),
        "efficiency": round(serial_s / (got * cluster_s), 3) if cluster_s > 0 else None,
        "serial_cpu_s": round(serial_cpu, 2),
        "cluster_cpu_s": round(cluster_cpu, 2),
        "workers_cpu_s": round(workers_cpu, 2),  # the rest: this process (scheduler, client)
        "cpu_efficiency": round(serial_cpu / cluster_cpu, 3) if cluster_cpu > 0 else None,
        "same_results": serial == parallel,
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def year_whatif(days: int = YEAR_DAYS) -> dict[str, object]:
    """A ``days``-day what-if (default: a year) in a child process."""
    from markets.registry import open_market

    pools = len(list(open_market("default").pools()))
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "broker.cli._measured", str(days)],
        capture_output=True, text=True, check=True, env=dict(os.environ),
    )  # fmt: skip
    total_s = time.perf_counter() - t0
    child: Mapping[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    # ru_maxrss: KiB on Linux (getrusage(2)); the solver's peak is its own process's
    peak = max(child["rss_kib"], child["children_rss_kib"]) / 1024
    return {
        "days": days,
        "hours": days * 24,
        "pools": pools,
        "seconds": round(child["seconds"], 2),
        "process_seconds": round(total_s, 2),
        "peak_rss_mib": round(peak, 1),
        "peak_rss_what_if_mib": round(child["rss_kib"] / 1024, 1),
        "cpu_s": round(child["cpu_s"], 2),  # beside the wall time: the machine may be shared
        "phases_s": child["phases_s"],
        # per phase: CPU and wall seconds, peak RSS at its end (broker.whatif.phases)
        "phases": child["timings"]["phases"],
        "spotfolio_total_cost_usd": child["cost"],
        "load_average_1m": round(os.getloadavg()[0], 2),
    }
