"""The floor plan, enforced by reading every module's imports (static: no
module is executed; imports under ``TYPE_CHECKING`` and inside functions
count like any other).

Three rules:

1. **Layers, as a table.** Each part of the tree may import only the parts its
   row names (``LAYERS``): ``markets`` <- ``policies`` <- ``broker``, and
   inside ``markets`` the core every layer may import, below the adapters.
   The composition roots (``COMPOSITION_ROOTS``, one per use) are the only
   broker modules that may name a concrete adapter; everyone else opens one
   through ``markets.registry``.
2. **One home per SDK** (``SDK_HOMES``).
3. **No import circle** (strongly connected components of the module graph)
   and **no flat prefix families** (``daemon_a.py``, ``daemon_b.py``: a
   package by concept instead).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

from tests.paths import REPO as ROOT

PACKAGES = ("markets", "policies", "broker")

# The core of ``markets``: values, protocols and plumbing every layer may import.
MARKETS_CORE = frozenset(
    "markets." + m
    for m in (
        "model",
        "cloud_fleet",
        "errors",
        "clock",
        "protocols",
        "registry",
        "ttl",
        "options",
        "keys",
        "validation",
        "numbers",
        "catalog",
        "commitments",
        # which instance counts against which account quota: values only
        "quotas",
        # reserved-ahead capacity (blocks, reservations): values only
        "blocks",
        # a market seen through a change to its snapshots: no I/O of its own
        "wrapped",
        # providers of several clouds acted in as one: routing, no I/O of its own
        "clouds",
        # a market with a bill's own prices: a wrapper over values, no I/O
        "billed",
        "cache",
        "escape",
        "redaction",
        "secretref",
        "extras",
        # spot price movement (volatility, regimes, zone spread): values only
        "price_analytics",
    )
) | {"markets"}
CORE = "markets core"

# part of the tree -> the parts it may import (the most specific row wins).
LAYERS: dict[str, frozenset[str]] = {
    "markets": frozenset({CORE}),  # the core modules themselves
    "markets.hazard": frozenset({CORE, "markets.hazard", "markets.files"}),
    # the advisor loader converts buckets with the advisor legend's figures
    "markets.files": frozenset({CORE, "markets.files", "markets.hazard.prior"}),
    "markets.default": frozenset({CORE, "markets.default", "markets.hazard"}),
    "markets.replay": frozenset({CORE, "markets.replay", "markets.files", "markets.hazard"}),
    "markets.aws": frozenset({CORE, "markets.aws", "markets.hazard", "markets.files"}),
    "markets.gcp": frozenset({CORE, "markets.gcp", "markets.files", "markets.hazard"}),
    "markets.sim": frozenset({CORE, "markets.sim"}),
    # the CloudWatch reader makes its one AWS call through markets.aws's SDK home
    "markets.signals": frozenset({CORE, "markets.signals", "markets.aws"}),
    "markets.usage": frozenset({CORE, "markets.usage"}),
    "policies": frozenset({CORE, "policies"}),
    "broker": frozenset({CORE, "policies", "broker"}),
}
# The only modules that may name a concrete adapter (market or provider), one
# per use. Everything else is handed its market and provider, or opens one by
# name through ``markets.registry``.
COMPOSITION_ROOTS = {
    "broker.cli": "the command line",
    "broker.daemon.wiring": "the daemon's production wiring",
    "broker.daemon.accelerated": "the simulated account (the daemon over markets.sim)",
    "broker.bench.runner": "the benchmark suite",
    # the daemon's objects replayed on a market built from a trace (its hazard
    # on markets.hazard's prior, as a market adapter reports it)
    "broker.bench.product": "the benches' replay of the daemon's decision code",
    # the hazard calibration on the loaded traces, with the replay market's priors
    "broker.bench.markets": "the benchmark's market measurements",
    # the accelerated daemon over a simulated account it saves and restores
    # across the kills it makes
    "broker.bench.soak": "the soak of the daemon on the simulated cloud",
}
ADAPTERS = (
    "markets.hazard",
    "markets.files",
    "markets.default",
    "markets.replay",
    "markets.aws",
    "markets.gcp",
    "markets.sim",
    "markets.signals",
    "markets.usage",
)
SDK_HOMES = {
    "boto3": "markets.aws",
    "botocore": "markets.aws",
    "google": "markets.gcp",
    "pulp": "broker.planning.optimizer",
    "apscheduler": "broker.daemon.schedule",
    "duckdb": ("markets.usage", "broker.scale.table"),  # billing exports; the sweep's Parquet
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


MODULES = {_module_name(p): p for p in _modules()}


def _resolve(name: str) -> str:
    """The project module an imported name denotes (``markets.model.Pool`` ->
    ``markets.model``)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def _imports(path: Path) -> list[tuple[str, int]]:
    """Every imported name with its line: modules, and ``from m import x`` as
    ``m.x`` (so ``from markets import model`` names ``markets.model``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    out: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                # ``from pkg import sub`` depends on pkg.sub, not on pkg's __init__
                out.append((sub if sub in MODULES else node.module, node.lineno))
    return out


def _part(module: str) -> str:
    """The part of the tree a project module belongs to (``markets`` core,
    ``markets.aws``, ``policies``, ``broker``)."""
    if module in MARKETS_CORE:
        return CORE
    for adapter in ADAPTERS:
        if module == adapter or module.startswith(adapter + "."):
            return adapter
    return module.split(".")[0]


def _row(module: str) -> frozenset[str]:
    part = _part(module)
    return LAYERS["markets" if part == CORE else part]


def _is_root(module: str) -> bool:
    return any(module == r or module.startswith(r + ".") for r in COMPOSITION_ROOTS)


def _violations(path: Path, module: str | None = None) -> list[str]:
    module = module or _module_name(path)
    rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
    allowed = _row(module)
    bad: list[str] = []
    for name, line in sorted(set(_imports(path))):
        top = name.split(".")[0]
        if top in SDK_HOMES:
            found = SDK_HOMES[top]
            homes = (found,) if isinstance(found, str) else found
            if not any(module == h or module.startswith(h + ".") for h in homes):
                bad.append(f"{rel}:{line} {top} imported outside {' or '.join(homes)}")
            continue
        if top not in PACKAGES:
            continue
        target = _resolve(name)
        if not target:
            continue
        part = _part(target)
        if part in allowed or any(target == a or target.startswith(a + ".") for a in allowed):
            continue
        if module.startswith("broker") and part in ADAPTERS and _is_root(module):
            continue
        bad.append(f"{rel}:{line} {module} ({_part(module)}) imports {target} ({part})")
    return bad


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_module_respects_the_layer_table(path: Path) -> None:
    assert _violations(path) == []


def test_every_composition_root_exists() -> None:
    for root in COMPOSITION_ROOTS:
        assert root in MODULES, f"composition root {root} is not a module"


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in MODULES.items():
        for name, _ in _imports(path):
            target = _resolve(name)
            if target and target != module:
                graph[module].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle() -> None:
    # A package's __init__ re-exporting its modules is not a circle by itself:
    # a module importing ``pkg.sub`` depends on ``pkg.sub``, not on ``pkg``.
    assert _cycles(_graph()) == []


def test_no_flat_prefix_family() -> None:
    """``x_a.py`` beside ``x_b.py`` (or ``x.py``) in one folder is a package
    split by line count, not by concept."""
    families: list[str] = []
    for folder in {p.parent for p in MODULES.values()}:
        stems = [p.stem.lstrip("_") for p in folder.glob("*.py") if p.stem != "__init__"]
        prefixes: dict[str, set[str]] = defaultdict(set)
        for s in stems:
            if "_" in s:
                prefixes[s.split("_")[0]].add(s)
        for prefix, members in prefixes.items():
            if prefix in stems:
                members = members | {prefix}
            if len(members) > 1:
                families.append(f"{folder.relative_to(ROOT)}: {sorted(members)}")
    assert families == []


def test_checker_catches_each_kind_of_violation(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from broker.cli import app\nimport pulp\nfrom markets.aws.market import AwsMarket\n"
    )
    found = _violations(probe, "markets.probe")
    assert any("imports broker.cli" in v for v in found)
    assert any("pulp imported outside" in v for v in found)
    assert any("imports markets.aws.market" in v for v in found)
    # a broker module outside the roots may not name an adapter; a root may
    probe.write_text("from markets.aws.market import AwsMarket\n")
    assert _violations(probe, "broker.planning.probe")
    assert _violations(probe, "broker.cli.probe") == []
    # policies may not import broker
    probe.write_text("from broker.planning.plan import Plan\n")
    assert _violations(probe, "policies.probe")


def test_cycle_finder_finds_a_circle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
