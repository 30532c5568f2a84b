"""Renderers of the what-if report, one module per format, over its JSON document.

Owns: ``FORMATS`` (``text``, ``json``, ``csv``, ``markdown``, ``html``: the
names ``--format`` takes, each to its renderer), ``render(fmt, doc, width)``
and ``text_width`` (the width text is laid out in: ``COLUMNS`` when set, the
terminal's when stdout is one, else 80). Each renderer takes the
``spotfolio.whatif/1`` document (a ``Mapping``, as ``json.loads`` gives it)
and returns the whole output as one string, so a file is written whole.

``output`` sends a rendered report to stdout or writes it whole to ``--out``.

Must not: import the computation (``broker.whatif``, the planner, markets).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Mapping

from broker.cli.report.csvfile import render_csv
from broker.cli.report.htmlpage import render_html
from broker.cli.report.jsontext import render_json
from broker.cli.report.markdown import render_markdown
from broker.cli.report.text import render_text

__all__ = ["DEFAULT_WIDTH", "FORMATS", "render", "text_width"]

DEFAULT_WIDTH = 80  # a file or a pipe: the width a reader's terminal most likely has

Renderer = Callable[[Mapping[str, object], int], str]
FORMATS: dict[str, Renderer] = {
    "text": render_text,
    "json": lambda doc, _w: render_json(doc),
    "csv": lambda doc, _w: render_csv(doc),
    "markdown": lambda doc, _w: render_markdown(doc),
    "html": lambda doc, _w: render_html(doc),
}


def text_width(isatty: bool | None = None) -> int:
    """``COLUMNS`` if set to a number, else the terminal's width when stdout
    is a terminal, else ``DEFAULT_WIDTH``."""
    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    tty = sys.stdout.isatty() if isatty is None else isatty
    if tty:
        return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
    return DEFAULT_WIDTH


def render(fmt: str, doc: Mapping[str, object], width: int = DEFAULT_WIDTH) -> str:
    """The document in format ``fmt`` (a key of ``FORMATS``)."""
    return FORMATS[fmt](doc, width)
