"""The README and the docs site say what is so: links resolve, commands run.

Owns the checks on README.md, CHANGELOG.md, CONTRIBUTING.md and docs/: every
relative link names a file in the repository, no page carries development
history or a path outside the repository, the generated reference pages are
what `docs/hooks/reference.py` writes now, the site builds with
`mkdocs build --strict`, and every shell command shown in the README and the
docs runs as written (slow: each is a full run) or is listed in
``NOT_RUNNABLE`` with the reason. Must not edit any page.
"""

from __future__ import annotations

import os
import re
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


SHELL_FENCE = re.compile(r"```(sh|bash|console|shell)\n(.*?)```", re.S)
FILE_FENCE = re.compile(r"```ya?ml\n# ([\w.-]+\.ya?ml)\b[^\n]*\n(.*?)```", re.S)
WALK = ROOT / "docs" / "walkthrough-bill.md"

# Commands shown in the docs that this test does not run: (pattern, reason).
NOT_RUNNABLE: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(rx), why)
    for rx, why in (
        (r"^(python3 -m venv|\. \.venv/bin/activate|pip install)",
         "an install line: a fresh venv from PyPI (checked from a clean clone by hand)"),
        (r"^pytest\b", "the test suite itself (CI runs it)"),
        (r"^(COVERAGE_CORE=\S+ )?coverage (run|report)\b",
         "the fast suite under coverage, and its report: CI runs both"),
        (r"^(ruff|mypy|mkdocs build)\b",
         "a developer check: CI runs it; test_site_builds_strict builds the site"),
        (r"^(cd terraform|terraform )", "needs a cloud account: terraform apply creates resources"),
        (r"^curl ", "needs a daemon left running on its metrics port"),
        (r"--usage bill\.csv", "needs your bill: the walk-through runs it on its sample bill"),
        (r"^spotfolio sweep ", "needs ./data (the public recorded traces) and, with"
         " --scheduler, a Dask cluster"),
        (r"(--data|--market) \./data|open\('deadline\.json'\)",
         "needs ./data, the public recorded traces (see Markets)"),
        (r"zsh_source|fish_source", "needs that shell (zsh, fish) and its config directory"),
    )
)  # fmt: skip


def _shell_lines(page: Path) -> list[str]:
    """Every command of the page's sh/bash/console blocks, in order (a line
    split at ``&&``; console blocks: the ``$`` lines)."""
    lines = []
    for lang, block in SHELL_FENCE.findall(page.read_text()):
        for raw in block.replace("\\\n", " ").splitlines():
            line = raw.strip()
            if lang == "console":
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            if line and not line.startswith("#"):
                lines += [part.strip() for part in line.split(" && ")]
    return lines


def _not_runnable(line: str) -> str | None:
    return next((why for rx, why in NOT_RUNNABLE if rx.search(line)), None)


def _commands(page: Path) -> list[str]:
    return [c for c in _shell_lines(page) if c.startswith(("spotfolio", "python -c"))]


COMMAND_PAGES = [p for p in PAGES if p not in GENERATED and _shell_lines(p)]
README_COMMANDS = _commands(ROOT / "README.md")
WALK_COMMANDS = _commands(WALK)


def test_documented_commands_found() -> None:
    assert "spotfolio whatif --usage bill.csv" in README_COMMANDS
    assert "spotfolio whatif" in README_COMMANDS  # after the install line's &&
    assert WALK_COMMANDS[0].startswith("python -c") and len(WALK_COMMANDS) == 2
    assert ROOT / "docs" / "tutorials" / "platform.md" in COMMAND_PAGES


def test_every_not_runnable_reason_is_still_needed() -> None:
    lines = [ln for page in COMMAND_PAGES for ln in _shell_lines(page)]
    for rx, _why in NOT_RUNNABLE:
        assert any(rx.search(ln) for ln in lines), f"{rx.pattern!r} matches no command: drop it"


def _run(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # as a reader's shell would: this interpreter's venv first on PATH
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": path, "HOME": str(cwd)}
    return subprocess.run(["bash", "-c", line], cwd=cwd, capture_output=True, text=True, env=env)


def _clone(tmp_path: Path) -> Path:
    """A directory that reads like a clone (its top-level entries linked in)
    and takes what the commands write."""
    for entry in ROOT.iterdir():
        if not entry.name.startswith("."):
            (tmp_path / entry.name).symlink_to(entry)
    return tmp_path


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p in COMMAND_PAGES if p != WALK], ids=_rel)
def test_page_commands_run_as_written(page: Path, tmp_path: Path) -> None:
    """Each command of the page, in order, in one directory (the page's
    ``# NAME.yaml`` blocks written there first), or a reason it cannot run."""
    cwd = _clone(tmp_path)
    for name, body in FILE_FENCE.findall(page.read_text()):
        (cwd / name).write_text(body)
    for line in _shell_lines(page):
        if _not_runnable(line):
            continue
        run = _run(line, cwd)
        assert run.returncode == 0, f"{_rel(page)}: {line}: {run.stderr[-2000:]}"
        if page.name == "README.md" and line == "spotfolio whatif":
            readme = page.read_text()
            shown = readme.split("```text\n", 1)[1].split("```", 1)[0].rstrip("\n")
            assert shown in run.stdout, "the README's example output"


@pytest.mark.slow
def test_walkthrough_runs_as_written(tmp_path: Path) -> None:
    text = WALK.read_text()
    for line in WALK_COMMANDS:
        run = _run(line, tmp_path)
        assert run.returncode == 0, f"{line}: {run.stderr[-2000:]}"
    for header in ("== As billed: the bill itself", "== Scenarios, billed on the actual"):
        shown = text.split(header, 1)[1].split("```", 1)[0]
        assert header + shown.rstrip("\n") in run.stdout, f"the page's '{header}' block"
