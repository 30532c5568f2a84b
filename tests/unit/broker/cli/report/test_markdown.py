"""The Markdown report: every table well formed (a header, an alignment
rule, rows with as many cells as the header), pipes in cells escaped."""

from __future__ import annotations

import re

from broker.cli.report.markdown import render_markdown, table_markdown
from broker.cli.report.sections import Column, Table
from tests.unit.broker.cli.report.sample import sample_doc

_RULE = re.compile(r"^\|(:?-{3,}:?\|)+$")


def cells(line: str) -> list[str]:
    """A pipe-table row's cells (``\\|`` is a pipe inside a cell)."""
    assert line.startswith("| ") and line.endswith(" |"), line
    return [c.strip() for c in re.split(r"(?<!\\)\|", line[1:-1])]


def tables(text: str) -> list[list[str]]:
    """The blocks of consecutive lines starting with ``|``."""
    out: list[list[str]] = []
    block: list[str] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            block.append(line)
        elif block:
            out.append(block)
            block = []
    return out


def assert_well_formed(text: str) -> int:
    found = tables(text)
    for block in found:
        assert len(block) >= 3, block  # header, rule, at least one row
        n = len(cells(block[0]))
        assert _RULE.match(block[1]) and block[1].count("|") == n + 1, block[1]
        for row in block[2:]:
            assert len(cells(row)) == n, row
    return len(found)


def test_every_table_is_well_formed() -> None:
    text = render_markdown(sample_doc())
    assert assert_well_formed(text) >= 6  # advice, scenarios, risk x2, stress, sweep
    assert text.startswith("# What-if over 72 h")
    assert "## What to do" in text and "| spotfolio | $36,600 |" in text


def test_a_pipe_in_a_cell_is_escaped() -> None:
    t = Table("t", "", (Column("name", "a|b"),), (("x|y",),))
    lines = table_markdown(t)
    assert cells(lines[0]) == ["a\\|b"] and cells(lines[2]) == ["x\\|y"]
