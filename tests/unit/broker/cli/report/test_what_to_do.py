"""The What to do section in every format, on the ``advice`` and ``risk`` of
a real tiny what-if (``sample.real_doc``): the CSV's advice rows carry the
JSON's totals, the Markdown is well formed, the HTML holds the section, the
text fits 80 columns and starts with it; no cell holds the hourly counts."""

from __future__ import annotations

import csv
import io
from html.parser import HTMLParser
from typing import Any

import pytest

from broker.cli.report.csvfile import csv_tables, render_csv
from broker.cli.report.htmlpage import render_html
from broker.cli.report.markdown import render_markdown
from broker.cli.report.sections import POOL_ROWS, sections
from broker.cli.report.text import render_text
from tests.unit.broker.cli.report.sample import real_doc, sample_doc
from tests.unit.broker.cli.report.test_markdown import assert_well_formed, cells, tables


@pytest.fixture
def doc() -> dict[str, Any]:
    return real_doc()  # a fresh copy: tests change it (the run is made once)


def _csv(doc: dict[str, Any], table: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(render_csv(doc, table))))


def many_pools(doc: dict[str, Any], n: int) -> dict[str, Any]:
    """``doc`` with its first-week pools copied to ``n`` (distinct keys and
    instance-hours, so their order is known)."""
    pools = doc["advice"]["first_week"]["pools"]
    base = pools[0]
    doc["advice"]["first_week"]["pools"] = [
        {**base, "pool_key": f"aws/us-east-1/us-east-1a/x{i}.large", "instance_hours": 1000 + i}
        for i in range(n)
    ]
    return doc


def test_the_tiny_run_gives_a_first_week_of_168_hourly_counts(doc: dict[str, Any]) -> None:
    pools = doc["advice"]["first_week"]["pools"]
    assert doc["advice"]["first_week"]["hours"] == 168 and pools
    assert all(len(p["instances_by_hour"]) == 168 for p in pools)
    assert doc["advice"]["commitments"]  # the tiny market's plan commits


def test_csv_advice_rows_hold_the_jsons_totals(doc: dict[str, Any]) -> None:
    adv = doc["advice"]
    assert {
        "scenarios",
        "advice_commitments",
        "advice_first_week",
        "advice_cost_by_workload",
        "advice_cost_by_team",
        "advice_totals",
    } <= set(csv_tables(doc))
    work = _csv(doc, "advice_cost_by_workload")
    assert [r["name"] for r in work] == [r["name"] for r in adv["cost_by_workload"]]
    for got, want in zip(work, adv["cost_by_workload"], strict=True):
        assert float(got["total_usd"]) == want["total_usd"]
        assert got["team"] == (want["team"] or "")
    teams = _csv(doc, "advice_cost_by_team")
    assert {r["name"]: float(r["total_usd"]) for r in teams} == {
        r["name"]: r["total_usd"] for r in adv["cost_by_team"]
    }
    billed = adv["reconciliation"]["billed_usd"]
    assert sum(float(r["total_usd"]) for r in teams) == pytest.approx(billed, abs=0.05)
    totals = {r["total"]: float(r["usd"]) for r in _csv(doc, "advice_totals")}
    rec = adv["reconciliation"]
    assert totals == {
        "objective": rec["objective_usd"],
        "period plan": rec["period_planned_usd"],
        "planned": rec["planned_usd"],
        "billed": billed,
    }
    buys = _csv(doc, "advice_commitments")
    assert [(r["size"], float(r["obligation_usd"])) for r in buys] == [
        (c["size"], c["obligation_usd"]) for c in adv["commitments"]
    ]


def test_csv_lists_every_pool_one_number_a_cell(doc: dict[str, Any]) -> None:
    doc = many_pools(doc, POOL_ROWS + 5)
    got = _csv(doc, "advice_first_week")
    assert len(got) == POOL_ROWS + 5
    hours = [float(r["instance_hours"]) for r in got]
    assert hours == sorted(hours, reverse=True)  # most instance-hours first
    assert all("," not in v for r in got for v in r.values())  # no list in a cell
    assert render_csv(doc) == render_csv(doc, "scenarios")  # --format csv: the scenarios


