"""``spotfolio cost ...``: outputs, JSON schemas and the bad-input contract.

Expected figures come from docs/concepts/effective-cost.md (see
tests/unit/policies/test_golden_economics.py).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from broker.cli import main

EXAMPLE_A = [
    "cost", "effective", "--units", "512", "--hours", "336", "--on-demand", "2",
    "--spot", "0.70", "--checkpoint-overhead", "0.05", "--interruptions", "14",
    "--per", "productive-day", "--restart-hours", "0.5",
]  # fmt: skip
LLM = ["--units", "512", "--hours", "336", "--on-demand", "2", "--spot", "0.70"]


# A command's --json output as json.loads gives it (Any: the tests index into
# the documented schema directly).
Doc = dict[str, Any]


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> Doc:
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert isinstance(out, dict)
    return out


def test_effective_reproduces_example_a_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(capsys, EXAMPLE_A)
    assert out["schema"] == "spotfolio.cost.effective/1"
    assert out["convention"] == "productive"
    assert out["spot_total_usd"] == 161566.72
    assert out["saving_usd"] == 182497.28
    assert out["effective_usd_per_unit_hour"] == 0.9392
    assert out["on_demand_total_usd"] == 344064.0
    assert out["total_hours"] == 450.8
    assert out["spot_worth_it"] is True
    assert out["exact"]["effective_usd_per_unit_hour"] == pytest.approx(0.7 * 450.8 / 336)


def test_effective_human_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(EXAMPLE_A) == 0
    out = capsys.readouterr().out
    assert "$161,566.72" in out
    assert "$182,497.28 (53.0%)" in out
    assert "+34.2% calendar" in out
    assert "spot pays" in out


@pytest.mark.parametrize(
    ("per", "saving"),
    [pytest.param("productive-hour", 0.51875, id="productive"), ("wall-hour", 0.44)],
)
def test_per_fixes_the_convention_example_b(
    capsys: pytest.CaptureFixture[str], per: str, saving: float
) -> None:
    argv = [
        "cost", "effective", "--units", "1", "--hours", "2", "--on-demand", "1", "--spot",
        "0.35", "--interruptions", "0.5", "--per", per, "--restart-hours", "0.5",
        "--lost-work-hours", "0.25",
    ]  # fmt: skip
    out = _json(capsys, argv)
    assert out["convention"] == per.split("-")[0]
    assert out["exact"]["saving_fraction"] == pytest.approx(saving)


def test_breakeven_example_d(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["cost", "breakeven", *LLM, "--checkpoint-overhead", "0.05", "--interruptions", "1"]
    argv += ["--per", "productive-day", "--restart-hours", "0.5"]
    out = _json(capsys, argv)
    assert out["schema"] == "spotfolio.cost.breakeven/1"
    assert round(out["breakeven_interruptions_per_day"], 1) == 86.7
    assert round(out["breakeven_mean_minutes_between"], 1) == 16.6
    assert out["checkpoint_window_status"] == "not_computed"
    assert out["checkpoint_window"] is None
    # T_total / T_prod = 1.05 + 0.5/24 at 1/day: break-even price = 2 / that
    assert out["exact"]["breakeven_spot_usd_per_unit_hour"] == pytest.approx(2 / (1.05 + 0.5 / 24))


def test_breakeven_checkpoint_window_example_d(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["cost", "breakeven", *LLM, "--checkpoint-write-hours", str(1 / 60)]
    argv += ["--interruptions", "1", "--per", "productive-day", "--restart-hours", "0.5"]
    out = _json(capsys, argv)
    assert out["checkpoint_window_status"] == "window"
    assert out["checkpoint_window"]["min_interval_s"] == pytest.approx(33, abs=1.0)
    assert main(argv) == 0
    assert "checkpoint at least every" in capsys.readouterr().out


def test_checkpoint_175b_on_gcp_does_not_fit(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["cost", "checkpoint", "--checkpoint-write-hours", "0.0667", "--interruptions", "2"]
    argv += ["--per", "wall-day", "--restart-hours", "0.25", "--provider", "gcp"]
    out = _json(capsys, [*argv, "--notice-write-seconds", "240"])
    assert out["schema"] == "spotfolio.cost.checkpoint/1"
    assert out["notice_seconds"] == 30
    assert out["notice_checkpoint_fits"] is False
    assert out["mean_hours_between"] == 12
    assert out["exact"]["lost_work_per_interruption_hours"] == pytest.approx(
        out["exact"]["daly_interval_hours"] / 2
    )
    # a 20 s notice checkpoint fits GCP's 30 s: no lost work, higher productive fraction
    fits = _json(capsys, [*argv, "--notice-write-seconds", "20"])
    assert fits["notice_checkpoint_fits"] is True
    assert fits["lost_work_per_interruption_hours"] == 0
    assert fits["productive_fraction"] > out["productive_fraction"]


def test_checkpoint_without_interruptions_never_checkpoints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = _json(capsys, ["cost", "checkpoint", "--checkpoint-write-hours", "0.1"])
    assert out["mean_hours_between"] is None  # infinite: JSON null
    assert out["daly_interval_hours"] is None
    assert out["time_factor"] == 1.0


def test_reserve_quantile_rule_from_a_comma_list(capsys: pytest.CaptureFixture[str]) -> None:
    demand = ",".join(str(i) for i in range(1, 101))
    argv = ["cost", "reserve", "--demand", demand, "--on-demand", "2", "--discount", "0.4"]
    out = _json(capsys, argv)
    assert out["schema"] == "spotfolio.cost.reserve/1"
    assert out["breakeven_occupancy"] == 0.6
    assert out["optimal"]["committed_units"] == 40
    assert out["peak_units"] == 100


def test_reserve_a_finite_series_never_justifies_a_year(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # 20 days of a steady 16-unit job: committed every hour of it (100 %
    # occupancy) while it runs, 5.5 % of a year's hours.
    demand = ",".join(["16"] * 480)
    base = ["cost", "reserve", "--demand", demand, "--on-demand", "2", "--discount", "0.4"]
    assert _json(capsys, base)["optimal"]["committed_units"] == 16
    out = _json(capsys, [*base, "--finite", "1y"])
    assert out["term_hours"] == 8760
    assert out["optimal"]["committed_units"] == 0
    assert out["monthly_saving_usd"] == 0.0
    level = _json(capsys, [*base, "--finite", "1y", "--levels", "16"])["levels"][0]
    assert level["committed_usd"] == pytest.approx(16 * 1.2 * 8760)
    assert level["occupancy"] == pytest.approx(480 / 8760, abs=1e-6)


def test_reserve_what_if_40_to_60_percent_from_csv(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    csv_file = tmp_path / "demand.csv"
    rows = ["hour,demand"] + [f"{h},{60 if h < 18 else 100}" for h in range(24)]
    csv_file.write_text("\n".join(rows) + "\n")
    argv = ["cost", "reserve", "--demand", str(csv_file), "--on-demand", "2"]
    argv += ["--committed", "1.2", "--levels", "40%,60%"]
    out = _json(capsys, argv)
    assert [lv["committed_units"] for lv in out["levels"]] == [40, 60]
    # by hand: 40 units: 40*24*1.2 + (20*18 + 60*6)*2 = 1152 + 1440 = 2592
    #          60 units: 60*24*1.2 + 40*6*2 = 1728 + 480 = 2208
    assert [lv["total_usd"] for lv in out["levels"]] == [2592.0, 2208.0]
    (step,) = out["steps"]
    assert step["pays"] is True
    assert step["delta_usd"] == -384.0
    assert step["marginal_occupancy"] == 1.0
    assert out["levels"][1]["share_of_peak"] == 0.6
    assert main(argv) == 0
    assert "saves $384.00" in capsys.readouterr().out


def _fails(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 2, captured
    err = captured.err.strip()
    assert err and "\n" not in err, err
    assert captured.out == ""
    return err


_RUN = ["cost", "effective", "--units", "1", "--hours", "1", "--on-demand", "1", "--spot", "1"]


@pytest.mark.parametrize(
    ("extra", "option", "expects"),
    [
        pytest.param(["--spot", "-1"], "--spot", ">= 0", id="negative-spot"),
        pytest.param(["--spot", "nan"], "--spot", ">= 0", id="nan-spot"),
        pytest.param(["--spot", "abc"], "--spot", "a finite number", id="text-spot"),
        pytest.param(["--units", "0"], "--units", "> 0", id="zero-units"),
        pytest.param(["--hours", "inf"], "--hours", "> 0", id="infinite-hours"),
        pytest.param(["--per", "fortnight"], "--per", "productive-day", id="bad-per"),
        pytest.param(["--restart-hours", "-0.5"], "--restart-hours", ">= 0", id="neg-restart"),
        pytest.param(
            ["--checkpoint-overhead", "0.05", "--checkpoint-write-hours", "0.1"],
            "--checkpoint-overhead",
            "not both",
            id="overhead-and-write",
        ),
        pytest.param(
            ["--checkpoint-interval-hours", "1"],
            "--checkpoint-interval-hours",
            "--checkpoint-write-hours",
            id="interval-alone",
        ),
        pytest.param(
            ["--notice-write-seconds", "20"], "--notice-write-seconds", "--provider", id="notice"
        ),
    ],
)
def test_bad_run_options_exit_2_naming_the_option(
    capsys: pytest.CaptureFixture[str], extra: list[str], option: str, expects: str
) -> None:
    err = _fails(capsys, [*_RUN, *extra])
    assert option in err and expects in err


@pytest.mark.parametrize(
    ("extra", "source"),
    [
        pytest.param(["--demand", "1,2", "--on-demand", "2"], "--committed", id="no-price"),
        pytest.param(
            ["--demand", "1,2", "--on-demand", "2", "--committed", "1", "--discount", "0.4"],
            "--committed",
            id="both-prices",
        ),
        pytest.param(
            ["--demand", "1,2", "--on-demand", "2", "--discount", "1.2"], "--discount", id="disc"
        ),
        pytest.param(["--demand", "1,x", "--on-demand", "2", "--discount", "0.4"], "--demand"),
        pytest.param(["--demand", "1,-3", "--on-demand", "2", "--discount", "0.4"], "--demand"),
        pytest.param(
            ["--demand", "1,2", "--on-demand", "2", "--discount", "0.4", "--levels", "40%,lots"],
            "--levels",
            id="levels",
        ),
        pytest.param(["--demand", "1,2", "--on-demand", "0", "--discount", "0.4"], "--on-demand"),
    ],
)
def test_bad_reserve_options_exit_2(
    capsys: pytest.CaptureFixture[str], extra: list[str], source: str
) -> None:
    assert source in _fails(capsys, ["cost", "reserve", *extra])


def test_bad_csv_line_is_named(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    f = tmp_path / "d.csv"
    f.write_text("demand\n3\n4\nfour\n")
    err = _fails(
        capsys, ["cost", "reserve", "--demand", str(f), "--on-demand", "2", "--discount", "0.4"]
    )
    assert str(f) in err and "line 4" in err and "'four'" in err


def test_csv_with_several_columns_needs_a_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    f = tmp_path / "d.csv"
    f.write_text("hour,gpus\n0,3\n1,5\n")
    base = ["cost", "reserve", "--demand", str(f), "--on-demand", "2", "--discount", "0.4"]
    assert "--column" in _fails(capsys, base)
    assert "--column" in _fails(capsys, [*base, "--column", "nope"])
    out = _json(capsys, [*base, "--column", "gpus"])
    assert out["hours"] == 2 and out["peak_units"] == 5


def test_checkpoint_bad_write_time(capsys: pytest.CaptureFixture[str]) -> None:
    err = _fails(capsys, ["cost", "checkpoint", "--checkpoint-write-hours", "-1"])
    assert "--checkpoint-write-hours" in err


def test_spot_that_never_finishes_exits_3_and_says_why(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main([*_RUN, "--interruptions", "2", "--restart-hours", "0.5"])
    err = capsys.readouterr().err
    assert code == 3
    assert "never finishes" in err


def test_installed_script_reproduces_example_a() -> None:
    exe = shutil.which("spotfolio")
    if exe is None:
        pytest.skip("the spotfolio console script is not on PATH (pip install -e .)")
    done = subprocess.run(
        [exe, *EXAMPLE_A, "--json"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert (out["spot_total_usd"], out["saving_usd"]) == (161566.72, 182497.28)
    bad = subprocess.run(
        [exe, *EXAMPLE_A[:-1], "-0.5"], capture_output=True, text=True, timeout=60, check=False
    )
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1 and "--restart-hours" in bad.stderr
