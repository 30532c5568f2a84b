"""The import direction markets <- policies <- broker, enforced by reading
every module's imports (static: no module is executed)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("markets", "policies", "broker")
# policies may import only the core data model of markets.
POLICIES_MAY_IMPORT = {"markets", "markets.model", "markets.errors", "markets.clock"}
# broker may import the core of markets, never an adapter (outside composition roots).
BROKER_MARKET_CORE = {
    "markets",
    "markets.model",
    "markets.protocols",
    "markets.registry",
    "markets.errors",
    "markets.clock",
    "markets.fleet",  # instances, requests, notices: values at the cloud boundary
    "markets.ttl",  # named cache lifetimes (constants only)
}
# Composition roots: the only broker modules that may name concrete adapters.
COMPOSITION_ROOTS = ("broker/cli/", "broker/daemon", "broker/wiring")
SDK_HOMES = {
    "boto3": "markets/aws/",
    "botocore": "markets/aws/",
    "google": "markets/gcp/",
    "pulp": "broker/optimizer/",
    "apscheduler": "broker/daemon",
}


def _imports(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module, node.lineno))
            # "from markets import model" names markets.model
            out += [(f"{node.module}.{a.name}", node.lineno) for a in node.names]
    return out


def _modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def _violations(path: Path) -> list[str]:
    rel = path.relative_to(ROOT).as_posix()
    pkg = rel.split("/")[0]
    bad: list[str] = []
    for name, line in _imports(path):
        top = name.split(".")[0]
        if pkg == "markets" and top in ("policies", "broker"):
            bad.append(f"{rel}:{line} markets imports {name}")
        if pkg == "policies":
            if top == "broker":
                bad.append(f"{rel}:{line} policies imports {name}")
            if (
                top == "markets"
                and not any(
                    name == m or name.startswith(m + ".") for m in POLICIES_MAY_IMPORT - {"markets"}
                )
                and name != "markets"
            ):
                bad.append(f"{rel}:{line} policies imports non-model {name}")
        if pkg == "broker" and top == "markets" and not rel.startswith(COMPOSITION_ROOTS):
            mod = ".".join(name.split(".")[:2])
            if mod not in BROKER_MARKET_CORE and not _is_symbol(name):
                bad.append(f"{rel}:{line} broker imports adapter {name}")
        if top in SDK_HOMES and not rel.startswith(SDK_HOMES[top]):
            bad.append(f"{rel}:{line} {top} imported outside {SDK_HOMES[top]}")
    return bad


def _is_symbol(name: str) -> bool:
    """``from markets.model import Pool`` yields markets.model.Pool: allowed if the
    module part is core."""
    parts = name.split(".")
    return len(parts) >= 3 and ".".join(parts[:2]) in BROKER_MARKET_CORE


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_module_respects_import_direction(path: Path) -> None:
    assert _violations(path) == []


def test_checker_catches_a_violation(tmp_path: Path) -> None:
    fake = ROOT / "markets" / "_direction_probe.py"
    fake.write_text("from broker.cli import app\nimport pulp\n")
    try:
        found = _violations(fake)
    finally:
        fake.unlink()
    assert any("markets imports broker" in v for v in found)
    assert any("pulp imported outside" in v for v in found)
