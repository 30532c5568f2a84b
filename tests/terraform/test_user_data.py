"""The AWS watcher's user data (``terraform/modules/aws/watcher-user-data.sh.tftpl``),
rendered by Terraform's own ``templatefile`` (``terraform console``, no
provider, no init), checked as a shell script, and its systemd unit checked
by ``systemd-analyze verify`` where systemd is installed.
"""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from markets.aws import watcher
from tests.terraform.hcl import TF_ROOT

TEMPLATE = TF_ROOT / "modules" / "aws" / "watcher-user-data.sh.tftpl"
WATCHER = Path(watcher.__file__).resolve()
HOOK = "/opt/job/checkpoint.sh --fast"

pytestmark = pytest.mark.skipif(shutil.which("terraform") is None, reason="no terraform binary")


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> str:
    work = tmp_path_factory.mktemp("tf-console")
    expr = (
        f'base64encode(templatefile("{TEMPLATE}", {{ watcher_py = file("{WATCHER}"), '
        f'hook_command = "{HOOK}", on_rebalance = "checkpoint" }}))'
    )
    out = subprocess.run(
        ["terraform", "console"],
        input=expr,
        cwd=work,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return base64.b64decode(out.stdout.strip().strip('"')).decode()


def _heredoc(script: str, marker: str) -> str:
    m = re.search(rf"<<'{marker}'\n(.*?)\n{marker}\n", script, re.S)
    assert m, marker
    return m.group(1)


def test_the_user_data_installs_the_watcher_byte_for_byte(rendered: str) -> None:
    assert _heredoc(rendered, "SPOTFOLIO_WATCHER_PY") + "\n" == WATCHER.read_text()
    assert "SPOTFOLIO_WATCHER_PY" not in WATCHER.read_text()  # the heredoc cannot end early


def test_the_user_data_is_valid_bash_that_enables_the_unit(rendered: str, tmp_path: Path) -> None:
    script = tmp_path / "user-data.sh"
    script.write_text(rendered)
    subprocess.run(["bash", "-n", str(script)], check=True)
    assert rendered.startswith("#!/bin/bash\n")
    assert "systemctl enable --now spotfolio-spot-watcher.service" in rendered


def test_the_unit_runs_the_hook_with_the_state_file_and_survives_a_stop(rendered: str) -> None:
    unit = _heredoc(rendered, "SPOTFOLIO_UNIT")
    [exec_start] = [line for line in unit.splitlines() if line.startswith("ExecStart=")]
    assert f"--hook '{HOOK}'" in exec_start and "--on-rebalance checkpoint" in exec_start
    assert "--state /var/lib/spotfolio/spot-watcher.state" in exec_start
    stop = int(re.search(r"TimeoutStopSec=(\d+)", unit).group(1))  # type: ignore[union-attr]
    assert stop > watcher.WINDOW_S and "KillMode=mixed" in unit


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_systemd_accepts_the_unit(rendered: str, tmp_path: Path) -> None:
    unit = tmp_path / "spotfolio-spot-watcher.service"
    unit.write_text(_heredoc(rendered, "SPOTFOLIO_UNIT") + "\n")
    out = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    problems = [
        line
        for line in out.stderr.splitlines()
        if "spotfolio-spot-watcher" in line and "/usr/local/bin" not in line
    ]
    assert problems == [], out.stderr
