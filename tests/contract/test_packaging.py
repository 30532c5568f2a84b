"""The package as pip sees it: extras, lockfiles and markers, read statically.

Three promises, each of which a one-line change elsewhere can break:

1. Every third-party library the three packages import is a hard dependency
   or sits in ``markets.extras.EXTRAS`` under an extra that ``pyproject.toml``
   declares with that library in it (a new hard import of an SDK fails here).
2. The lockfiles under ``requirements/`` satisfy ``pyproject.toml``: every
   requirement of the use a file serves is pinned there within its specifier
   (a dependency added without re-running ``requirements/compile`` fails here).
3. The test extra pulls every other extra, so the suite sees every adapter.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections import defaultdict
from importlib.metadata import PackageNotFoundError, packages_distributions, requires
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from markets.extras import EXTRAS
from tests.paths import REPO

PACKAGES = ("markets", "policies", "broker")
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
OPTIONAL: dict[str, list[str]] = PYPROJECT["optional-dependencies"]
# lockfile -> the extras it is compiled with (requirements/compile)
LOCKS = {
    "base.txt": (),
    "image.txt": ("aws", "gcp", "postgres"),
    "test.txt": ("test",),
}


def _requirements(extras: tuple[str, ...]) -> list[Requirement]:
    """The project's requirements with ``extras``, self-references
    (``spotfolio[aws,gcp]``) expanded."""
    out = [Requirement(r) for r in PYPROJECT["dependencies"]]
    todo, seen = list(extras), set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for text in OPTIONAL[extra]:
            req = Requirement(text)
            if canonicalize_name(req.name) == PYPROJECT["name"]:
                todo += sorted(req.extras)
            else:
                out.append(req)
    return out


def _names(reqs: list[Requirement]) -> set[str]:
    return {canonicalize_name(r.name) for r in reqs}


def _closure(names: set[str]) -> set[str]:
    """``names`` and everything their installed metadata requires, extras
    aside (``pydantic`` brings ``pydantic-core``, which we import)."""
    out, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in out:
            continue
        out.add(name)
        try:
            reqs = requires(name) or []
        except PackageNotFoundError:
            continue
        for text in reqs:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(req.name))
    return out


def _runtime_imports(path: Path) -> set[str]:
    """Top-level names a module imports, except under ``if TYPE_CHECKING:``
    (stubs such as ``mypy_boto3_ec2`` are the test extra's business)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def _third_party() -> dict[str, list[str]]:
    """Third-party import name -> the modules that import it."""
    users: dict[str, list[str]] = defaultdict(list)
    for pkg in PACKAGES:
        for path in sorted((REPO / pkg).rglob("*.py")):
            for name in _runtime_imports(path):
                if name in sys.stdlib_module_names or name in PACKAGES or name == "__future__":
                    continue
                users[name].append(path.relative_to(REPO).as_posix())
    return users


def test_every_third_party_import_is_a_dependency_or_its_extra() -> None:
    hard = _closure(_names(_requirements(())))
    dists = packages_distributions()
    bad = []
    for name, users in sorted(_third_party().items()):
        provided_by = {canonicalize_name(d) for d in dists.get(name, [])}
        if provided_by & hard:
            continue
        extra = EXTRAS.get(name)
        if extra is None:
            bad.append(f"{name} (imported by {users[0]}) is neither a dependency nor in EXTRAS")
        elif not provided_by & _closure(_names(_requirements((extra,)))):
            bad.append(f"{name}: EXTRAS says extra {extra!r}, which does not install it")
    assert bad == []


def test_every_extra_in_the_table_is_declared_and_not_a_hard_dependency() -> None:
    hard = _names(_requirements(()))
    dists = packages_distributions()
    for name, extra in EXTRAS.items():
        assert extra in OPTIONAL, f"{name}: extra {extra!r} is not in pyproject.toml"
        provided_by = {canonicalize_name(d) for d in dists.get(name, [])}
        assert provided_by, f"{name} is not installed (the test extra should pull it)"
        assert not provided_by & hard, f"{name} is a hard dependency, not an extra"


def test_the_test_extra_pulls_every_other_extra() -> None:
    pulled = _names(_requirements(("test",)))
    for extra in OPTIONAL:
        assert _names(_requirements((extra,))) <= pulled, extra


_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^ ;\\]+)", re.MULTILINE)


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_lockfile_pins_every_requirement_within_its_specifier(lock: str) -> None:
    text = (REPO / "requirements" / lock).read_text()
    assert "--hash=sha256:" in text, f"{lock} has no hashes (pip --require-hashes needs them)"
    pins: dict[str, list[Version]] = defaultdict(list)
    for name, version in _PIN.findall(text):
        pins[canonicalize_name(name)].append(Version(version))
    for req in _requirements(LOCKS[lock]):
        name = canonicalize_name(req.name)
        assert pins[name], f"{lock}: {req.name} is not pinned (run requirements/compile)"
        for version in pins[name]:  # one pin per Python-version marker
            assert req.specifier.contains(version, prereleases=True), (
                f"{lock}: {req.name}=={version} is outside {req} (run requirements/compile)"
            )


@pytest.mark.parametrize("pkg", PACKAGES)
def test_each_package_ships_its_py_typed_marker(pkg: str) -> None:
    assert (REPO / pkg / "py.typed").is_file()
    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "py.typed" in data["package-data"][pkg]
