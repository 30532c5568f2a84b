"""The CSV report parses with the csv module and holds the JSON's numbers."""

from __future__ import annotations

import csv
import io

import pytest

from broker.cli.report.csvfile import TABLES, csv_tables, render_csv
from tests.unit.broker.cli.report.sample import sample_doc


def test_csv_rows_are_the_scenarios_with_the_documents_totals() -> None:
    doc = sample_doc()
    got = list(csv.DictReader(io.StringIO(render_csv(doc))))
    assert [r["name"] for r in got] == [s["name"] for s in doc["scenarios"]]
    for row, s in zip(got, doc["scenarios"], strict=True):
        assert float(row["total_cost_usd"]) == s["total_cost_usd"]
        tiers = sum(float(row[k]) for k in ("committed_usd", "on_demand_usd", "spot_usd"))
        assert tiers == pytest.approx(s["total_cost_usd"], abs=0.01)
        assert float(row["savings_vs_on_demand"]) == s["savings_vs_on_demand"]


def test_a_missing_number_is_an_empty_cell_not_a_dash() -> None:
    doc = sample_doc()
    del doc["scenarios"][0]["planned_cost_usd"]
    row = next(csv.DictReader(io.StringIO(render_csv(doc))))
    assert row["planned_cost_usd"] == ""


def test_tables_lists_every_table_a_full_document_has_in_order() -> None:
    doc = sample_doc()
    doc["as_billed"] = {"effective_cost_usd": 10.0, "days": [{"day": "2026-01-01"}]}
    doc["advice"]["commitment_rule"] = {"sized": [], "refused": [{"group": "g", "reason": "r"}]}
    doc["owned"] = [{"pool": "aws/us-east-1/p4d.24xlarge", "count": 2}]
    doc["next_buy"] = [{"pool": "aws/us-east-1/p4d.24xlarge", "count": 1}]
    assert csv_tables(doc) == list(TABLES)
