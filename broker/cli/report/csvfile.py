"""The what-if report as CSV: one table, raw numbers.

Owns: ``render_csv(doc, table)`` and ``TABLES`` (every table name a
what-if document can hold, so ``--table`` is checked before the run).
``--format csv`` writes the scenarios table
(``sections.SCENARIO_COLUMNS``: the name, the billed total, its tiers and the
work carried forward in USD (total = tiers - carried forward), the saving as
a fraction, unmet unit-hours, revocations, break-glass, catch-up and planned
USD); ``table`` names another of the report's tables (``csv_tables(doc)``:
What to do's ``advice_commitments``, ``advice_first_week`` (every pool, one
number a cell: the hourly counts stay in the JSON), ``advice_cost_by_workload``,
``advice_cost_by_team``, ``advice_totals``, and the other sections' tables).
The document's numbers unrounded and unformatted, so a spreadsheet sums them
to the JSON's totals. One CSV holds one table.

Must not: format numbers (no ``$``, no thousands separators) or compute one.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping

from broker.cli.report.sections import Table, scenario_table, sections

__all__ = ["TABLES", "csv_tables", "render_csv"]

# Every table ``sections`` can make, in the report's order; a document holds
# those of the blocks it has (``csv_tables``). ``tests/unit/broker/cli/report/
# test_csv.py`` checks that a full document's tables are these.
TABLES = (
    "scenarios",
    "as_billed",
    "as_billed_days",
    "owned",
    "next_buy",
    "advice_commitments",
    "advice_lookback",
    "advice_first_week",
    "advice_cost_by_workload",
    "advice_cost_by_team",
    "advice_totals",
    "risk_usd",
    "risk_other",
    "stress",
    "committed_sweep",
)


def _tables(doc: Mapping[str, object]) -> dict[str, Table]:
    found = {t.name: t for s in sections(doc, pools=None) for t in s.tables}
    return {"scenarios": scenario_table(doc), **found}


def csv_tables(doc: Mapping[str, object]) -> list[str]:
    """The names ``render_csv`` takes for ``doc``."""
    return list(_tables(doc))


def render_csv(doc: Mapping[str, object], table: str = "scenarios") -> str:
    """Table ``table`` of ``doc`` (a ``KeyError`` naming the choices if it has none)."""
    found = _tables(doc)
    if table not in found:
        raise KeyError(f"no table {table!r} in this document: {', '.join(found)}")
    t = found[table]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([c.key for c in t.columns])
    for r in t.rows:
        w.writerow(["" if v is None else v for v in r])
    return buf.getvalue()
