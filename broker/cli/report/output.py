"""Where a rendered what-if report goes: stdout, or a file named by ``--out``.

Owns: ``format_of`` (the format an ``--out`` suffix names, used when
``--format`` is not given), ``check_out`` (``--out``'s directory exists and is writable and the
suffix does not contradict ``--format``; checked before the run, so a typo
fails in a second, not after an hour of planning), ``emit`` (the rendered
text to stdout, or to the file whole or not at all through
``broker.atomic``) and ``wrote`` (the one line naming each written file, on
stderr so that stdout stays the report).

Must not: render (``broker.cli.report.render``) or compute.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from broker.atomic import atomic_output
from markets.errors import InputError

__all__ = ["SUFFIXES", "check_out", "emit", "format_of", "wrote"]

# The suffixes each format is written under; another format's suffix is a mistake.
SUFFIXES = {
    "text": (".txt", ".text", ".log", ""),
    "json": (".json",),
    "csv": (".csv",),
    "markdown": (".md", ".markdown"),
    "html": (".html", ".htm"),
}


def format_of(path: Path | None) -> str | None:
    """The format ``path``'s suffix names (``r.html``: ``html``), if any."""
    if path is None or not path.suffix:
        return None
    return next((f for f, ss in SUFFIXES.items() if path.suffix.lower() in ss), None)


def check_out(path: Path, fmt: str) -> None:
    """An ``InputError`` naming ``--out`` if ``path`` cannot take ``fmt``."""
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise InputError("--out", None, "a file name, not a directory", got=str(path))
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise InputError("--out", None, "a file in an existing, writable directory", got=str(path))
    suffix = path.suffix.lower()
    known = {s for ss in SUFFIXES.values() for s in ss if s}
    if suffix in known and suffix not in SUFFIXES[fmt]:
        want = " or ".join(s for s in SUFFIXES[fmt] if s) or "any other suffix"
        raise InputError(
            "--out", None, f"a name ending in {want} for --format {fmt}", got=str(path)
        )


def wrote(path: Path) -> None:
    click.echo(f"wrote {path}", err=True)


def emit(text: str, out: Path | None) -> None:
    """``text`` to stdout, or written whole to ``out`` and named on stderr."""
    if out is None:
        click.echo(text, nl=False)
        return
    try:
        with atomic_output(out) as tmp:
            tmp.write_text(text, encoding="utf-8")
    except OSError as e:
        raise InputError("--out", None, f"a writable file ({e.strerror})", got=str(out)) from e
    wrote(out)
