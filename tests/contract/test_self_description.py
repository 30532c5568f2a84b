"""The product speaks of itself: no development history, no path outside it.

Reads every tracked file (``git ls-files``), README.md and docs/ included,
and fails on two kinds of phrase, each with the line it sits on:

1. **History** (``HISTORY``): a work session or wave by number, an issue by
   number ("issue N", "issue-N", "(#N)"), "tried, reverted", "it used to",
   "previously", "on main" (the branch), "before the change", "Before, ...",
   "the old code". What a line says must hold of the code as it is; how it
   came to be goes in the commit message. This file is not read: its
   examples are the phrases it looks for.
2. **Paths outside the checkout** (``OUTSIDE``): ``../shared``,
   ``/work/shared``, ``shared/data``, ``shared/design``, and the team's
   design notes by name (``economics.md``, ``ARCHITECTURE.md``, ``style.md``,
   a ``benchmarks.md`` that is not ``docs/benchmarks.md`` or a docs link). A
   user's clone has none of them: code cites the docs page that explains the
   concept (``docs/concepts/...``); tests reach the public data through
   ``tests.paths`` alone.

The patterns need a number or a fixed phrase, so a boto3 ``Session``, a
pytest session fixture or "issue" as a verb do not match. ``ALLOWED`` lists
the few (file, pattern) pairs that are legitimate, each with its reason.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.paths import REPO

HISTORY: dict[str, re.Pattern[str]] = {
    name: re.compile(rx, re.IGNORECASE)
    for name, rx in {
        "session N": r"\bsessions?[- ]?#?[0-9]",
        "issue N": r"\bissues?[- ]?#[0-9]|\bissues?[- ][0-9]",
        "(#N)": r"(?:\(|\b(?:see|fixes|closes|in|pr|issue)\s)#[0-9]+\b",
        "wave N": r"\bwaves?[- ][0-9]",
        "reverted": r"\breverted\b|\btried,? (?:and )?reverted\b",
        "used to": r"\b(?:it|they|this|we|which) used to\b",
        "previously": r"\bpreviously\b|\bformerly\b",
        "on main": r"\bon main\b",
        "the change": r"\b(?:before|after) the (?:change|fix|refactor|rewrite)\b(?!')",
        "moved once": r"\bmoved once\b",
        "now (since": r"\bnow \(since\b",
        "Before,": r"(?:^|[.(#]\s*|^\s+)(?-i:Before), ",
        "the old code": r"\bthe old (?:code|rule|model|way)\b",
    }.items()
}

OUTSIDE: dict[str, re.Pattern[str]] = {
    "../shared": re.compile(r"\.\./shared\b"),
    "/work/shared": re.compile(r"/work/shared\b"),
    "shared/data": re.compile(r"(?<![\w./-])shared/(?:data|design)\b"),
    "design note": re.compile(r"\b(?:economics|ARCHITECTURE|style)\.md\b"),
    "benchmarks.md": re.compile(r"(?<![\w/.-])(?<!\]\()benchmarks\.md\b"),
}

# (path, pattern name): why the phrase is legitimate there.
ALLOWED: dict[tuple[str, str], str] = {
    ("tests/paths.py", "../shared"): "the one place that knows where the public data sits",
    ("tests/docs/test_docs.py", "shared/data"): "the docs' own history pattern names the paths",
    ("mkdocs.yml", "benchmarks.md"): "the site's nav names its page docs/benchmarks.md",
}

SELF = "tests/contract/test_self_description.py"


def _tracked() -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True
    ).stdout.decode()
    return [
        p
        for p in out.split("\0")
        if p and p != SELF  # its examples match
    ]


def _offences(path: str, text: str, patterns: dict[str, re.Pattern[str]]) -> list[str]:
    found = []
    for no, line in enumerate(text.splitlines(), 1):
        for name, rx in patterns.items():
            if rx.search(line) and (path, name) not in ALLOWED:
                found.append(f"{path}:{no}: [{name}] {line.strip()}")
    return found


def _scan(patterns: dict[str, re.Pattern[str]]) -> list[str]:
    found: list[str] = []
    for path in _tracked():
        try:
            text = (REPO / path).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError):  # binary, or deleted in the worktree
            continue
        found += _offences(path, text, patterns)
    return found


needs_git = pytest.mark.skipif(
    not (REPO / ".git").exists(), reason=f"{REPO} is not a git checkout (no git ls-files)"
)


@needs_git
def test_no_development_history_in_tracked_files() -> None:
    found = _scan(HISTORY)
    assert not found, "development history (say it in the commit):\n" + "\n".join(found)


@needs_git
def test_no_path_outside_the_checkout_in_tracked_files() -> None:
    found = _scan(OUTSIDE)
    assert not found, "path outside the checkout:\n" + "\n".join(found)


@needs_git
def test_every_allowance_is_still_needed() -> None:
    patterns = {**HISTORY, **OUTSIDE}
    for path, name in ALLOWED:
        text = (REPO / path).read_text(encoding="utf-8")
        assert patterns[name].search(text), f"{path}: {name!r} no longer occurs; drop it"


@pytest.mark.parametrize(
    ("line", "name"),
    [
        ("# measured in session 9 on 2 cores", "session N"),
        ('"""Reaction benchmark (issue 6): notice -> launch."""', "issue N"),
        ("the issue-16 targets", "issue N"),
        ("as in the fix (#42)", "(#N)"),
        ("History: tried, reverted in wave 3", "reverted"),
        ("the command exits 1 (it used to exit 0)", "used to"),
        ("# On main: rc 0, no word of the budget", "on main"),
        ("alone. (Before, such a gang broke glass", "Before,"),
        ("# the old code gave f, e, f, d", "the old code"),
        ("reads ../shared/data/spot-availability-traces", "../shared"),
        ("copied from /work/shared/design/economics.md", "/work/shared"),
        ("a directory laid out like ``shared/data``", "shared/data"),
        ("formulas are exactly those of economics.md section 1", "design note"),
        ("# Stale market data: widen the risk margin (ARCHITECTURE.md).", "design note"),
        ("see design/style.md", "design note"),
        ('"""Reaction benchmark (benchmarks.md section 4)."""', "benchmarks.md"),
    ],
)
def test_the_patterns_catch_history_and_outside_paths(line: str, name: str) -> None:
    assert {**HISTORY, **OUTSIDE}[name].search(line)


@pytest.mark.parametrize(
    "line",
    [
        "session: boto3.Session | None = None,",
        '@pytest.fixture(scope="session")',
        "the token is reused for the session; start_new_session=True",
        "issue a GetSpotPlacementScores call; the issues it raises",
        'color: #222; stroke="#000"; key#1, key#2',
        "a key used to sign the hook body",
        "a revocation wave: size instances taken back",
        "mean-reverting log random walk",
        "Linux shared-tenancy EC2 rates; shared by the session",
        "from tests.paths import SHARED_DATA",
        "AWS caps spot at on-demand (since the 2017 pricing change)",
        "launched before it is an instance like any other; before this tick",
        "the deadline setting (docs/benchmarks.md); docs/concepts/market.md",
        "See [Benchmarks and sweeps](benchmarks.md) and docs/architecture.md",
    ],
)
def test_the_patterns_let_ordinary_words_through(line: str) -> None:
    assert not [n for n, rx in {**HISTORY, **OUTSIDE}.items() if rx.search(line)]
