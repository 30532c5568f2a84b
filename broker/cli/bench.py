"""``spotfolio simulate`` and ``spotfolio bench``: replay traces, baselines side by side.

Owns: the two commands and turning their data sources into
``broker.bench.BenchData`` (this module is a composition root, so it may name
the concrete markets): ``--data DIR`` -> every spot trace ``markets.files.datadir``
finds in a directory of public datasets; no ``--data`` -> the
embedded default market's pools, sampled per tick. Must not: simulate or score
anything itself (``broker.simulate``, ``broker.bench``).

``spotfolio simulate --setting deadline|fleet [--data DIR] [--policy P]
[--windows N] [--seed S] [--json]`` prints one setting's per-policy table;
``spotfolio bench [--data DIR] [--windows N] [--seed S] [--json] [--out
DIR] [--soak]`` runs every setting plus the machinery measurements (see
``broker.bench.runner`` for the JSON object); ``--soak`` adds the 90-day
soak and the 300-workload plan (``runner.ASKED_HOOKS``, ~35 minutes).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import click

from broker.cli._numbers import ranged
from broker.cli._output import console, emit_json
from broker.cli.progress import progress
from broker.jsondoc import obj
from markets.errors import InputError
from markets.extras import require
from markets.numbers import MAX_COUNT

# The benchmark's stack (the settings, the replay market, the loaders) is
# imported when a command runs, not when ``spotfolio`` starts (``broker.cli``).
if TYPE_CHECKING:
    from broker.bench import BenchData
    from broker.simulate import AvailabilityTrace
    from markets.default.market import DefaultMarket
    from markets.files.traces import SpotTrace

__all__ = [
    "DEFAULT_MARKET_TYPES",
    "bench_command",
    "default_market_data",
    "default_market_traces",
    "directory_data",
    "simulate_command",
    "traces_from_spot_traces",
]

# Default market pools replayed when no --data is given: one GPU type per
# provider and size class, every zone the catalog lists for it (fleets are
# the zones of one type).
DEFAULT_MARKET_TYPES = ("p3.2xlarge", "g5.12xlarge", "a2-highgpu-1g")
DEFAULT_MARKET_DAYS = 45  # as long as the longest published trace (45-day V100)
DEFAULT_MARKET_TICK_S = 600
DEFAULT_WINDOWS = 40  # per trace and job fraction / per zone group: <= 10 min on 2 cores


def traces_from_spot_traces(spot_traces: Sequence[SpotTrace]) -> tuple[AvailabilityTrace, ...]:
    """``markets.files.traces.SpotTrace`` -> ``AvailabilityTrace`` (held = all nodes).

    A fleet group is one collection (provider, instance type, kind, nodes,
    start date) across zones."""
    from broker.simulate import AvailabilityTrace

    out = []
    for tr in spot_traces:
        day = tr.start.date().isoformat()
        group = f"{tr.provider}/{tr.instance_type}/{tr.kind}/{tr.nodes}-node/{day}"
        out.append(
            AvailabilityTrace(
                name=f"{tr.provider}/{tr.zone}/{tr.instance_type}/{tr.kind}/{tr.nodes}-node/{day}",
                zone=tr.zone,
                group=group,
                tick_s=max(1, round(tr.gap_seconds)),
                held=tr.held.to_numpy(),
                provider=tr.provider,
            )
        )
    return tuple(out)


def directory_data(root: Path) -> BenchData:
    """Every trace under ``root`` (a directory of public datasets, ``markets.files.datadir``),
    and the replay market over everything found there (for the settings that
    need prices and hourly history)."""
    from broker.bench import BenchData
    from markets.files.datadir import discover
    from markets.replay.market import ReplayMarket

    inv = discover(root)
    traces = traces_from_spot_traces(inv.spot_traces)
    if not traces:
        raise InputError(
            "--data",
            None,
            "a directory with spot availability traces (JSON with gap_seconds)",
            got=str(root),
        )
    market = ReplayMarket.from_inventory(inv)
    return BenchData(source=str(root), traces=traces, market=market, inventory=inv)


def default_market_traces(
    market: DefaultMarket,
    instance_types: tuple[str, ...] = DEFAULT_MARKET_TYPES,
    *,
    days: int = DEFAULT_MARKET_DAYS,
    tick_s: int = DEFAULT_MARKET_TICK_S,
) -> tuple[AvailabilityTrace, ...]:
    """The default market's pools as 1-node traces: a tick is held when spot
    could be had for most of it and no revocation landed in it (what one
    instance held there would see)."""
    import numpy as np

    from broker.simulate import AvailabilityTrace

    start = market.span()[0]
    ticks = days * 86400 // tick_s
    edges = [start + k * _seconds(tick_s) for k in range(ticks + 1)]
    out = []
    for pool in market.pools():
        if pool.instance_type not in instance_types:
            continue
        share = np.array(
            [market.available_share(pool.key, a, b) for a, b in itertools.pairwise(edges)]
        )
        events = market.revocation_events(pool.key, edges[0], edges[-1])
        hit = np.zeros(ticks, dtype=np.bool_)
        if len(events):
            offs = ((events - edges[0]).total_seconds().to_numpy() // tick_s).astype(int)
            hit[offs[(offs >= 0) & (offs < ticks)]] = True
        out.append(
            AvailabilityTrace(
                name=f"default/{pool.key}",
                zone=pool.zone,
                group=f"default/{pool.provider.value}/{pool.region}/{pool.instance_type}",
                tick_s=tick_s,
                held=(share >= 0.5) & ~hit,
                provider=pool.provider.value,
            )
        )
    return tuple(out)


def _seconds(s: int) -> timedelta:
    return timedelta(seconds=s)


def default_market_data(seed: int = 7, days: int = DEFAULT_MARKET_DAYS) -> BenchData:
    """The embedded default market (no credentials, no files)."""
    from broker.bench import BenchData
    from markets.default.market import open_default_market

    market = open_default_market(seed=seed, days=days)
    return BenchData(
        source=f"default market (seed {seed}, {days} days)",
        traces=default_market_traces(market, days=days),
        market=market,
    )


def _load(data: Path | None, seed: int) -> BenchData:
    return directory_data(data) if data is not None else default_market_data(seed=7)


_DATA = click.option(
    "--data",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="A directory of public spot datasets (every spot trace found is replayed); "
    "default: the embedded default market.",
)
_WINDOWS = click.option(
    "--windows",
    type=ranged(ge=1, le=100_000, integer=True),
    default=None,
    help=f"Windows per trace and job fraction (deadline) and per zone group (fleet) "
    f"[default: {DEFAULT_WINDOWS}; smaller for CI].",
)
_SEED = click.option(
    "--seed",
    type=ranged(ge=0, le=MAX_COUNT, integer=True),
    default=0,
    show_default=True,
    help="Window draws.",
)
_WORKERS = click.option(
    "--workers",
    type=ranged(ge=1, le=256, integer=True),
    default=1,
    show_default=True,
    help="Local Dask worker processes for the deadline and fleet windows (same results).",
)
_JSON = click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")


@click.command(name="simulate")
@click.option(
    "--setting",
    type=click.Choice(["deadline", "fleet", "portfolio"]),
    required=True,
    help="Which benchmark setting to replay.",
)
@_DATA
@click.option("--policy", default=None, help="Replay only this policy (and the references).")
@_WINDOWS
@_SEED
@_WORKERS
@_JSON
def simulate_command(
    setting: str,
    data: Path | None,
    policy: str | None,
    windows: int | None,
    seed: int,
    workers: int,
    as_json: bool,
) -> None:
    """Replay one setting over the data and print its per-policy table."""
    from broker.bench import deadline, fleet, runner

    n = windows or DEFAULT_WINDOWS
    out: Mapping[str, object]
    with progress("simulate") as say:  # on a terminal only (broker.cli.progress)
        say("loading the data")
        bench_data = _load(data, seed)

        def step(done: int, total: int) -> None:
            say.step(done, total, f"{setting} windows")

        if setting == "deadline":
            pols = deadline.POLICIES if policy is None else _deadline_policies(policy)
            out = deadline.run(bench_data, n, seed, policies=pols, workers=workers, on_done=step)
        elif setting == "fleet":
            pols = fleet.POLICIES if policy is None else _fleet_policies(policy)
            out = fleet.run(bench_data, n, seed, policies=pols, workers=workers, on_done=step)
        else:
            say("portfolio")
            hook = runner.SETTINGS.get("portfolio")
            out = hook(bench_data, n, seed) if hook is not None else {}
        if not out and not as_json:
            click.echo("portfolio setting: not plugged in yet (broker.bench.runner.SETTINGS)")
            return
    result = {"setting": setting, "source": bench_data.source, "windows": n, "seed": seed, **out}
    if as_json:
        emit_json(result)
    else:
        _print_setting(setting, out)


def _deadline_policies(name: str) -> tuple[str, ...]:
    from broker.bench.rules import DEADLINE_POLICIES

    name = DEADLINE_POLICIES.canonical(name)  # unknown -> InputError naming --policy
    refs = ("on_demand", "greedy") if name in ("uniform_progress", "spotfolio") else ("on_demand",)
    return tuple(dict.fromkeys((*refs, name)))


def _fleet_policies(name: str) -> tuple[str, ...]:
    from policies.online.registry import FLEET_POLICIES

    name = FLEET_POLICIES.canonical(name)
    return tuple(dict.fromkeys(("on_demand", name)))


_SHORT = {  # table headers (the JSON keeps the long names)
    "mean_cost_vs_on_demand": "cost/OD",
    "p75_cost_vs_on_demand": "p75 cost/OD",
    "mean_cost_vs_omniscient": "cost/omni",
    "deadline_misses": "misses",
    "spot_hours_vs_omniscient": "spot h/omni",
    "changeovers_per_window": "changeovers",
    "availability": "availability",
    "unserved_replica_hours": "unserved rep-h",
    "cost_vs_on_demand": "cost/OD",
    "cost_vs_omniscient": "cost/omni",
}


def _print_setting(setting: str, out: Mapping[str, object]) -> None:
    from rich.table import Table

    pol = out.get("policies")
    if not isinstance(pol, Mapping) or not pol:
        console.print(f"{setting}: no windows (traces too short for the setting?)")
        return
    rows = {name: m if isinstance(m, Mapping) else {} for name, m in pol.items()}
    cols = list(next(iter(rows.values())))
    table = Table(title=f"{setting}: {out.get('windows')} windows", title_justify="left")
    table.add_column("policy", no_wrap=True)
    for c in cols:
        table.add_column(_SHORT.get(c, c), justify="right")
    for name, m in rows.items():
        table.add_row(name, *("-" if m.get(c) is None else str(m.get(c)) for c in cols))
    console.print(table)
    gap = out.get("gap_closure_vs_greedy")
    if isinstance(gap, Mapping) and gap:
        console.print("gap-closure vs greedy: " + ", ".join(f"{k} {v}" for k, v in gap.items()))


@click.command(name="bench")
@_DATA
@_WINDOWS
@_SEED
@_WORKERS
@_JSON
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="Write the results page here: DIR/results.md for a directory (charts as PNG beside it).",
)
@click.option(
    "--soak",
    "soak",
    is_flag=True,
    help="Also run the 90-day daemon soak and the 300-workload plan (~35 minutes).",
)
def bench_command(
    data: Path | None,
    windows: int | None,
    seed: int,
    workers: int,
    as_json: bool,
    out: Path | None,
    soak: bool,
) -> None:
    """Every setting side by side on the same data, plus the machinery."""
    from broker.bench.report import PAGE, write_report
    from broker.bench.runner import ASKED_HOOKS, run_bench

    if out is not None:  # before the run: a bad --out fails now, not after the benches
        if out.is_dir() or not out.suffix:
            out = out / PAGE
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError("--out", None, f"a file in a directory we can create ({e.strerror})",
                             got=str(out)) from e  # fmt: skip
        if not os.access(out.parent, os.W_OK | os.X_OK):
            raise InputError("--out", None, "a file in a writable directory", got=str(out))
        require("matplotlib", "--out", got=str(out))  # the report's charts
    n = windows or DEFAULT_WINDOWS
    with progress("bench") as say:  # on a terminal only (broker.cli.progress)
        result = run_bench(
            lambda: _load(data, seed), windows=n, seed=seed, workers=workers, progress=say,
            asked=ASKED_HOOKS if soak else frozenset(),
        )  # fmt: skip
    if out is not None:
        files = write_report(result, out)
        if not as_json:
            console.print("wrote " + ", ".join(str(f) for f in files))
    if as_json:
        emit_json(result)
        return
    for setting in ("deadline", "fleet"):
        _print_setting(setting, obj(result.get(setting)))
    targets = result.get("targets")
    for t in map(obj, targets if isinstance(targets, list) else []):
        mark = "met" if t["met"] is True else "NOT met" if t["met"] is False else "-"
        console.print(f"{t['setting']}.{t['metric']} {t['op']} {t['limit']}: {t['value']} ({mark})")
