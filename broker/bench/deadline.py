"""The deadline setting of the benchmark (docs/docs/benchmarks.md).

Owns: drawing the windows (random start points per trace, seeded), running
every policy and the omniscient optimum on each, and the metrics: mean and
p75 of cost / on-demand cost, deadline misses, gap-closure ratio
``(cost - omniscient) / (greedy - omniscient)``, spot hours / omniscient spot
hours, overall and per quadrant (window spot availability above/below 50 %,
job fraction above/below 0.75).

Must not: decide (the baselines are ``policies.online.deadline``'s; the
``spotfolio`` entry is the daemon's ``LifecycleManager``, driven by
``broker.bench.product.deadline``; ``broker.bench.rules`` names them all) or
move the job (``broker.simulate.deadline``). Every policy's JSON entry says
who decided (``decided_by``, ``module:qualname``).

Every policy sees the same windows, prices, tick and changeover. A trace is
first coarsened to decision ticks of at most ``DECISION_TICK_S`` (its own gap
when that is longer); the deadline is the window's last tick boundary. A
window's ``prior`` is the held share over the ``PRIOR_HOURS`` of the trace
before it: the market history a broker has watched before the job arrives
(the default market's snapshots report the same 7-day share); windows at the
very start of a trace have less or none.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NotRequired, TypedDict

import numpy as np

from broker.bench import BenchData
from broker.bench.rules import deadline_policy, decided_by
from broker.scale.fanout import Executor, ExecutorSpec
from broker.simulate import AvailabilityTrace, coarsen
from broker.simulate.deadline import (
    DeadlineOutcome,
    DeadlineSetting,
    DeadlineWindow,
    on_demand_cost,
    simulate_deadline,
)
from broker.simulate.omniscient import omniscient_deadline

__all__ = [
    "DECISION_TICK_S",
    "FRACTIONS",
    "POLICIES",
    "DeadlineBlock",
    "DeadlineSettingInfo",
    "DeadlineSummary",
    "PolicyMetrics",
    "WindowResult",
    "evaluate",
    "run",
    "sample_windows",
    "summarize",
]

# "tick = the trace's gap (or 10 min)": finer traces are merged up to 10 min,
# which keeps a tick shorter than the 0.2 h changeover (the safety nets' margin).
DECISION_TICK_S = 600
FRACTIONS = (0.7, 0.8, 0.9)  # docs/docs/benchmarks.md
PRIOR_HOURS = 168.0  # a week of watched history, as a market snapshot's share
POLICIES = ("on_demand", "greedy", "uniform_progress", "spotfolio")
QUADRANT_SHARE = 0.5
QUADRANT_FRACTION = 0.75


class PolicyMetrics(TypedDict):
    """One policy's figures over a set of windows (costs as ratios)."""

    mean_cost_vs_on_demand: float
    p75_cost_vs_on_demand: float
    mean_cost_vs_omniscient: float
    deadline_misses: int
    spot_hours_vs_omniscient: float | None
    changeovers_per_window: float
    decided_by: str  # module:qualname of the code that made the decisions


class DeadlineBlock(TypedDict):
    """The metrics of one set of windows: per policy (and ``omniscient``)."""

    windows: int
    policies: dict[str, PolicyMetrics]
    gap_closure_vs_greedy: dict[str, float | None]


class DeadlineSettingInfo(TypedDict):
    compute_hours: float
    changeover_hours: float
    price_ratio: float
    job_fractions: list[float]
    decision_tick_max_s: int
    traces: int


class DeadlineSummary(DeadlineBlock):
    """The setting's JSON block: all windows, per quadrant, and (from ``run``)
    the setting."""

    quadrants: dict[str, DeadlineBlock]
    setting: NotRequired[DeadlineSettingInfo]


