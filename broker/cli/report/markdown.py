"""The what-if report as Markdown (GitHub-flavoured pipe tables).

Owns: ``render_markdown(doc)``: a heading per section, a pipe table per
table (every row with the header's number of cells, ``|`` in a cell
escaped, numbers right-aligned) followed by its notes, prose as bullets; a
table without rows is its ``empty`` line. Money is whole dollars
(``$81,905``): a Markdown page has the room a terminal lacks.

Must not: compute a figure.
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.cli.report.money import amount, full_usd, share
from broker.cli.report.sections import Cell, Column, Table, sections, title

__all__ = ["render_markdown", "table_markdown"]


def _cell(value: Cell, column: Column) -> str:
    if value is None:
        text = "-"
    elif isinstance(value, str):
        text = value
    elif column.kind == "usd":
        text = full_usd(float(value), signed=column.key.startswith("delta"))
    elif column.kind == "share":
        text = share(float(value))
    elif column.kind == "amount":
        text = amount(float(value))
    else:
        text = str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def table_markdown(t: Table) -> list[str]:
    head = "| " + " | ".join(c.title.replace("|", "\\|") for c in t.columns) + " |"
    rule = "|" + "|".join("---:" if c.kind != "text" else ":---" for c in t.columns) + "|"
    body = [
        "| " + " | ".join(_cell(v, c) for v, c in zip(r, t.columns, strict=True)) + " |"
        for r in t.rows
    ]
    return [head, rule, *body]


def render_markdown(doc: Mapping[str, object]) -> str:
    lines = [f"# {title(doc)}"]
    for sec in sections(doc):
        lines += ["", f"## {sec.heading}"]
        for t in sec.tables:
            lines.append("")
            if t.title:
                lines += [f"### {t.title}", ""]
            lines += table_markdown(t) if t.rows else [t.empty]
            if t.notes:
                lines += ["", *(f"- {note.strip()}" for note in t.notes)]
        if sec.lines:
            lines.append("")
            lines += [f"- {line.strip()}" for line in sec.lines]
    return "\n".join(lines) + "\n"
