"""Compose the benchmark: every setting on the same data, plus the machinery.

Owns: ``SETTINGS`` (name -> ``run(data, windows, seed) -> dict``; the
``portfolio`` slot is the lead's hook and stays ``None`` until plugged in),
``MACHINERY_HOOKS`` (``solver`` likewise), ``run_bench`` (load the data under
measurement, run each setting, measure replay throughput, check the targets)
and the JSON object it returns (schema ``spotfolio.bench/1``).

Must not: load files itself (the caller passes ``load``) or print.

Plugging in the portfolio setting and the solver measurements::

    from broker.bench import runner
    runner.SETTINGS["portfolio"] = my_portfolio.run        # (data, windows, seed) -> dict
    runner.MACHINERY_HOOKS["solver"] = my_solver_sizes     # (data, windows, seed) -> dict

The returned object: ``schema``, ``source``, ``windows``, ``seed``,
``deadline`` (``broker.bench.deadline.summarize``), ``fleet``
(``broker.bench.fleet.summarize``), ``portfolio`` (``{}`` until plugged in),
``markets`` (``broker.bench.markets``: ``calibration``, the hazard's
calibration on held-back trace periods), ``machinery`` (``data_load_s``,
``data_load_peak_traced_mib``, ``peak_rss_mib``, ``replay`` throughput,
per-setting ``seconds``, ``solver``, ``soak``, ``plan_scale``) and
``targets`` (each published target: measured value, limit, ``met``).
"""

from __future__ import annotations

import resource
import sys
import tracemalloc
from collections.abc import Callable, Mapping
from typing import TypedDict

from broker.bench import BenchData, SettingRun
from broker.bench import deadline as deadline_setting
from broker.bench import fleet as fleet_setting
from broker.bench.rules import deadline_policy
from broker.jsondoc import at, count, number, obj
from broker.scale.fanout import Executor, ExecutorSpec
from broker.simulate.deadline import DeadlineSetting, simulate_deadline
from broker.simulate.omniscient import omniscient_deadline
from markets.clock import Clock, SystemClock
from markets.protocols import PriceSource
from markets.registry import open_market

__all__ = [
    "MACHINERY_HOOKS",
    "SCHEMA",
    "SETTINGS",
    "TARGETS",
    "ReplayThroughput",
    "TargetRow",
    "replay_throughput",
    "run_bench",
]

SCHEMA = "spotfolio.bench/1"

# --windows scales every setting; at this many windows and above the heavy
# measurements run at full size (30-day portfolio, all solver sizes, a
# 1,000-notice storm), below it they shrink so CI stays fast.
FULL_SIZE_WINDOWS = 20
# The portfolio setting runs this many seeds at full size (``seed``,
# ``seed + 1``, ...): its target must hold on each.
PORTFOLIO_SEEDS = 3


class ReplayThroughput(TypedDict, total=False):
    """``machinery.replay`` (empty without traces)."""

    trace: str
    trace_hours: float
    policy_windows: int
    policy_windows_per_s: float
    omniscient_windows_per_s: float


class TargetRow(TypedDict):
    setting: str
    metric: str
    op: str
    limit: float
    value: object  # the measured figure as the block holds it; None: not measured
    met: bool | None


# The portfolio, solver and reaction hooks import their modules when they run:
# those pull the planner (pandas, PuLP) and the daemon's stack, which
# ``spotfolio simulate --setting deadline`` (it imports this module) never uses.


def _portfolio_market(seed: int) -> PriceSource:
    """The default market of a portfolio seed (a top-level function: the
    seeds may run in worker processes, ``portfolio.run_seeds``)."""
    return open_market("default", seed=seed + 7)


def _portfolio(data: BenchData, windows: int, seed: int) -> Mapping[str, object]:
    """The portfolio setting on the default market: the recorded traces cover
    V100/K80 pools only, which cannot host the example fleet's serving and
    training workloads (A10G/L4 and A100/H100)."""
    from broker.bench import portfolio  # lazy: see above

    full = windows >= FULL_SIZE_WINDOWS
    days = 30 if full else max(1, min(windows, 7))
    seeds = [seed + i for i in range(PORTFOLIO_SEEDS if full else 1)]
    out = portfolio.run_seeds(_portfolio_market, seeds, days=days)
    out["market"] = "default"
    return out


