"""The exit codes the README's table documents, one real case of each:
0 done; 1 a cloud, credential or runtime failure; 2 bad usage, option, file
or field (including a ``SPOTFOLIO_*`` variable); 3 a decision that cannot
be made. Cloud cases run the command in its own process, with no AWS
credentials anywhere and the endpoint on loopback (moto's server)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from broker.cli import EXIT_EXPLAIN, EXIT_INPUT, main
from markets.errors import AuthError
from markets.registry import open_market
from markets.sim.cloud import SimOptions
from markets.sim.persist import PersistentSimCloud

REPO = Path(__file__).resolve().parents[3]
CLI = "import sys; from broker.cli import main; sys.exit(main(sys.argv[1:]))"


def no_credentials_env(tmp_path: Path) -> dict[str, str]:
    """The environment without any AWS credential source (nor IMDS)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "no-credentials"),
        AWS_CONFIG_FILE=str(tmp_path / "no-config"),
        AWS_EC2_METADATA_DISABLED="true",  # no instance-profile lookup off loopback
        PYTHONPATH=str(REPO),
    )
    return env


def run_cli(
    args: list[str], env: dict[str, str], timeout_s: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CLI, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def readme_exit_codes() -> dict[int, str]:
    text = (REPO / "docs" / "reference" / "environment.md").read_text(encoding="utf-8")
    section = text.split("## Exit codes\n", 1)[1].split("\n## ", 1)[0]
    return {int(m[1]): m[2] for m in re.finditer(r"^\| (\d) \| (.+?) \|", section, re.M)}


def test_the_readme_documents_each_code_these_tests_produce() -> None:
    assert sorted(readme_exit_codes()) == [0, 1, 2, 3]


def test_0_when_the_command_succeeds(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "cost",
                "effective",
                "--units",
                "1",
                "--hours",
                "1",
                "--on-demand",
                "1",
                "--spot",
                "0.4",
            ]
        )
        == 0
    )


def test_2_for_an_unknown_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["whatif", "--no-such-option"]) == EXIT_INPUT == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--no-such-option" in err


def test_2_for_a_bad_field_in_the_config_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "daemon.yaml"
    cfg.write_text("owner: me\nhorizon_hours: 0\n")
    assert main(["daemon", "--config", str(cfg), "--once"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(cfg) in err and "horizon_hours" in err


def test_3_when_spot_can_never_finish(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "cost",
        "effective",
        "--units",
        "1",
        "--hours",
        "1",
        "--on-demand",
        "1",
        "--spot",
        "1",
        "--interruptions",
        "2",
        "--restart-hours",
        "0.5",
    ]
    assert main(args) == EXIT_EXPLAIN == 3
    assert "cannot decide" in capsys.readouterr().err


def test_1_when_aws_has_no_credentials(moto_server: str, tmp_path: Path) -> None:
    done = run_cli(
        [
            "market",
            "fetch",
            "aws",
            "--regions",
            "us-east-1",
            "--instance-types",
            "g5.xlarge",
            "--days",
            "1",
            "--out",
            str(tmp_path / "prices.csv"),
            "--endpoint-url",
            moto_server,
        ],
        no_credentials_env(tmp_path),
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("spotfolio: AuthError: ") and "credentials" in done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1
    assert not (tmp_path / "prices.csv").exists()  # nothing half-written


def test_1_when_a_running_daemon_stops_on_a_credential_error(tmp_path: Path) -> None:
    """The scheduled daemon (not ``--once``): start-up succeeds, then the
    notice poll meets an expired credential; the daemon stops, releases its
    lease and the command exits 1, not 0."""
    account = tmp_path / "account.json"
    cloud, _clock = PersistentSimCloud.open(open_market("default"), account, SimOptions(seed=3))  # type: ignore[arg-type]
    cloud.cloud.inject("poll_notices", AuthError("sim: the security token has expired"))
    cloud._save()
    cfg = tmp_path / "daemon.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "owner": "me",
                "store_url": f"sqlite:///{tmp_path / 'state.db'}",
                "provider": "sim",
                "planner": "fast",
                "metrics_port": 0,
                "intervals": {
                    "poll_notices_s": 0.2,
                    "reconcile_s": 60,
                    "replan_s": 60,
                    "refresh_market_s": 600,
                },
                "sim": {"state_file": str(account), "seed": 3},
            }
        )
    )
    done = run_cli(["daemon", "--config", str(cfg), "--log-level", "warning"], dict(os.environ))
    assert done.returncode == 1, done.stderr[-2000:]
    assert "spotfolio: AuthError: sim: the security token has expired" in done.stderr
