"""The GCP runtime's autohealing: the VM's cloud-init (rendered by
Terraform's own ``templatefile``, ``terraform console``, no provider)
installs ``heal.sh`` byte for byte and a timer that runs it; the units pass
``systemd-analyze verify`` where systemd is installed; the script restarts the
daemon's unit exactly when Docker reports the container unhealthy (its
HEALTHCHECK on ``/readyz``), run here against stand-in ``docker`` and
``systemctl`` commands. Without a metrics port there is no health check and
no timer."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.terraform.hcl import TF_ROOT

GCP = TF_ROOT / "modules" / "gcp"
HEAL = GCP / "heal.sh"

pytestmark = pytest.mark.skipif(shutil.which("terraform") is None, reason="no terraform binary")


def _render(work: Path, metrics_port: int) -> dict[str, object]:
    values = {
        "image": "example/spotfolio:1",
        "registry_host": "",
        "container_user": "10001:10001",
        "daemon_command": "'daemon'",
        "config_secret": "projects/p/secrets/c/versions/latest",
        "config_path": "/run/spotfolio/daemon.yaml",
        "config_sha256": "0" * 64,
        "run_dir": "/run/spotfolio",
        "state_dir": "/var/lib/spotfolio",
        "sqlite": True,
        "state_device": "/dev/disk/by-id/google-state",
        "sql_connection": "",
        "metrics_port": metrics_port,
    }
    args = ", ".join(f"{k} = {json.dumps(v)}" for k, v in values.items())
    expr = (
        f'base64encode(templatefile("{GCP}/cloud-init.yaml.tftpl", {{ {args}, '
        f'fetch_config = file("{GCP}/fetch_config.py"), heal_sh = file("{HEAL}") }}))'
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
    doc = yaml.safe_load(base64.b64decode(out.stdout.strip().strip('"')).decode())
    assert isinstance(doc, dict)
    return doc


@pytest.fixture(scope="module")
def cloud_init(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    return _render(tmp_path_factory.mktemp("tf-console"), 9108)


def _files(doc: dict[str, object]) -> dict[str, str]:
    files = doc["write_files"]
    assert isinstance(files, list)
    return {f["path"]: f["content"] for f in files}


def test_the_vm_installs_the_heal_script_and_starts_its_timer(
    cloud_init: dict[str, object],
) -> None:
    files = _files(cloud_init)
    assert files["/etc/spotfolio/heal.sh"] == HEAL.read_text()
    assert "ExecStart=/etc/spotfolio/heal.sh" in files["/etc/systemd/system/spotfolio-heal.service"]
    assert "OnUnitActiveSec=30s" in files["/etc/systemd/system/spotfolio-heal.timer"]
    assert (
        "HEALTHCHECK_URL=http://127.0.0.1:9108/readyz"
        in files["/etc/systemd/system/spotfolio.service"]
    )
    assert "systemctl start spotfolio-heal.timer" in cloud_init["runcmd"]  # type: ignore[operator]


def test_no_metrics_port_no_health_check_and_no_timer(tmp_path: Path) -> None:
    doc = _render(tmp_path, 0)
    assert not [p for p in _files(doc) if "heal" in p]
    assert "--no-healthcheck" in _files(doc)["/etc/systemd/system/spotfolio.service"]
    assert not [c for c in doc["runcmd"] if "heal" in c]  # type: ignore[attr-defined]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_systemd_accepts_the_heal_units(cloud_init: dict[str, object], tmp_path: Path) -> None:
    files = _files(cloud_init)
    units = []
    for name in ("spotfolio-heal.service", "spotfolio-heal.timer"):
        (tmp_path / name).write_text(files[f"/etc/systemd/system/{name}"])
        units.append(str(tmp_path / name))
    out = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *units],
        capture_output=True,
        text=True,
        timeout=60,
    )
    problems = [
        line
        for line in out.stderr.splitlines()
        if "spotfolio-heal" in line and "/etc/spotfolio/heal.sh" not in line
    ]
    assert problems == [], out.stderr


@pytest.mark.parametrize(
    ("health", "restarted"),
    [("unhealthy", True), ("healthy", False), ("starting", False), ("", False), (None, False)],
)
def test_the_script_restarts_the_daemon_only_when_docker_says_unhealthy(
    tmp_path: Path, health: str | None, restarted: bool
) -> None:
    calls = tmp_path / "calls"
    # docker inspect prints the status (None: no such container, exit 1)
    docker = (
        f'echo "$*" >> {calls}; exit 1'
        if health is None
        else (f"echo \"$*\" >> {calls}; echo '{health}'")
    )
    for name, body in {"docker": docker, "systemctl": f'echo "systemctl $*" >> {calls}'}.items():
        (tmp_path / name).write_text(f"#!/bin/sh\n{body}\n")
        (tmp_path / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:/usr/bin:/bin"}
    out = subprocess.run(["sh", str(HEAL)], env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    lines = calls.read_text().splitlines()
    assert lines[0].startswith("inspect --format") and lines[0].endswith(" spotfolio")
    assert (lines[1:] == ["systemctl restart spotfolio.service"]) is restarted
    assert ("unhealthy" in out.stdout) is restarted