def _solver(data: BenchData, windows: int, seed: int) -> Mapping[str, object]:
    from broker.bench import solver  # lazy: see above

    if windows >= FULL_SIZE_WINDOWS:
        out = solver.run(solver.DEFAULT_SIZES[:1], seed=seed, naive=True, naive_time_limit_s=60)
        out.update(solver.run(solver.DEFAULT_SIZES[1:], seed=seed, naive=False))
        return out
    return solver.run(solver.DEFAULT_SIZES[:1], seed=seed, naive=False)


def _reaction(data: BenchData, windows: int, seed: int) -> Mapping[str, object]:
    from broker.bench import reaction_latency  # lazy: see above

    storm = 1000 if windows >= FULL_SIZE_WINDOWS else 100
    return reaction_latency.run(storm=storm, seed=seed, repeats=20 if storm == 1000 else 5)


def _scale(data: BenchData, windows: int, seed: int) -> Mapping[str, object]:
    """Parallel efficiency on 2 local Dask workers, the default (30-day) and
    the one-year what-if over the default market's ~300 pools: full-size runs only (a
    year alone is ~500 CPU-s; ``{}`` below, so the targets read "not measured")."""
    if windows < FULL_SIZE_WINDOWS:
        return {}
    from broker.bench import scale  # lazy: the what-if stack and dask (see above)

    return {
        "parallel": scale.parallel_efficiency(),
        "default_whatif": scale.year_whatif(scale.DEFAULT_DAYS),
        "year_whatif": scale.year_whatif(),
    }


def _soak(data: BenchData, windows: int, seed: int) -> Mapping[str, object]:
    """90 simulated days of the accelerated daemon on a PostgreSQL it starts
    (``broker.bench.soak``): only when asked (``ASKED_HOOKS``; ~35 minutes);
    without the server binaries, why not."""
    from broker.bench import pgserver, soak  # lazy: the daemon's stack (see above)

    why = pgserver.missing()
    if why is not None:
        return {"not_measured": why}
    with pgserver.TempPostgres() as pg:
        out = soak.run(soak.SoakSpec(seed=seed), pg)
    out["violations"] = soak.check(out)
    return out


def _plan_scale(data: BenchData, windows: int, seed: int) -> Mapping[str, object]:
    """300 workloads over the default market's ~300 pools (only when asked)."""
    from broker.bench import plan_scale  # lazy: the planner (see above)

    return plan_scale.run(300, seed=seed)


def _markets(data: BenchData, windows: int, seed: int) -> Mapping[str, object]:
    from broker.bench import markets  # lazy: scipy, for this block only (see above)

    return markets.run(data, windows, seed)


SETTINGS: dict[str, SettingRun | None] = {
    "deadline": deadline_setting.run,
    "fleet": fleet_setting.run,
    "portfolio": _portfolio,
}
MachineryHook = Callable[[BenchData, int, int], Mapping[str, object]]
MACHINERY_HOOKS: dict[str, MachineryHook | None] = {
    # portfolio MILP build + solve times at 10x6x24, 40x20x24, 40x20x168
    "solver": _solver,
    # notice -> durable decision -> launch request, one notice and a storm
    "reaction": _reaction,
    # the same N what-ifs serially and on 2 Dask workers; a year x 300 pools
    "scale": _scale,
    # 90 simulated days with kills and a store restart: per-day RSS, store, p99
    "soak": _soak,
    # 300 workloads x ~300 pools, one daemon horizon
    "plan_scale": _plan_scale,
}

# Machinery hooks that run only when asked (``run_bench(asked=...)``,
# ``spotfolio bench --soak``): tens of minutes each; ``{}`` otherwise.
ASKED_HOOKS = frozenset({"soak", "plan_scale"})

