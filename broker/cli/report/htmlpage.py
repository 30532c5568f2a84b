"""The what-if report as one self-contained HTML page.

Owns: ``render_html(doc)``: the sections every format has (``sections``,
What to do with every first-week pool) as headings, tables and paragraphs,
and a "Charts" section of inline SVG (``svg``): cost by tier per scenario
(totals and savings on the bars), the spotfolio scenario's planned cost by
tier over time (``timeline``), the committed sweep (``committed_sweep``),
the risk band (``risk``'s P10/P50/P90) and spot exposure by zone
(``spot_by_zone``). A chart whose block the
document lacks is replaced by a note saying what would produce it. The page
loads nothing: no script, no external style sheet, font or image, so it
opens offline and mails as one file.

Must not: compute a figure (only sums a stack to place its label) or fetch
anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape

from broker.cli.report import svg
from broker.cli.report.money import amount, full_usd, share, short_usd
from broker.cli.report.sections import (
    Cell,
    Column,
    Table,
    quantile_bands,
    rows,
    scenario_table,
    sections,
    title,
)
from broker.jsondoc import obj

__all__ = ["CHART_IDS", "render_html"]

CHART_IDS = ("chart-tiers", "chart-timeline", "chart-sweep", "chart-risk", "chart-zones")
_TIERS = (("committed", "committed"), ("on_demand", "on-demand"), ("spot", "spot"))

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 62em;
       color: #222; line-height: 1.4; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { border-bottom: 1px solid #ccc; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0 1em; font-size: .9em; }
th, td { padding: .25em .6em; border-bottom: 1px solid #eee; }
th { text-align: left; background: #f5f5f5; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
p.note { color: #666; font-style: italic; }
nav a { margin-right: 1em; }
svg.chart { display: block; margin: 1em 0; max-width: 100%; height: auto; }
"""


def _cell(value: Cell, column: Column) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if column.kind == "usd":
        return full_usd(float(value), signed=column.key.startswith("delta"))
    if column.kind == "share":
        return share(float(value))
    if column.kind == "amount":
        return amount(float(value))
    return str(value)


def _table(t: Table) -> str:
    if not t.rows:
        return f"<p>{escape(t.empty)}</p>"
    num = [c.kind != "text" for c in t.columns]

    def cls(i: int) -> str:
        return ' class="num"' if num[i] else ""

    head = "".join(f"<th{cls(i)}>{escape(c.title)}</th>" for i, c in enumerate(t.columns))
    body = "\n".join(
        "<tr>"
        + "".join(
            f"<td{cls(i)}>{escape(_cell(v, c))}</td>"
            for i, (v, c) in enumerate(zip(r, t.columns, strict=True))
        )
        + "</tr>"
        for r in t.rows
    )
    return (
        f'<table id="table-{escape(t.name)}"><thead><tr>{head}</tr></thead>\n'
        f"<tbody>{body}</tbody></table>"
    )


def _note(text: str) -> str:
    return f'<p class="note">{escape(text)}</p>'


