"""The what-if report as plain text that fits a terminal (80 columns when
the output is not one).

Owns: ``render_text(doc, width)`` and ``layout(table, width)``. Money is
condensed (``$81.9k``). A table wider than ``width`` wraps: its first column
(the row's name) is repeated and the other columns go into as many stacked
blocks as needed; when even the name and one column do not fit, each row is
printed vertically, a ``header: value`` line each. Prose lines wrap at word
boundaries; a single word longer than the width loses its indent, then is
cut after its ``/``s (a pool key, a path), a part longer still kept whole.
Each table's notes follow it.

Must not: read the terminal (the caller passes ``width``) or compute a figure.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping

from broker.cli.report.money import amount, share, short_usd
from broker.cli.report.sections import Cell, Column, Table, sections, title

__all__ = ["GAP", "cell_text", "layout", "render_text"]

GAP = "  "  # between columns


def cell_text(value: Cell, column: Column) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if column.kind == "usd":
        return short_usd(float(value), signed=column.key.startswith("delta"))
    if column.kind == "share":
        return share(float(value))
    if column.kind == "amount":
        return amount(float(value))
    return str(value)


def _wrap(line: str, width: int) -> list[str]:
    indent = line[: len(line) - len(line.lstrip())]
    out = textwrap.wrap(
        line.strip(),
        width,
        initial_indent=indent,
        subsequent_indent=indent + "  ",
        break_long_words=False,
        break_on_hyphens=False,
    ) or [""]
    return [piece for s in out for piece in _fit(s, width)]


def _fit(line: str, width: int) -> list[str]:
    """A line still wider than ``width`` (one long word): unindented, then
    cut after its ``/``s (a pool key, a path); a part wider still is whole."""
    if len(line) <= width:
        return [line]
    word = line.lstrip()
    if len(word) <= width:
        return [word]
    out = [""]
    for part in re.split(r"(?<=/)", word):
        if out[-1] and len(out[-1]) + len(part) > width:
            out.append("")
        out[-1] += part
    return out


def _block(
    cols: list[int], headers: list[str], body: list[list[str]], right: list[bool]
) -> list[str]:
    widths = [max(len(headers[c]), *(len(r[c]) for r in body)) for c in cols]
    out = []
    for row in [headers, *body]:
        cells = [
            row[c].rjust(w) if right[c] else row[c].ljust(w)
            for c, w in zip(cols, widths, strict=True)
        ]
        out.append(GAP.join(cells).rstrip())
    return out


def layout(table: Table, width: int) -> list[str]:
    """``table`` in lines no wider than ``width`` (module docstring)."""
    headers = [c.title for c in table.columns]
    body = [[cell_text(v, c) for v, c in zip(r, table.columns, strict=True)] for r in table.rows]
    right = [c.kind != "text" for c in table.columns]
    if not body:
        return _wrap(table.empty, width)
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(headers)]
    gap = len(GAP)
    if sum(widths) + gap * (len(widths) - 1) <= width:
        return _block(list(range(len(headers))), headers, body, right)
    # wrap: the name column, then as many others as fit, block after block
    if len(widths) > 1 and widths[0] + gap + max(widths[1:]) <= width:
        out: list[str] = []
        chunk: list[int] = []
        used = widths[0]
        for i in range(1, len(widths)):
            if chunk and used + gap + widths[i] > width:
                out += [*_block([0, *chunk], headers, body, right), ""]
                chunk, used = [], widths[0]
            chunk.append(i)
            used += gap + widths[i]
        return out + _block([0, *chunk], headers, body, right)
    # vertical: a row at a time
    out = []
    for r in body:
        out.append(f"{headers[0]}: {r[0]}")
        for h, v in zip(headers[1:], r[1:], strict=True):
            out += _wrap(f"  {h}: {v}", width)
        out.append("")
    return out[:-1]


def render_text(doc: Mapping[str, object], width: int = 80) -> str:
    width = max(width, 20)
    lines = _wrap(title(doc), width)
    for sec in sections(doc):
        lines += ["", *_wrap(f"== {sec.heading}", width)]
        for i, t in enumerate(sec.tables):
            if i:
                lines.append("")
            if t.title:
                lines += _wrap(f"-- {t.title}", width)
            lines += layout(t, width)
            for note in t.notes:
                lines += _wrap(note, width)
        if sec.tables and sec.lines:
            lines.append("")
        for line in sec.lines:
            lines += _wrap(line, width)
    return "\n".join(lines) + "\n"