# The bench's targets (docs/docs/benchmarks.md): (block, path, comparison, limit)
TARGETS: tuple[tuple[str, str, str, float], ...] = (
    ("deadline", "spotfolio_vs_uniform_progress", "<=", 0.97),
    ("deadline", "spotfolio_worst_quadrant_vs_uniform_progress", "<=", 1.00),
    ("deadline", "gap_closure_vs_greedy.spotfolio", "<=", 0.40),
    ("deadline", "misses_except_greedy", "<=", 0),
    ("fleet", "spotfolio.availability", ">=", 0.995),
    ("fleet", "spotfolio.cost_vs_on_demand", "<=", 0.55),
    ("fleet", "spotfolio.cost_vs_omniscient", "<=", 1.10),
    # the daemon's planning loop on every seed of the run
    ("portfolio", "spread.spotfolio.cost_vs_hindsight_max", "<=", 1.05),
    ("portfolio", "spread.spotfolio.unmet_serving_unit_hours_max", "<=", 0),
    # 40 x 20 x 24 to a proven 0.5 % gap in <= 2 s (full-size runs only)
    ("machinery", "solver.40x20x24.seconds", "<=", 2.0),
    ("machinery", "solver.40x20x24.gap", "<=", 0.005),
    # notice -> decision -> launch request p99 <= 1 s on SQLite
    ("machinery", "reaction.single.launch_request_ms.p99", "<=", 1000.0),
    ("machinery", "reaction.storm.launch_request_ms.p99", "<=", 1000.0),
    # scale-out, the default what-if (30 days) and the one-year what-if
    # (full-size runs only): a first answer at interactive speed, a year in a minute
    ("machinery", "scale.parallel.efficiency", ">=", 0.80),
    ("machinery", "scale.default_whatif.seconds", "<=", 10.0),
    ("machinery", "scale.year_whatif.seconds", "<=", 60.0),
    ("machinery", "scale.year_whatif.peak_rss_mib", "<=", 1024.0),
    # the soak's growth limits (broker.bench.soak.LIMITS, justified there) and faults
    ("machinery", "soak.notices", ">=", 10000),
    ("machinery", "soak.duplicate_launches", "<=", 0),
    ("machinery", "soak.orphaned_instances", "<=", 0),
    ("machinery", "soak.growth.rss_mib_per_day_after_warmup", "<=", 2.0),
    ("machinery", "soak.growth.rss_kib_per_notice_after_warmup", "<=", 4.0),
    ("machinery", "soak.growth.store_bytes_per_notice", "<=", 8192.0),
    ("machinery", "soak.growth.store_growth_second_half_vs_first", "<=", 2.0),
    ("machinery", "soak.growth.p99_last10_vs_first10", "<=", 3.0),
    ("machinery", "plan_scale.planned", ">=", 1),  # a plan came out (True)
    ("machinery", "plan_scale.planned_seconds", "<=", 60.0),
    # 90 % predictive intervals cover 85-95 % of held-back pool-days
    ("markets", "calibration.coverage", ">=", 0.85),
    ("markets", "calibration.coverage", "<=", 0.95),
)


def _rss_mib() -> float:
    # ru_maxrss is KiB on Linux, bytes on macOS (getrusage(2))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024.0 * 1024.0) if sys.platform == "darwin" else peak / 1024.0


def replay_throughput(
    data: BenchData, seed: int, clock: Clock, windows: int = 8
) -> ReplayThroughput:
    """Policy-windows per second: every deadline rule replayed over windows of
    the longest trace, and omniscient solves per second, timed side by side."""
    if not data.traces:
        return {}
    longest = max(data.traces, key=lambda t: t.hours)
    setting = DeadlineSetting()
    wins = deadline_setting.sample_windows([longest], setting, windows, seed, fractions=(0.8,))
    if not wins:
        return {}
    t0 = clock.monotonic()
    for w in wins:
        for name in deadline_setting.POLICIES:
            simulate_deadline(setting, w, deadline_policy(name))
    t1 = clock.monotonic()
    for w in wins:
        omniscient_deadline(setting, w)
    t2 = clock.monotonic()
    n = len(wins) * len(deadline_setting.POLICIES)
    return {
        "trace": longest.name,
        "trace_hours": round(longest.hours, 1),
        "policy_windows": n,
        "policy_windows_per_s": round(n / max(t1 - t0, 1e-9), 1),
        "omniscient_windows_per_s": round(len(wins) / max(t2 - t1, 1e-9), 2),
    }


def _vs_uniform(policies: object) -> float:
    """Spotfolio's mean cost / on-demand over uniform progress's."""
    spotfolio = at(policies, "spotfolio", "mean_cost_vs_on_demand")
    uniform = at(policies, "uniform_progress", "mean_cost_vs_on_demand")
    return number(spotfolio, "spotfolio cost") / number(uniform, "uniform_progress cost")


