"""A simulated month on the real V100 spot traces (``tests.paths.SHARED_DATA``).

The issue's measure for the daemon's caps: the budget and the break-glass cap
hold over a 30-day simulated run *on a real trace*. The fleet keeps to
us-west-2 (``regions`` market option), where the 45-day V100 availability
traces of 2023-02-15 (Can't Be Late, NSDI 2024) give the revocations the
simulated cloud replays. The budget and the cap are set low enough to bind:
the run must show both refusing something, not just staying under them.
"""

from __future__ import annotations

import logging
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from broker.daemon.config import DaemonConfig
from policies.workloads.spec import parse_workloads
from tests.paths import SHARED_DATA

DATA = SHARED_DATA
pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} (the public traces) absent")

CAP_USD = 10.0
BUDGET_USD_PER_HOUR = 16.0


@pytest.mark.slow
def test_a_month_on_the_v100_traces_keeps_the_budget_and_the_break_glass_cap(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """~45 s: 720 simulated hours, one plan and one reconcile per hour."""
    from broker.daemon.accelerated import simulate_daemon
    from markets.registry import open_market

    ws = parse_workloads(
        {
            "budget_usd_per_hour": BUDGET_USD_PER_HOUR,
            "break_glass_cap_usd": CAP_USD,
            "workloads": [
                {
                    "name": "sweeps",
                    "class": "batch",
                    "instance_types": ["p3.2xlarge"],
                    "unit_hours": 2500,
                    "deadline_hours": 720,
                    "max_units": 8,
                },
                {
                    "name": "finetune",
                    "class": "training",
                    "instance_types": ["p3.2xlarge"],
                    "elastic": True,
                    "min_units": 2,
                    "step_units": 1,
                    "max_units": 6,
                    "unit_hours": 2000,
                    "deadline_hours": 600,
                },
                {
                    "name": "inference",
                    "class": "serving",
                    "instance_types": ["p3.2xlarge"],
                    "demand": {
                        "base_units": 1,
                        "peak_units": 3,
                        "peak_start_hour": 9,
                        "peak_end_hour": 21,
                    },
                },
            ],
        }
    )
    market = open_market(str(DATA), regions="us-west-2")
    cfg = DaemonConfig.model_validate(
        {
            "owner": "trace-sim",
            "planner": "fast",
            "metrics_port": 0,
            "intervals": {"refresh_market_s": 3600, "replan_s": 3600, "reconcile_s": 3600},
            "sim": {"duplicate_rate": 0.2, "reorder": True, "throttle_rate": 0.02, "seed": 1},
        }
    )
    db = tmp_path / "state.db"
    start = datetime(2023, 2, 16, tzinfo=UTC)  # inside the 45-day traces
    with caplog.at_level(logging.WARNING, logger="spotfolio"):
        out = simulate_daemon(
            cfg,
            market,  # type: ignore[arg-type]
            hours=720,
            start=start,
            workloads=ws,
            store_url=f"sqlite:///{db}",
        ).to_dict()

    # Real revocations, each handled once, nothing launched twice or orphaned.
    assert out["revocations"] > 50
    assert out["decisions"]["replace"] > 0 and out["decisions"]["shrink"] > 0
    assert out["decisions"]["break_glass"] > 0
    assert out["unhandled_notices"] == 0 and out["decisions_after_deadline"] == 0
    assert out["duplicate_launches"] == 0 and out["orphaned_instances"] == 0
    # The caps hold ...
    assert out["budget_exceeded"] is False and out["budget_exceeded_hours"] == 0
    assert 0 < out["break_glass_usd"] <= CAP_USD
    assert out["break_glass_cap_exceeded"] is False
    # ... and bind: the cap turned break-glass down, the budget refused launches.
    with sqlite3.connect(db) as con:
        reasons = [r for (r,) in con.execute("SELECT reason FROM decisions")]
    assert any(
        f"of the ${CAP_USD:.0f} cap is left" in r or ("cap" in r and "cannot pay" in r)
        for r in reasons
    )
    refused = [r for r in caplog.records if r.getMessage().startswith("budget_refused")]
    assert refused or any("refused: fleet budget" in r for r in reasons)


def test_the_cli_takes_market_options_and_the_simulated_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    import yaml

    from broker.cli import main

    fleet = {
        "workloads": [
            {
                "name": "sweeps",
                "class": "batch",
                "instance_types": ["p3.2xlarge"],
                "unit_hours": 100,
                "deadline_hours": 48,
                "max_units": 4,
            }
        ]
    }
    (tmp_path / "fleet.yaml").write_text(yaml.safe_dump(fleet))
    (tmp_path / "daemon.yaml").write_text(
        yaml.safe_dump(
            {
                "owner": "cli",
                "store_url": "sqlite://",
                "workloads": "fleet.yaml",
                "planner": "fast",
                "metrics_port": 0,
            }
        )
    )
    args = [
        "daemon",
        "--config",
        str(tmp_path / "daemon.yaml"),
        "--provider",
        "sim",
        "--hours",
        "3",
        "--market",
        str(DATA),
        "--json",
    ]
    start = ["--start", "2023-02-16T00:00:00Z"]
    assert main([*args, *start, "--market-option", "regions=us-west-9"]) == 2
    assert "regions: expected names in the recorded data" in capsys.readouterr().err
    assert main([*args, "--start", "yesterday"]) == 2
    assert "--start: expected a valid datetime" in capsys.readouterr().err  # the option given
    assert main([*args, *start, "--market-option", "regions=us-west-2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["start"] == "2023-02-16T00:00:00+00:00" and out["hours"] == 3
    assert out["counters"]["instances_launched"] > 0
