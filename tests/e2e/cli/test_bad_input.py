"""The bad-input table, row by row: each hostile command
exits 2 with one line naming the option, or the file and the field, and
what was expected; the documented commands work."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import broker.whatif.run
from broker.cli import main
from tests.paths import REPO

WORKLOADS = (REPO / "policies" / "examples" / "workloads.yaml").read_text()
DEMAND_CSV = REPO / "broker" / "examples" / "demand.csv"


def _one_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("spotfolio: error: "), err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        pytest.param(["plan", "--gap", "nan"], "--gap", id="gap-nan"),
        pytest.param(
            ["plan", "--gap", "0.01", "--time-limit", "nan"], "--time-limit", id="time-limit-nan"
        ),
        pytest.param(
            ["plan", "--interruption-multiplier", "nan"],
            "--interruption-multiplier",
            id="multiplier-nan",
        ),
        pytest.param(
            ["plan", "--checkpoint-minutes", "nan"],
            "--checkpoint-minutes",
            id="checkpoint-minutes-nan",
        ),
        pytest.param(["whatif", "--seed", "-1"], "--seed", id="seed-negative"),
        pytest.param(
            ["cost", "reserve", "--demand", "1e308", "--on-demand", "2", "--discount", "0.3"],
            "--demand",
            id="reserve-demand-1e308",
        ),
        pytest.param(["plan", "--start", "2026-01-01T00:30"], "--start", id="start-half-hour"),
        pytest.param(["whatif", "--plot", "out.xyz"], "--plot", id="plot-format"),
    ],
)
def test_hostile_option_exits_2_naming_it(
    capsys: pytest.CaptureFixture[str], argv: list[str], option: str
) -> None:
    days = ["--days", "1"] if argv[0] in ("plan", "whatif") else []
    err = _one_line(capsys, [*argv, *days])
    assert option in err and "expected" in err


def test_half_hour_start_names_the_date_the_user_gave(capsys: pytest.CaptureFixture[str]) -> None:
    err = _one_line(capsys, ["plan", "--start", "2026-01-01T00:30", "--days", "1"])
    assert "2026-01-01T00:30" in err and "--at" not in err and "2025-12" not in err


def test_plot_format_is_checked_before_the_run(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_run(*_a: object, **_k: object) -> None:
        raise AssertionError("the what-if ran before --plot was checked")

    monkeypatch.setattr(broker.whatif.run, "run_whatif", no_run)
    err = _one_line(capsys, ["whatif", "--plot", "out.xyz", "--days", "1"])
    assert "--plot" in err and ".png" in err
    err = _one_line(capsys, ["whatif", "--plot", "/no/such/dir/out.png", "--days", "1"])
    assert "existing, writable directory" in err


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        pytest.param(
            "budget_usd_per_hour: 1600",
            "budget_usd_per_hour: true",
            "budget_usd_per_hour",
            id="budget-bool",
        ),
        pytest.param(
            "p5.48xlarge: 3.0",
            "p5.48xlarge: 1e308",
            "workloads[1].throughput.p5.48xlarge",
            id="throughput-1e308",
        ),
        pytest.param(
            "budget_usd_per_hour: 1600",
            "budget_usd_per_hour: .nan",
            "budget_usd_per_hour",
            id="budget-nan",
        ),
    ],
)
def test_hostile_workloads_field_exits_2_naming_file_and_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, old: str, new: str, field: str
) -> None:
    path = tmp_path / "fleet.yaml"
    assert old in WORKLOADS
    path.write_text(WORKLOADS.replace(old, new))
    err = _one_line(capsys, ["plan", "--policies", str(path), "--days", "1"])
    assert f"{path}: {field}: expected" in err


def test_five_thousand_deep_yaml_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("[" * 5000 + "]" * 5000)
    err = _one_line(capsys, ["plan", "--policies", str(path), "--days", "1"])
    assert str(path) in err and "nesting" in err


def test_yaml_demand_of_a_billion_hours_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "demand.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "start": "2026-01-05T00:00:00Z",
                "hours": 1e9,
                "workloads": {"chat-api": {"base_units": 1, "peak_units": 2}},
            }
        )
    )
    err = _one_line(capsys, ["plan", "--demand", str(path), "--days", "1"])
    assert f"{path}: hours: expected a whole number >= 1 and <= 87,600" in err


def test_demand_file_not_covering_the_window_exits_2_naming_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The documented ``plan --demand broker/examples/demand.csv --days 1``
    (the default market starts before the file) ended in a ValueError."""
    err = _one_line(capsys, ["plan", "--demand", str(DEMAND_CSV), "--days", "1"])
    assert str(DEMAND_CSV) in err and "2026-01-05" in err and "--start" in err


@pytest.mark.slow
def test_demand_file_covering_the_window_plans(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--demand", str(DEMAND_CSV), "--days", "1", "--start", "2026-01-12T00:00"]
    assert main(argv) == 0
    assert "chat-api" in capsys.readouterr().out


_CONFIG = "owner: t\nstore_url: sqlite:///x.db\nmetrics_port: 0\nplanner: fast\n"


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        *[
            pytest.param(f"intervals: {{{k}: .inf}}", f"intervals.{k}", id=f"{k}-inf")
            for k in (
                "refresh_market_s",
                "replan_s",
                "reconcile_s",
                "poll_notices_s",
                "lease_renew_s",
                "upkeep_s",
            )
        ],
        *[
            pytest.param(f"backoff: {{{k}: .inf}}", f"backoff.{k}", id=f"backoff-{k}-inf")
            for k in ("base_s", "cap_s")
        ],
        pytest.param("lease_ttl_s: .inf", "lease_ttl_s", id="lease-ttl-inf"),
        pytest.param("listing_grace_s: .inf", "listing_grace_s", id="listing-grace-inf"),
        pytest.param(
            "lifecycle: {return_lead_s: .inf}", "lifecycle.return_lead_s", id="return-lead-inf"
        ),
        pytest.param("sim: {seed: true}", "sim.seed", id="sim-seed-bool"),
        pytest.param("market: nosuch", "market", id="market-named-in-the-file"),
    ],
)
def test_hostile_daemon_config_exits_2_naming_the_file_and_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, extra: str, field: str
) -> None:
    path = tmp_path / "daemon.yaml"
    path.write_text(_CONFIG + extra + "\n")
    err = _one_line(capsys, ["daemon", "--config", str(path), "--hours", "1"])
    assert f"{path}: {field}: expected" in err and "--market" not in err