def _derived(out: Mapping[str, object]) -> dict[str, Mapping[str, object]]:
    """The deadline comparisons the targets name, from the setting's block."""
    d = obj(out.get("deadline"))
    pol = obj(d.get("policies"))
    deadline: dict[str, object] = dict(d)
    if "spotfolio" in pol and "uniform_progress" in pol:
        deadline["spotfolio_vs_uniform_progress"] = round(_vs_uniform(pol), 4)
        quads = [_vs_uniform(at(q, "policies")) for q in obj(d.get("quadrants")).values()]
        deadline["spotfolio_worst_quadrant_vs_uniform_progress"] = (
            round(max(quads), 4) if quads else None
        )
    deadline["misses_except_greedy"] = sum(
        count(at(v, "deadline_misses"), f"{k} deadline_misses")
        for k, v in pol.items()
        if k != "greedy"
    )
    return {
        "deadline": deadline,
        "fleet": obj(at(out, "fleet", "policies")),
        "portfolio": {
            **obj(at(out, "portfolio", "policies")),
            "spread": obj(at(out, "portfolio", "spread")),
        },
        "machinery": obj(out.get("machinery")),
        "markets": obj(out.get("markets")),
    }


def check_targets(out: Mapping[str, object]) -> list[TargetRow]:
    """Each target with its measured value and whether it is met."""
    derived = _derived(out)
    rows: list[TargetRow] = []
    for block, path, op, limit in TARGETS:
        value = at(derived[block], *path.split("."))
        met: bool | None
        if value is None:
            met = None
        elif isinstance(value, int | float):
            met = value <= limit if op == "<=" else value >= limit
        else:
            raise TypeError(f"{block}.{path}: expected a number, got {value!r}")
        rows.append(
            {"setting": block, "metric": path, "op": op, "limit": limit, "value": value, "met": met}
        )
    return rows


def run_bench(
    load: Callable[[], BenchData],
    *,
    windows: int,
    seed: int,
    clock: Clock | None = None,
    settings: tuple[str, ...] = ("deadline", "fleet", "portfolio"),
    workers: int = 1,
    progress: Callable[[str], None] | None = None,
    asked: frozenset[str] = frozenset(),
) -> dict[str, object]:
    """Load the data (timed, peak memory traced), run each setting, measure
    (the ``ASKED_HOOKS`` named in ``asked`` too)."""
    clock = clock or SystemClock()
    say = progress or (lambda _msg: None)
    tracemalloc.start()
    t0 = clock.monotonic()
    data = load()
    load_s = clock.monotonic() - t0
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    seconds: dict[str, float] = {}
    machinery: dict[str, object] = {
        "data_load_s": round(load_s, 3),
        "data_load_peak_traced_mib": round(traced_peak / 2**20, 1),
        "traces": len(data.traces),
        "seconds": seconds,
    }
    out: dict[str, object] = {
        "schema": SCHEMA,
        "source": data.source,
        "windows": windows,
        "seed": seed,
    }
    # --workers: one local Dask cluster for the deadline and fleet windows
    # (broker.scale.fanout), opened once, closed before the machinery runs
    with Executor(ExecutorSpec(workers=workers)) as ex:
        for name in settings:
            run = SETTINGS.get(name)
            if run is None:
                out[name] = {}
                continue
            say(f"{name} ...")
            t = clock.monotonic()

            def step(done: int, total: int, name: str = name) -> None:
                say(f"{name}: {done}/{total}")

            on = None if ex.spec.serial else ex
            if run is deadline_setting.run:  # (a test may plug in its own run)
                out[name] = deadline_setting.run(data, windows, seed, on_done=step, executor=on)
            elif run is fleet_setting.run:
                out[name] = fleet_setting.run(data, windows, seed, on_done=step, executor=on)
            else:
                out[name] = run(data, windows, seed)
            seconds[name] = round(clock.monotonic() - t, 2)
    say("markets ...")
    out["markets"] = _markets(data, windows, seed)
    say("machinery ...")
    machinery["replay"] = replay_throughput(data, seed, clock)
    for name, hook in MACHINERY_HOOKS.items():
        if hook is None or (name in ASKED_HOOKS and name not in asked):
            machinery[name] = {}
            continue
        say(f"machinery: {name} ...")
        machinery[name] = hook(data, windows, seed)
    machinery["peak_rss_mib"] = round(_rss_mib(), 1)
    out["machinery"] = machinery
    out["targets"] = check_targets(out)
    return out