@dataclass(frozen=True)
class WindowResult:
    """Every policy's outcome on one window, and the yardsticks."""

    window: DeadlineWindow
    on_demand_usd: float
    omniscient: DeadlineOutcome
    omniscient_usd: float
    outcomes: dict[str, DeadlineOutcome]

    @property
    def quadrant(self) -> str:
        share = "high" if self.window.held_share >= QUADRANT_SHARE else "low"
        frac = "high" if self.window.job_fraction >= QUADRANT_FRACTION else "low"
        return f"availability_{share}/fraction_{frac}"


def sample_windows(
    traces: Sequence[AvailabilityTrace],
    setting: DeadlineSetting,
    per_trace: int,
    seed: int,
    fractions: Sequence[float] = FRACTIONS,
) -> list[DeadlineWindow]:
    """``per_trace`` random windows per (trace, fraction); a trace shorter than
    the deadline gives none. Deterministic in (seed, trace name, fraction)."""
    out: list[DeadlineWindow] = []
    for raw in traces:
        tr = coarsen(raw, DECISION_TICK_S)
        for f in fractions:
            n = int(setting.compute_hours / f * 3600) // tr.tick_s
            if n < 1 or tr.ticks < n:
                continue
            key = zlib.crc32(f"{tr.name}|{f}".encode())
            rng = np.random.default_rng([seed, key])
            starts = rng.integers(0, tr.ticks - n + 1, size=per_trace)
            prior_ticks = int(PRIOR_HOURS * 3600) // tr.tick_s
            for s in sorted(int(x) for x in starts):
                past = tr.held[max(0, s - prior_ticks) : s]
                out.append(
                    DeadlineWindow(
                        trace=tr.name,
                        start_tick=s,
                        tick_s=tr.tick_s,
                        job_fraction=f,
                        held=tr.held[s : s + n],
                        past=past,
                    )
                )
    return out


def evaluate_one(
    setting: DeadlineSetting, window: DeadlineWindow, policies: Sequence[str] = POLICIES
) -> WindowResult:
    """Every policy and the optimum on one window (work and money checked)."""
    omni = omniscient_deadline(setting, window)
    outcomes = {}
    for name in policies:
        res = simulate_deadline(setting, window, deadline_policy(name))
        res.check(setting)
        outcomes[name] = res
    omni.outcome.check(setting)
    return WindowResult(
        window, on_demand_cost(setting, window), omni.outcome, omni.cost_usd, outcomes
    )


def _evaluate_chunk(
    args: tuple[DeadlineSetting, list[DeadlineWindow], tuple[str, ...]],
) -> list[WindowResult]:
    setting, windows, policies = args
    return [evaluate_one(setting, w, policies) for w in windows]


