"""The what-if report as CSV: one row per scenario, raw numbers.

Owns: ``render_csv(doc)``: the scenarios table (``sections.SCENARIO_COLUMNS``:
the name, the billed total, its tiers and the work carried forward in USD
(total = tiers - carried forward), the saving as a fraction,
unmet unit-hours, revocations, break-glass, catch-up and planned USD), the
document's numbers unrounded and unformatted, so a spreadsheet sums them to
the JSON's totals. The other blocks (sweep, stress, risk) are in the JSON
and HTML outputs; one CSV holds one table.

Must not: format numbers (no ``$``, no thousands separators) or compute one.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping

from broker.cli.report.sections import scenario_table

__all__ = ["render_csv"]


def render_csv(doc: Mapping[str, object]) -> str:
    t = scenario_table(doc)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([c.key for c in t.columns])
    for r in t.rows:
        w.writerow(["" if v is None else v for v in r])
    return buf.getvalue()
