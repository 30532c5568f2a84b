"""The serving-fleet setting of the benchmark (docs/docs/benchmarks.md).

Owns: grouping traces into fleets (the zones of one collection replayed
together), drawing windows, running every rule and the hindsight ILP on each,
and the metrics: availability (share of time ``>= N`` ready), unserved
replica-hours, cost / on-demand, cost / omniscient, overall and per group.

Must not: decide (``policies.online.fleet``; the ``spotfolio`` entry is the
daemon's code, ``broker.bench.product.fleet``) or simulate
(``broker.simulate.fleet``).

Every policy entry names the code that made its decisions (``decided_by``,
``module:qualname``): the rule's class, or the ``DECIDED_BY`` of the module
that registers it (the product's adapter names the lifecycle manager), and
the hindsight ILP for ``omniscient``.

Failure domains side by side (``FleetSummary.failure_domains``): the
``spotfolio`` entry again on the same windows with snapshots that carry the
zones whose revocations came together in the record so far
(``ProductFleet(failure_domains=True)``), its unserved replica-hours, cost
and availability beside the entry's, and the windows where any figure moved.

Every rule sees the same windows, sizes, prices, cold start and notice. A
group's traces are cut to a common start and length and coarsened to ticks of
at most ``FLEET_TICK_S`` (never shorter than the cold start); a window's
``past`` is the ``PRIOR_HOURS`` before it (what a broker watching the zones
knows when the service starts). Costs are ratios, so on-demand costs 1 per
replica-hour and spot ``1 / k`` unless the trace names its price.
"""

from __future__ import annotations

import sys
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import NotRequired, TypedDict

import numpy as np

from broker.bench import BenchData
from broker.bench.product.fleet import ProductFleet
from broker.scale.fanout import Executor, ExecutorSpec
from broker.simulate import AvailabilityTrace, coarsen
from broker.simulate.fleet import (
    NOTICE_S,
    FleetOutcome,
    FleetSetting,
    FleetWindow,
    simulate_fleet,
    spot_prices,
)
from broker.simulate.omniscient import omniscient_fleet
from policies.online.registry import FLEET_POLICIES, fleet_policy

__all__ = [
    "FLEET_TICK_S",
    "POLICIES",
    "SIZES",
    "WINDOW_HOURS",
    "DomainsBlock",
    "FleetBlock",
    "FleetMetrics",
    "FleetResult",
    "FleetSettingInfo",
    "FleetSummary",
    "decided_by",
    "evaluate_window",
    "fleet_groups",
    "run",
    "sample_windows",
    "summarize",
]

FLEET_TICK_S = 300  # coarser ticks would hide revocations shorter than a tick
WINDOW_HOURS = 24.0  # a day of serving per window
PRIOR_HOURS = 168.0
SIZES = (4, 8)  # "N e.g. 4-8" (docs/docs/benchmarks.md)
POLICIES = tuple(FLEET_POLICIES)


class FleetMetrics(TypedDict):
    """One policy's figures over a set of fleet-days, and the code that made
    its decisions (``decided_by``, ``module:qualname``)."""

    decided_by: str
    availability: float
    unserved_replica_hours: float
    cost_vs_on_demand: float
    cost_vs_omniscient: float


class FleetBlock(TypedDict):
    windows: int
    policies: dict[str, FleetMetrics]


class FleetSettingInfo(TypedDict):
    replicas: list[int]
    cold_start_s: int
    notice_s: dict[str, int]
    price_ratio: float
    window_hours: float
    groups: list[str]


class DomainFigures(TypedDict):
    availability: float
    unserved_replica_hours: float
    cost_vs_on_demand: float


class DomainsBlock(TypedDict):
    """``spotfolio`` without and with failure domains, on the same windows."""

    windows: int
    windows_changed: int
    without: DomainFigures
    with_domains: DomainFigures


class FleetSummary(FleetBlock):
    """The setting's JSON block: all fleet-days, per trace group, failure
    domains side by side (when ``spotfolio`` ran), and (from ``run``) the
    setting."""

    groups: dict[str, FleetBlock]
    failure_domains: NotRequired[DomainsBlock]
    setting: NotRequired[FleetSettingInfo]


@dataclass(frozen=True)
class FleetResult:
    window: FleetWindow
    replicas: int
    outcomes: dict[str, FleetOutcome]
    omniscient_usd: float
    on_demand_usd: float
    with_domains: FleetOutcome | None = None  # ``spotfolio`` with failure domains