def test_an_unknown_csv_table_names_the_choices(doc: dict[str, Any]) -> None:
    with pytest.raises(KeyError, match="advice_totals"):
        render_csv(doc, "nope")


@pytest.mark.parametrize("width", [40, 80, 120])
def test_text_fits_and_starts_with_what_to_do(doc: dict[str, Any], width: int) -> None:
    text = render_text(doc, width)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width, max(lines, key=len)
    assert lines[0].startswith("What-if over")
    assert next(line for line in lines if line.startswith("==")) == "== What to do"
    section = text.split("== What to do")[1].split("\n== ")[0]
    assert "-- commitments to buy (period plan)" in section
    assert "objective = period plan" in section and "billed = planned" in section
    assert "risk over 4 sampled spot and demand scenarios (seed 0)" in " ".join(section.split())
    assert "cost less than the recorded bill" in " ".join(section.split())


def test_text_shows_the_top_pools_and_counts_the_rest(doc: dict[str, Any]) -> None:
    text = render_text(many_pools(doc, POOL_ROWS + 3), 80)
    section = text.split("== What to do")[1].split("\n== ")[0]
    shown = [line for line in section.splitlines() if "us-east-1a/x" in line]
    assert len(shown) == POOL_ROWS
    assert "x14.large" in shown[0] and "x3.large" in shown[-1]  # most instance-hours first
    assert "3 more pools in --json (advice.first_week)" in section
    assert "1000" not in section.replace("1,000", "")  # x0 (1,000 inst-h) is one of the 3


def test_no_commitment_is_one_line(doc: dict[str, Any]) -> None:
    doc["advice"]["commitments"] = []
    text = render_text(doc, 80)
    assert "buy no commitment (period plan)" in text.split("== Scenarios")[0]
    assert "buy no commitment (period plan)" in render_markdown(doc)
    assert "buy no commitment (period plan)" in render_html(doc)


def test_no_cell_holds_the_hourly_counts(doc: dict[str, Any]) -> None:
    for pools in (POOL_ROWS, None):
        for sec in sections(doc, pools=pools):
            for t in sec.tables:
                for row in t.rows:
                    assert all(not isinstance(v, str) or len(v.split(",")) < 24 for v in row)


def test_markdown_what_to_do_is_well_formed(doc: dict[str, Any]) -> None:
    text = render_markdown(doc)
    assert assert_well_formed(text) >= 10  # 6 in What to do
    what = text.split("## What to do")[1].split("\n## ")[0]
    heads = [cells(block[0])[0] for block in tables(what)]
    # the lookback rule on each scope the plan would buy follows the buy table
    assert heads == ["instance type", "scope", "tier", "workload", "team", "total"]
    assert "- objective = period plan + $" in what
    ours = next(r for r in doc["advice"]["cost_by_workload"] if r["name"] == "api")
    assert f"| api | web | ${ours['total_usd']:,.0f} |" in what


class _Ids(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.ids += [v for k, v in attrs if k == "id" and v]


def test_html_holds_the_section_first_with_every_pool(doc: dict[str, Any]) -> None:
    doc = many_pools(doc, POOL_ROWS + 4)
    page = render_html(doc)
    p = _Ids()
    p.feed(page)
    assert p.ids.index("advice") < p.ids.index("scenarios")
    for t in ("commitments", "first_week", "cost_by_workload", "cost_by_team", "totals"):
        assert f"table-advice_{t}" in p.ids
    section = page.split('<section id="advice">')[1].split("</section>")[0]
    assert section.count("us-east-1a/x") == POOL_ROWS + 4 and "more pools" not in section
    assert "objective = period plan" in section and "billed = planned" in section


def test_the_hand_written_sample_reads_the_same_way() -> None:
    text = render_text(sample_doc(), 80)
    section = text.split("== What to do")[1].split("\n== ")[0]
    assert "g2-standard-4" in section and "$113k" in section
    assert "billed = planned + $4,011 break-glass on-demand (lifecycle) - $1,191 actual" in (
        " ".join(section.split())
    )
    assert "45% of the samples cost less than the recorded bill" in " ".join(section.split())
