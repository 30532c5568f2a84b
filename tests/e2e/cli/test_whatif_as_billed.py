"""``whatif --usage``: the bill itself is the first scenario, ``as_billed``,
priced as the bill says and reconciled per day; every saving is stated
against it first and against on-demand second, in every format."""

from __future__ import annotations

import csv
import io
import json
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from broker.cli import main
from broker.cli.report import render
from tests.fakes.focus_bill import Line, write_bill

TAGS = {"workload": "chat", "team": "chat"}
# Two instances on an all-upfront reserved instance (billed $0, amortised
# $1.90 an hour each) and three on on-demand at $3.06, three days.
BILL = [
    Line("p3.2xlarge", 2, 1.9, 0.0, tier="reserved", tags=TAGS),
    Line("p3.2xlarge", 3, 3.06, tags=TAGS),
]
FAST = ["--replan-hours", "24", "--days", "2", "--scenarios", "0"]


def _whatif(*args: str) -> dict[str, Any]:
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main(["whatif", "--json", *FAST, *args]) == 0
    out = json.loads(buf.getvalue())
    assert isinstance(out, dict)
    return out


@pytest.fixture(scope="module")
def doc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    bill = write_bill(tmp_path_factory.mktemp("bill") / "focus.csv", BILL)
    return _whatif("--usage", str(bill))


def test_as_billed_is_the_first_scenario_at_the_bills_own_dollars(doc: dict[str, Any]) -> None:
    first = doc["scenarios"][0]
    assert first["name"] == "as_billed"
    hours = 48  # the bill's last two days are replayed
    assert first["total_cost_usd"] == pytest.approx(hours * (2 * 1.9 + 3 * 3.06))
    assert first["billed_cost_usd"] == pytest.approx(hours * 3 * 3.06)
    assert first["amortisation_usd"] == pytest.approx(hours * 2 * 1.9)
    ab = doc["as_billed"]
    assert ab["instance_hours_by_tier"] == {"committed": 96.0, "on_demand": 144.0, "spot": 0.0}
    # per day: the bill's dollars beside the replay's for the same usage and tiers
    assert [d["day"] for d in ab["days"]] == ["2026-01-02", "2026-01-03"]
    for d in ab["days"]:
        assert d["effective_cost_usd"] == pytest.approx(24 * (2 * 1.9 + 3 * 3.06))
        assert d["replay_usd"] > 0
        assert d["difference_usd"] == pytest.approx(d["replay_usd"] - d["effective_cost_usd"])
    assert sum(d["effective_cost_usd"] for d in ab["days"]) == pytest.approx(
        ab["effective_cost_usd"]
    )


def test_every_saving_is_against_as_billed_then_on_demand(doc: dict[str, Any]) -> None:
    base = doc["scenarios"][0]["total_cost_usd"]
    od = next(s for s in doc["scenarios"] if s["name"] == "on_demand")["total_cost_usd"]
    for s in doc["scenarios"]:
        assert s["savings_vs_as_billed"] == pytest.approx(1 - s["total_cost_usd"] / base, abs=1e-5)
        assert s["saving_vs_as_billed_usd"] == pytest.approx(base - s["total_cost_usd"], abs=0.01)
        assert s["savings_vs_on_demand"] == pytest.approx(1 - s["total_cost_usd"] / od, abs=1e-5)
    keys = list(doc["scenarios"][1])
    assert keys.index("savings_vs_as_billed") < len(keys)


def test_text_markdown_and_html_show_as_billed_first_and_csv_has_both_savings(
    doc: dict[str, Any],
) -> None:
    text = render("text", doc, 100)
    heads = [ln for ln in text.splitlines() if ln.startswith("== ")]
    assert heads[0] == "== As billed: the bill itself"
    assert "against as-billed" in text and "against on-demand" in text
    spot = next(s for s in doc["scenarios"] if s["name"] == "spotfolio")
    verb = "saves" if spot["saving_vs_as_billed_usd"] >= 0 else "costs"
    assert f"  spotfolio: ${spot['total_cost_usd']:,.0f}, {verb}" in text
    md = render("markdown", doc, 100)
    assert md.index("As billed") < md.index("Scenarios")
    html = render("html", doc, 100)
    assert html.index('id="as_billed"') < html.index('id="scenarios"')
    rows = list(csv.DictReader(io.StringIO(render("csv", doc, 100))))
    assert rows[0]["name"] == "as_billed"
    assert {"savings_vs_as_billed", "savings_vs_on_demand"} <= set(rows[0])
    days = render_table(doc, "as_billed_days")
    assert len(days) == 2


def render_table(doc: dict[str, Any], table: str) -> list[dict[str, str]]:
    from broker.cli.report.csvfile import render_csv

    return list(csv.DictReader(io.StringIO(render_csv(doc, table))))


def test_without_a_bill_there_is_no_as_billed(tmp_path: Path) -> None:
    from broker.cli.report.sections import scenario_table

    doc = {"scenarios": [{"name": "on_demand", "total_cost_usd": 1.0}]}
    assert "savings_vs_as_billed" not in [c.key for c in scenario_table(doc).columns]
    assert "As billed" not in render("text", doc, 80)