def fleet_groups(
    traces: Sequence[AvailabilityTrace], cold_start_s: int
) -> list[tuple[str, list[AvailabilityTrace]]]:
    """Groups of two zones or more, each trace at a common tick and length."""
    by: dict[str, list[AvailabilityTrace]] = {}
    for tr in traces:
        by.setdefault(tr.group, []).append(tr)
    out = []
    for name, members in sorted(by.items()):
        zones = {m.zone for m in members}
        if len(zones) < 2 or len(zones) != len(members):
            continue
        gap = max(m.tick_s for m in members)
        if any(gap % m.tick_s for m in members):
            continue  # ticks that do not nest cannot be replayed together
        target = max(gap, FLEET_TICK_S // gap * gap, -(-cold_start_s // gap) * gap)
        coarse = [coarsen(coarsen(m, gap), target) for m in members]
        n = min(c.ticks for c in coarse)
        out.append((name, [_cut(c, n) for c in sorted(coarse, key=lambda c: c.zone)]))
    return out


def _cut(tr: AvailabilityTrace, n: int) -> AvailabilityTrace:
    return AvailabilityTrace(
        tr.name, tr.zone, tr.group, tr.tick_s, tr.held[:n], tr.spot_price_ratio, tr.provider
    )


def sample_windows(
    traces: Sequence[AvailabilityTrace], setting: FleetSetting, per_group: int, seed: int
) -> list[FleetWindow]:
    """``per_group`` random day-long windows per fleet group (seeded)."""
    out = []
    for name, members in fleet_groups(traces, setting.cold_start_s):
        tick = members[0].tick_s
        held = np.vstack([m.held for m in members])
        n = int(WINDOW_HOURS * 3600) // tick
        if held.shape[1] < n:
            continue
        providers = {m.provider for m in members}
        provider = next(iter(providers)) if len(providers) == 1 else None
        rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
        prior = int(PRIOR_HOURS * 3600) // tick
        for s in sorted(int(x) for x in rng.integers(0, held.shape[1] - n + 1, size=per_group)):
            out.append(
                FleetWindow(
                    group=name,
                    zones=tuple(m.zone for m in members),
                    tick_s=tick,
                    held=held[:, s : s + n],
                    past=held[:, max(0, s - prior) : s],
                    spot_price_ratio=tuple(m.spot_price_ratio for m in members),
                    start_tick=s,
                    notice_s=min(NOTICE_S.get(m.provider, setting.notice_s) for m in members),
                    provider=provider,
                )
            )
    return out


def evaluate_window(
    setting: FleetSetting, window: FleetWindow, policies: Sequence[str] = POLICIES
) -> FleetResult:
    outcomes = {p: simulate_fleet(setting, window, fleet_policy(p)) for p in policies}
    domains = None
    if "spotfolio" in policies:
        domains = simulate_fleet(setting, window, ProductFleet(failure_domains=True))
    opt = omniscient_fleet(
        window.held,
        setting.replicas,
        spot_prices(setting, window),
        setting.on_demand_usd_per_hour,
        window.tick_s,
        setting.cold_start_s,
    )
    hours = window.hours - setting.cold_start_s / 3600.0
    od = setting.replicas * hours * setting.on_demand_usd_per_hour
    return FleetResult(window, setting.replicas, outcomes, opt.cost_usd, od, domains)


def _evaluate_job(job: tuple[FleetSetting, FleetWindow, tuple[str, ...]]) -> FleetResult:
    return evaluate_window(*job)


def decided_by(name: str) -> str:
    """``module:qualname`` of the code that decides for the rule ``name``:
    the rule class, or the ``DECIDED_BY`` its module names (the product's
    adapter names the daemon's lifecycle manager); ``omniscient`` is the
    hindsight ILP."""
    if name == "omniscient":
        return f"{omniscient_fleet.__module__}:{omniscient_fleet.__qualname__}"
    factory = FLEET_POLICIES.get(name)
    named = getattr(sys.modules.get(factory.__module__), "DECIDED_BY", None)
    return named if isinstance(named, str) else f"{factory.__module__}:{factory.__qualname__}"


def _metrics(results: Sequence[FleetResult], name: str) -> FleetMetrics:
    outs = [r.outcomes[name] for r in results]
    return {
        "decided_by": decided_by(name),
        "availability": round(float(np.mean([o.availability for o in outs])), 5),
        "unserved_replica_hours": round(float(sum(o.unserved_replica_hours for o in outs)), 3),
        "cost_vs_on_demand": round(
            float(
                np.mean([o.cost_usd / r.on_demand_usd for o, r in zip(outs, results, strict=True)])
            ),
            4,
        ),
        "cost_vs_omniscient": round(
            float(
                np.mean([o.cost_usd / r.omniscient_usd for o, r in zip(outs, results, strict=True)])
            ),
            4,
        ),
    }


def summarize(results: Sequence[FleetResult], policies: Sequence[str] = POLICIES) -> FleetSummary:
    if not results:
        return {"windows": 0, "policies": {}, "groups": {}}
    block: dict[str, FleetMetrics] = {name: _metrics(results, name) for name in policies}
    block["omniscient"] = {
        "decided_by": decided_by("omniscient"),
        "availability": 1.0,
        "unserved_replica_hours": 0.0,
        "cost_vs_on_demand": round(
            float(np.mean([r.omniscient_usd / r.on_demand_usd for r in results])), 4
        ),
        "cost_vs_omniscient": 1.0,
    }
    groups: dict[str, list[FleetResult]] = {}
    for r in results:
        groups.setdefault(r.window.group, []).append(r)
    out: FleetSummary = {
        "windows": len(results),
        "policies": block,
        "groups": {
            g: {"windows": len(rs), "policies": {p: _metrics(rs, p) for p in policies}}
            for g, rs in sorted(groups.items())
        },
    }
    paired = [r for r in results if r.with_domains is not None and "spotfolio" in r.outcomes]
    if paired:
        out["failure_domains"] = _domains_block(paired)
    return out


def _figures(pairs: Sequence[tuple[FleetOutcome, FleetResult]]) -> DomainFigures:
    return {
        "availability": round(float(np.mean([o.availability for o, _ in pairs])), 5),
        "unserved_replica_hours": round(float(sum(o.unserved_replica_hours for o, _ in pairs)), 3),
        "cost_vs_on_demand": round(
            float(np.mean([o.cost_usd / r.on_demand_usd for o, r in pairs])), 4
        ),
    }


def _domains_block(results: Sequence[FleetResult]) -> DomainsBlock:
    without = [(r.outcomes["spotfolio"], r) for r in results]
    with_d = [(r.with_domains, r) for r in results if r.with_domains is not None]
    changed = sum(
        1
        for (a, _), (b, _) in zip(without, with_d, strict=True)
        if (a.unserved_replica_hours, a.cost_usd, a.launches)
        != (b.unserved_replica_hours, b.cost_usd, b.launches)
    )
    return {
        "windows": len(results),
        "windows_changed": changed,
        "without": _figures(without),
        "with_domains": _figures(with_d),
    }


def run(
    data: BenchData,
    windows: int,
    seed: int,
    *,
    setting: FleetSetting | None = None,
    sizes: Sequence[int] = SIZES,
    policies: Sequence[str] = POLICIES,
    workers: int = 1,
    executor: Executor | None = None,
    on_done: Callable[[int, int], None] | None = None,
) -> FleetSummary:
    """The fleet block of the bench: ``windows`` days per group, each size;
    ``workers > 1`` spreads them over a local Dask cluster, ``executor`` over
    an open one (same results: ``broker.scale.fanout``)."""
    base = setting or FleetSetting()
    wins = sample_windows(data.traces, base, windows, seed)
    jobs = [(replace(base, replicas=n), w, tuple(policies)) for n in sizes for w in wins]
    if executor is not None:
        results = executor.map(_evaluate_job, jobs, on_done=on_done)
    elif workers > 1 and len(jobs) >= 2 * workers:
        with Executor(ExecutorSpec(workers=workers)) as ex:
            results = ex.map(_evaluate_job, jobs, on_done=on_done)
    else:
        results = Executor(ExecutorSpec()).map(_evaluate_job, jobs, on_done=on_done)
    out = summarize(results, policies)
    out["setting"] = {
        "replicas": list(sizes),
        "cold_start_s": base.cold_start_s,
        "notice_s": dict(NOTICE_S),
        "price_ratio": base.price_ratio,
        "window_hours": WINDOW_HOURS,
        "groups": sorted({w.group for w in wins}),
    }
    return out
