"""``spotfolio whatif``'s "what to do" section and risk band, end to end: a
generated FOCUS bill in, per-team costs and a seeded band out."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from broker.cli import main
from tests.fakes.billing_exports import Fleet, write_focus

FLEET = [
    Fleet("p3.2xlarge", 3, workload="chat-api", team="chat"),
    Fleet("g5.12xlarge", 1, workload="train"),
]
FAST = ["--replan-hours", "24", "--days", "2"]
RULES = """\
rules:
  - workload: chat-api
    tags: {team: chat}
  - workload: train
    instance_type: "g5.*"
"""


def _run(*args: str) -> tuple[int, str]:
    buf = io.StringIO()
    with redirect_stdout(buf):
        code = main(["whatif", *FAST, *args])
    return code, buf.getvalue()


def _json(*args: str) -> dict[str, Any]:
    code, text = _run("--json", *args)
    assert code == 0
    out = json.loads(text)
    assert isinstance(out, dict)
    return out


def test_a_bill_gives_costs_per_team_that_add_up_and_a_seeded_band(tmp_path: Path) -> None:
    bill = write_focus(tmp_path / "focus.parquet", FLEET, 72)
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    args = ("--usage", str(bill), "--usage-rules", str(rules), "--scenarios", "3", "--seed", "7")
    out = _json(*args)
    ours = next(s for s in out["scenarios"] if s["name"] == "spotfolio")
    advice = out["advice"]
    teams = {r["name"]: r["total_usd"] for r in advice["cost_by_team"]}
    assert set(teams) == {"chat", "(no team)"}  # train's rule names no team
    assert sum(teams.values()) == pytest.approx(ours["total_cost_usd"], abs=0.05)
    workloads = {r["name"]: r for r in advice["cost_by_workload"]}
    assert workloads["chat-api"]["team"] == "chat" and workloads["train"]["team"] is None
    assert sum(r["total_usd"] for r in workloads.values()) == pytest.approx(
        ours["total_cost_usd"], abs=0.05
    )
    assert advice["reconciliation"]["billed_usd"] == pytest.approx(ours["total_cost_usd"])
    assert all(
        isinstance(n, int) for p in advice["first_week"]["pools"] for n in p["instances_by_hour"]
    )
    risk = out["risk"]
    assert (risk["scenarios"], risk["seed"]) == (3, 7)
    c = risk["cost_usd"]
    assert c["p10"] <= c["p50"] <= c["p90"]
    assert len(risk["samples_cost_usd"]) == 3
    again = _json(*args)
    assert again["risk"]["samples_cost_usd"] == risk["samples_cost_usd"]


def test_text_starts_with_what_to_do_and_scenarios_0_draws_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)  # not a terminal: 80 columns
    code, text = _run("--days", "1", "--scenarios", "0")
    assert code == 0
    lines = text.splitlines()
    assert lines[0].startswith("What-if over ")
    heads = [line for line in lines if line.startswith("== ")]
    assert heads[0] == "== What to do" and heads[1].startswith("== Scenarios")
    what = lines[lines.index("== What to do") + 1 : lines.index(heads[1])]
    assert what[0].startswith("-- commitments to buy")
    # a table of buys (its header, then a row) or the one line saying none
    assert what[1].startswith("instance type ") or what[1].startswith("buy no commitment")
    assert "-- the totals reconciled" in what
    assert any(line.startswith("objective = period plan") for line in what)
    assert any(line.startswith("billed = planned") for line in what)
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)
    assert "risk over" not in text
    code, doc = _run("--days", "1", "--scenarios", "0", "--json")
    assert code == 0 and "risk" not in json.loads(doc) and "advice" in json.loads(doc)
