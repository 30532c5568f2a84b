"""The README and the docs site say what is so: links resolve, commands run.

Owns the checks on README.md, CHANGELOG.md, CONTRIBUTING.md and docs/: every
relative link names a file in the repository, no page carries development
history or a path outside the repository, the generated reference pages are
what `docs/hooks/reference.py` writes now, the site builds with
`mkdocs build --strict`, and every `spotfolio` command of the README and the
bill walk-through runs as written (slow: each is a full run). Must not edit
any page.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(
    [
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
        ROOT / "CONTRIBUTING.md",
        *(ROOT / "docs").rglob("*.md"),
    ]
)
GENERATED = {ROOT / "docs/reference/cli.md", ROOT / "docs/reference/schemas.md"}
LINK = re.compile(r"\]\(([^)\s]+)\)")
HISTORY = re.compile(r"\bsession \d+|\bissue \d+|\.\./shared|shared/design|economics\.md", re.I)
FENCE = re.compile(r"```sh\n(.*?)```", re.S)


def _rel(p: Path) -> str:
    return str(p.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_relative_links_resolve(page: Path) -> None:
    missing = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = (page.parent / target.split("#", 1)[0]).resolve()
        if not path.exists() or ROOT not in path.parents:
            missing.append(target)
    assert missing == [], f"{_rel(page)}: links to nothing in the repository: {missing}"


@pytest.mark.parametrize("page", [p for p in PAGES if p not in GENERATED], ids=_rel)
def test_no_history_and_no_outside_path(page: Path) -> None:
    hits = [m.group(0) for m in HISTORY.finditer(page.read_text())]
    assert hits == [], f"{_rel(page)}: development history or outside paths: {hits}"


def test_readme_is_short() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


def test_generated_reference_is_current() -> None:
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        import reference
    finally:
        sys.path.pop(0)
    assert (ROOT / "docs/reference/cli.md").read_text() == reference.cli_page(), (
        "docs/reference/cli.md is stale: run python docs/hooks/reference.py"
    )
    assert (ROOT / "docs/reference/schemas.md").read_text() == reference.schema_page(), (
        "docs/reference/schemas.md is stale: run python docs/hooks/reference.py"
    )


def test_site_builds_strict(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="mkdocs is in requirements/test.txt")
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").exists()


def _commands(page: Path) -> list[str]:
    lines = []
    for block in FENCE.findall(page.read_text()):
        parts = [part for ln in block.splitlines() for part in ln.split(" && ")]
        lines += [p for p in parts if p.startswith(("spotfolio ", "python -c")) or p == "spotfolio"]
    return lines


README_COMMANDS = _commands(ROOT / "README.md")
WALK_COMMANDS = _commands(ROOT / "docs" / "walkthrough-bill.md")


def test_documented_commands_found() -> None:
    assert "spotfolio whatif --usage bill.csv" in README_COMMANDS
    assert WALK_COMMANDS[0].startswith("python -c") and len(WALK_COMMANDS) == 2


def _run(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # as a reader's shell would: this interpreter's venv first on PATH
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": path}
    return subprocess.run(shlex.split(line), cwd=cwd, capture_output=True, text=True, env=env)


@pytest.mark.slow
def test_walkthrough_runs_as_written(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "walkthrough-bill.md").read_text()
    for line in WALK_COMMANDS:
        run = _run(line, tmp_path)
        assert run.returncode == 0, f"{line}: {run.stderr[-2000:]}"
    for header in ("== As billed: the bill itself", "== Scenarios, billed on the actual"):
        shown = text.split(header, 1)[1].split("```", 1)[0]
        assert header + shown.rstrip("\n") in run.stdout, f"the page's '{header}' block"


@pytest.mark.slow
@pytest.mark.parametrize("line", [c for c in README_COMMANDS if "--usage" not in c])
def test_readme_command_runs_as_written(line: str, tmp_path: Path) -> None:
    run = _run(line, tmp_path)
    assert run.returncode == 0, f"{line}: {run.stderr[-2000:]}"
    if line == "spotfolio whatif":
        readme = (ROOT / "README.md").read_text()
        shown = readme.split("```text\n", 1)[1].split("```", 1)[0].rstrip("\n")
        assert shown in run.stdout, "the README's example output"
