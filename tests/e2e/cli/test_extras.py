"""``pip install spotfolio`` without extras: the core runs (``--version``, a
daemon simulation), and a command that needs an extra says which one in one
line and exits 2.

Each case is a real ``spotfolio`` process whose optional libraries are made
unimportable (``sys.modules[name] = None``, so ``import boto3`` raises the
``ModuleNotFoundError`` a bare install raises), as a venv without the extras
would behave, without building one per test. ``.ci/run`` also runs the
README's first command in a venv installed from ``requirements/base.txt``.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from markets.extras import EXTRAS
from tests.paths import REPO

# Runs the CLI with the named modules unimportable.
_WITHOUT = """
import sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None
from broker.cli import main
raise SystemExit(main(sys.argv[2:]))
"""


def _spotfolio_without(
    modules: list[str], argv: list[str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT, ",".join(modules), *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


NO_EXTRAS = sorted(EXTRAS)


@pytest.mark.parametrize(
    ("argv", "option", "extra"),
    [
        pytest.param(["whatif", "--market", "aws"], "--market", "aws", id="whatif-market-aws"),
        pytest.param(["whatif", "--market", "gcp"], "--market", "gcp", id="whatif-market-gcp"),
        pytest.param(["whatif", "--plot", "chart.png"], "--plot", "plot", id="whatif-plot"),
        pytest.param(["whatif", "--solver", "highs"], "--solver", "highs", id="whatif-highs"),
        pytest.param(["whatif", "--usage", "bill.csv"], "--usage", "usage", id="whatif-usage"),
        pytest.param(
            [
                "market",
                "fetch",
                "aws",
                "--regions",
                "us-east-1",
                "--instance-types",
                "g5.xlarge",
                "--out",
                "prices.csv",
            ],
            "provider",
            "aws",
            id="market-fetch-aws",
        ),
        pytest.param(
            ["daemon", "--config", "daemon.yaml", "--once", "--dry-run"],
            "store_url",
            "postgres",
            id="daemon-store-postgres",
        ),
    ],
)
def test_command_without_its_extra_names_the_extra_in_one_line_and_exits_2(
    tmp_path: Path, argv: list[str], option: str, extra: str
) -> None:
    (tmp_path / "daemon.yaml").write_text(
        "owner: team-a\nprovider: sim\nmetrics_port: 0\nplanner: fast\n"
        "store_url: postgresql+psycopg://spotfolio:hunter2@127.0.0.1:1/state\n"
    )
    done = _spotfolio_without(NO_EXTRAS, argv, tmp_path)
    err = done.stderr.strip()
    assert done.returncode == 2, err
    assert "\n" not in err and "Traceback" not in err
    assert err.startswith(f"spotfolio: error: {option}: ")
    assert f"pip install 'spotfolio[{extra}]'" in err
    assert "hunter2" not in err  # the store URL's password stays out of the message
    assert not (tmp_path / "chart.png").exists() and not (tmp_path / "prices.csv").exists()


def test_daemon_simulation_runs_on_the_core_dependencies_alone(tmp_path: Path) -> None:
    done = _spotfolio_without(
        NO_EXTRAS, ["daemon", "--provider", "sim", "--hours", "2", "--json"], tmp_path
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["counters"]["launches"] > 0


def test_version_is_the_installed_distributions_as_pyproject_declares_it(tmp_path: Path) -> None:
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    done = _spotfolio_without(NO_EXTRAS, ["--version"], tmp_path)
    assert done.returncode == 0, done.stderr
    # package metadata, so a stale install (metadata older than pyproject) shows here
    assert done.stdout == f"spotfolio {importlib.metadata.version('spotfolio')}\n"
    assert done.stdout == f"spotfolio {declared}\n"