def evaluate(
    setting: DeadlineSetting,
    windows: Sequence[DeadlineWindow],
    policies: Sequence[str] = POLICIES,
    *,
    workers: int = 1,
    executor: Executor | None = None,
    on_done: Callable[[int, int], None] | None = None,
) -> list[WindowResult]:
    """All windows; ``workers > 1`` spreads them over a local Dask cluster of
    that many processes, ``executor`` over an open one (same results either
    way: ``broker.scale.fanout``); ``on_done(chunks done, chunks)``."""
    pols = tuple(policies)
    if executor is None and (workers <= 1 or len(windows) < 2 * workers):
        return Executor(ExecutorSpec()).map(
            lambda w: evaluate_one(setting, w, pols), windows, on_done=on_done
        )
    if executor is None:
        with Executor(ExecutorSpec(workers=workers)) as ex:
            return evaluate(setting, windows, pols, executor=ex, on_done=on_done)
    # four chunks a worker: even loads, and progress finer than one chunk each
    k = max(1, min(len(windows), 4 * executor.workers))
    chunks = [list(windows[i::k]) for i in range(k)]
    parts = executor.map(_evaluate_chunk, [(setting, c, pols) for c in chunks], on_done=on_done)
    # undo the round-robin split: window i went to chunk i % k
    return [parts[i % k][i // k] for i in range(len(windows))]


def _policy_metrics(results: Sequence[WindowResult], name: str) -> PolicyMetrics:
    ratios = np.array([r.outcomes[name].cost_usd / r.on_demand_usd for r in results])
    omni = np.array([r.omniscient_usd / r.on_demand_usd for r in results])
    spot = sum(r.outcomes[name].spot_hours for r in results)
    omni_spot = sum(r.omniscient.spot_hours for r in results)
    return {
        "mean_cost_vs_on_demand": round(float(ratios.mean()), 4),
        "p75_cost_vs_on_demand": round(float(np.percentile(ratios, 75)), 4),
        "mean_cost_vs_omniscient": round(float(ratios.mean() / omni.mean()), 4),
        "deadline_misses": int(sum(r.outcomes[name].missed for r in results)),
        "spot_hours_vs_omniscient": round(spot / omni_spot, 4) if omni_spot > 0 else None,
        "changeovers_per_window": round(
            float(np.mean([r.outcomes[name].changeovers for r in results])), 2
        ),
        "decided_by": decided_by(name),
    }


def _block(results: Sequence[WindowResult], policies: Sequence[str]) -> DeadlineBlock:
    """Metrics of one set of windows: per policy, omniscient, gap closure."""
    pol = {name: _policy_metrics(results, name) for name in policies}
    omni_ratio = float(np.mean([r.omniscient_usd / r.on_demand_usd for r in results]))
    pol["omniscient"] = {
        "mean_cost_vs_on_demand": round(omni_ratio, 4),
        "p75_cost_vs_on_demand": round(
            float(np.percentile([r.omniscient_usd / r.on_demand_usd for r in results], 75)), 4
        ),
        "mean_cost_vs_omniscient": 1.0,
        "deadline_misses": int(sum(r.omniscient.missed for r in results)),
        "spot_hours_vs_omniscient": 1.0,
        "changeovers_per_window": round(
            float(np.mean([r.omniscient.changeovers for r in results])), 2
        ),
        "decided_by": decided_by("omniscient"),
    }
    gap: dict[str, float | None] = {}
    if "greedy" in pol:
        greedy = pol["greedy"]["mean_cost_vs_on_demand"]
        for name in ("uniform_progress", "spotfolio"):
            if name in pol:
                span = greedy - omni_ratio
                cost = pol[name]["mean_cost_vs_on_demand"]
                gap[name] = round((cost - omni_ratio) / span, 4) if span > 1e-9 else None
    return {"windows": len(results), "policies": pol, "gap_closure_vs_greedy": gap}


def summarize(
    results: Sequence[WindowResult], policies: Sequence[str] = POLICIES
) -> DeadlineSummary:
    """The setting's JSON block (see the module docstring)."""
    if not results:
        return {"windows": 0, "policies": {}, "gap_closure_vs_greedy": {}, "quadrants": {}}
    quads: dict[str, list[WindowResult]] = {}
    for r in results:
        quads.setdefault(r.quadrant, []).append(r)
    block = _block(results, policies)
    return {
        "windows": block["windows"],
        "policies": block["policies"],
        "gap_closure_vs_greedy": block["gap_closure_vs_greedy"],
        "quadrants": {q: _block(rs, policies) for q, rs in sorted(quads.items())},
    }


def run(
    data: BenchData,
    windows: int,
    seed: int,
    *,
    setting: DeadlineSetting | None = None,
    policies: Sequence[str] = POLICIES,
    workers: int = 1,
    executor: Executor | None = None,
    on_done: Callable[[int, int], None] | None = None,
) -> DeadlineSummary:
    """The deadline block of the bench: ``windows`` start points per (trace,
    job fraction)."""
    setting = setting or DeadlineSetting()
    wins = sample_windows(data.traces, setting, windows, seed)
    results = evaluate(setting, wins, policies, workers=workers, executor=executor,
                       on_done=on_done)  # fmt: skip
    out = summarize(results, policies)
    out["setting"] = {
        "compute_hours": setting.compute_hours,
        "changeover_hours": setting.changeover_hours,
        "price_ratio": setting.price_ratio,
        "job_fractions": list(FRACTIONS),
        "decision_tick_max_s": DECISION_TICK_S,
        "traces": len({w.trace for w in wins}),
    }
    return out