def _num(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _list(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else []


def _tiers_chart(doc: Mapping[str, object]) -> str:
    t = scenario_table(doc)
    if not t.rows:
        return _note("No scenarios in the document.")
    stacks = [(label, t.values(f"{key}_usd")) for key, label in _TIERS]
    # a bar is what was paid; its label the total, net of work carried forward
    over = [
        short_usd(v) + (f" (net of {short_usd(a)} carried)" if a > 0 else "")
        for v, a in zip(t.values("total_cost_usd"), t.values("work_ahead_usd"), strict=True)
    ]
    under = [f"saves {share(v)}" if v > 0 else "" for v in t.values("savings_vs_on_demand")]
    return svg.stacked_bars(
        "chart-tiers",
        "Billed cost by tier per scenario",
        t.names(),
        stacks,
        short_usd,
        over=over,
        under=under,
    )


def _timeline_chart(doc: Mapping[str, object]) -> str:
    tl = obj(doc.get("timeline"))
    per = obj(tl.get("scenarios"))
    ours = obj(per.get("spotfolio"))
    if not ours:
        return _note("No timeline in the document (an older spotfolio wrote it without one).")
    step = int(_num(tl.get("step_hours")) or 24)
    series = [(label, [_num(v) for v in _list(ours.get(key))]) for key, label in _TIERS]
    n = max(len(v) for _, v in series)
    series = [(label, v + [0.0] * (n - len(v))) for label, v in series]
    unit = "day" if step == 24 else "week" if step == 168 else f"{step} h"
    cats = [str(i + 1) for i in range(n)]
    chart = svg.stacked_bars(
        "chart-timeline",
        f"Spotfolio's planned cost by tier per {unit}",
        cats,
        series,
        short_usd,
        rotate_labels=n > 14,
    )
    return chart + _note(
        f"Planned: the plan's counts at its prices, {unit} by {unit} ({tl.get('basis')}); "
        "the billed totals, on the actual market, are in the scenarios table."
    )


def _sweep_chart(doc: Mapping[str, object]) -> str:
    pts = rows(doc.get("committed_sweep"))
    if not pts:
        return _note("No committed sweep: run with --committed 0.4,0.6 to compare levels.")
    xs = [_num(p.get("share_of_peak")) for p in pts]
    ys = [_num(p.get("total_cost_usd")) for p in pts]
    labels = [short_usd(y) for y in ys]
    return svg.line_chart(
        "chart-sweep",
        "Committed sweep: billed total per level",
        xs,
        ys,
        lambda x: f"{x:.0%}",
        short_usd,
        x_label="committed, share of peak serving demand",
        labels=labels,
    )


def _risk_chart(doc: Mapping[str, object]) -> str:
    bands = quantile_bands(doc.get("risk"))
    if not bands:
        return _note("No risk band in the document: this what-if did not sample scenarios.")
    usd = [b for b in bands if "usd" in b[0] or "cost" in b[0]]
    other = [b for b in bands if b not in usd]
    out = []
    if usd:
        out.append(svg.band_chart("chart-risk", "Risk band: cost P10 / P50 / P90", usd, short_usd))
    if other:
        out.append(
            svg.band_chart(
                "chart-risk-other" if usd else "chart-risk",
                "Risk band: P10 / P50 / P90",
                other,
                amount,
            )
        )
    return "\n".join(out)


def _zones_chart(doc: Mapping[str, object]) -> str:
    found = [z for z in rows(doc.get("spot_by_zone")) if z.get("scenario") == "spotfolio"]
    if not found:
        if "spot_by_zone" in doc:
            return _note("Spotfolio's plan holds no spot.")
        return _note("No spot exposure by zone in the document.")
    bars = [
        (
            str(z.get("zone")),
            _num(z.get("instance_hours")),
            f"{share(_num(z.get('share')))} of spot, {amount(_num(z.get('instance_hours')))} "
            f"inst-h, {short_usd(_num(z.get('planned_usd')))}",
        )
        for z in found
    ]
    return svg.hbars("chart-zones", "Spotfolio's planned spot by zone (instance-hours)", bars)


def render_html(doc: Mapping[str, object]) -> str:
    secs = sections(doc, pools=None)  # a page lists every first-week pool
    body = [f"<h1>{escape(title(doc))}</h1>"]
    links = [(s.key, s.heading) for s in secs] + [("charts", "Charts")]
    body.append("<nav>" + "".join(f'<a href="#{k}">{escape(h)}</a>' for k, h in links) + "</nav>")
    for sec in secs:
        body.append(f'<section id="{escape(sec.key)}"><h2>{escape(sec.heading)}</h2>')
        for t in sec.tables:
            if t.title:
                body.append(f"<h3>{escape(t.title)}</h3>")
            body.append(_table(t))
            body += [f"<p>{escape(note.strip())}</p>" for note in t.notes]
        body += [f"<p>{escape(line.strip())}</p>" for line in sec.lines]
        body.append("</section>")
    body.append('<section id="charts"><h2>Charts</h2>')
    for heading, chart in (
        ("Cost by tier", _tiers_chart(doc)),
        ("Cost by tier over time", _timeline_chart(doc)),
        ("Committed sweep", _sweep_chart(doc)),
        ("Risk band", _risk_chart(doc)),
        ("Spot exposure by zone", _zones_chart(doc)),
    ):
        body += [f"<h3>{escape(heading)}</h3>", chart]
    body.append("</section>")
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{escape(title(doc))}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )
