"""``spotfolio whatif --usage`` (a generated bill in, the what-if on its usage) and
the what-if's default window on recorded data."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from broker.cli import main
from markets.catalog import instance_type, throughput_factor
from tests.fakes.billing_exports import START, Fleet, write_cur, write_focus
from tests.fakes.replay_data import T0, write_mini

FLEET = [
    Fleet("p3.2xlarge", 3, workload="chat-api", team="chat"),
    Fleet("g5.12xlarge", 1, tier="committed", workload="train"),
    Fleet("m5.large", 2),  # not a GPU type the default market offers
]
FAST = ["--replan-hours", "24", "--days", "2"]


def _whatif_json(*args: str) -> dict[str, Any]:
    buf = io.StringIO()
    with redirect_stdout(buf):
        code = main(["whatif", "--json", *FAST, *args])
    assert code == 0
    out = json.loads(buf.getvalue())
    assert isinstance(out, dict)
    return out


def test_whatif_plans_the_bills_last_days_per_workload(tmp_path: Path) -> None:
    bill = write_focus(tmp_path / "focus.parquet", FLEET, 72)
    out = _whatif_json("--usage", str(bill))
    usage = out["usage"]
    # the bill's last 2 days are replayed; the first day is history
    assert out["start"] == (START.replace(day=2)).isoformat() and out["hours"] == 48
    g5 = instance_type("g5.12xlarge")
    assert usage["workloads"]["train"]["unit_hours"] == pytest.approx(
        72 * g5.units * throughput_factor("g5.12xlarge")
    )
    assert usage["workloads"]["train"]["covered_unit_hours"] == pytest.approx(
        usage["workloads"]["train"]["unit_hours"]
    )
    assert usage["workloads"]["chat-api"]["covered_unit_hours"] == 0
    assert usage["unplannable_instance_hours"] == {"m5.large": 144.0}
    assert usage["covered_instance_hours_by_commitment"] == {"Savings Plan": 72.0}
    assert {s["name"] for s in out["scenarios"]} >= {"on_demand", "spotfolio"}
    # the planned demand is the bill's: all on-demand serves every unit-hour of it
    od = next(s for s in out["scenarios"] if s["name"] == "on_demand")
    assert od["unmet_unit_hours"] == 0 and od["total_cost_usd"] > 0


def test_whatif_text_names_the_bill_and_what_was_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bill = write_cur(tmp_path / "cur.csv", FLEET, 72)
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - {workload: chat, tags: {workload: chat-api}}\n")
    assert main(["whatif", *FAST, "--usage", str(bill), "--usage-rules", str(rules)]) == 0
    out = capsys.readouterr().out
    assert f"usage: {bill}" in out
    assert "unmapped (no rule matched" in out and "g5.12xlarge" in out
    assert "m5.large" in out  # not planned, and said so


def test_a_short_bill_replays_all_but_its_first_day_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bill = write_focus(tmp_path / "f.csv", FLEET[:1], 48)
    assert main(["whatif", "--json", "--replan-hours", "24", "--usage", str(bill)]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["hours"] == 24
    assert "--days 30: the bill covers 48 h; replaying its last 1 day(s)" in cap.err


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        pytest.param(["--usage-rules", "r.yaml"], "--usage-rules", id="rules-without-usage"),
        pytest.param(["--usage", "/nonexistent/bill"], "/nonexistent/bill", id="missing"),
    ],
)
def test_bad_usage_options_exit_2_in_one_line(
    args: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["whatif", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]


def test_usage_and_demand_together_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bill = write_focus(tmp_path / "f.csv", FLEET, 48)
    assert main(["whatif", "--usage", str(bill), "--demand", str(bill)]) == 2
    assert "--usage" in capsys.readouterr().err


def test_bad_bill_line_exits_2_naming_file_line_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bill = tmp_path / "bill.csv"
    bill.write_text(
        "ChargePeriodStart,ChargePeriodEnd,ConsumedQuantity,ConsumedUnit,x_InstanceType\n"
        "2026-01-01T00:00:00Z,2026-01-01T01:00:00Z,1,Hours,p3.2xlarge\n"
        "2026-01-01T01:00:00Z,2026-01-01T02:00:00Z,one,Hours,p3.2xlarge\n"
    )
    assert main(["whatif", "--usage", str(bill)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert f"{bill}: line 3, column ConsumedQuantity: expected a number" in err[0]


def test_whatif_on_recorded_data_replays_the_overlap_and_says_which(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the mini dataset: a preemption trace with its own prices, 10 h from T0
    root = write_mini(tmp_path)
    args = ["whatif", "--json", "--market", str(root), "--replan-hours", "24"]
    assert main(args) == 0
    cap = capsys.readouterr()
    out = json.loads(cap.out)
    assert out["start"] == T0.isoformat() and out["hours"] == 24
    assert out["recorded_data"][0].startswith("replaying 2023-01-10 00:00 .. 2023-01-10 10:00")
    assert "(aws traces, trace-prices)" in out["recorded_data"][0]
    assert "--days 30: the window holds 1 whole day(s); replaying 1" in cap.err
