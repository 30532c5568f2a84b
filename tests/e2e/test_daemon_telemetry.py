"""A real ``spotfolio daemon`` process (the simulated cloud, real time) with
``metrics_addr: 0.0.0.0``: its endpoint listens on every address, the test
(another process) scrapes it through 127.0.0.1 only, and every stderr line of
its ``--log-format json`` log parses, with a timestamp, until SIGTERM; its
``/healthz`` and ``/readyz`` answer 200."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.paths import REPO
from tests.unit.broker.daemon.test_telemetry import _free_port, _listening_on

RUN_CLI = "import sys; from broker.cli import main; sys.exit(main(sys.argv[1:]))"


def _get(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text: str = r.read().decode()
            return text
    except (urllib.error.URLError, ConnectionError):
        return None


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }


@pytest.mark.slow
def test_a_daemon_on_0000_is_scraped_through_loopback_and_logs_json_lines(tmp_path: Path) -> None:
    port = _free_port()
    cfg = tmp_path / "daemon.yaml"
    cfg.write_text(
        "owner: e2e-telemetry\nstore_url: sqlite:///state.db\nplanner: fast\n"
        f"metrics_port: {port}\nmetrics_addr: 0.0.0.0\n"
        "intervals: {reconcile_s: 1, poll_notices_s: 1}\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-c", RUN_CLI, "daemon", "--config", str(cfg), "--log-format", "json"]
    proc = subprocess.Popen(
        argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        text, spend = None, 0.0
        deadline = time.monotonic() + 120
        # Spend accrues between two fleet updates (reconcile every second).
        while time.monotonic() < deadline and proc.poll() is None and spend <= 0:
            time.sleep(0.5)
            text = _get(port)
            if text is not None:
                got = _samples(text)
                spend = sum(v for (n, _), v in got.items() if n == "spotfolio_spend_usd_total")
        assert text is not None, f"no endpoint; daemon exited {proc.returncode}"
        assert spend > 0
        assert _listening_on(port) == {"0.0.0.0"}
        assert any(name == "spotfolio_build_info" and v == 1 for (name, _), v in got.items())
        assert got[("spotfolio_lease_held", ())] == 1
        # the process is alive and ready: lease held, market fresh, queue read
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
            assert r.status == 200 and json.loads(r.read()) == {"alive": True}
        ready: dict[str, object] = {}
        while time.monotonic() < deadline and ready.get("ready") is not True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
                    ready = json.loads(r.read())
            except urllib.error.HTTPError as e:  # 503 until the first poll
                ready = json.loads(e.read())
                time.sleep(0.5)
        assert ready == {"ready": True}
        # every labelled counter is there before its first increment
        assert got[("spotfolio_job_errors_total", (("job", "replan"),))] == 0
        assert ("spotfolio_spot_share_ratio", ()) in got
        if shutil.which("promtool"):
            check = subprocess.run(
                ["promtool", "check", "metrics"], input=text, capture_output=True, text=True
            )
            assert check.returncode == 0, check.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-2000:]
    lines = [json.loads(line) for line in err.splitlines() if line.strip()]
    assert lines, "the daemon logged nothing"
    for line in lines:
        ts = datetime.fromisoformat(line["ts"])
        assert ts.utcoffset() == timedelta(0) and line["level"] and line["logger"]
    events = [x.get("event") for x in lines]
    assert "metrics_serving" in events and events[-1] == "lease_released"
    serving = next(x for x in lines if x.get("event") == "metrics_serving")
    assert serving["port"] == port and serving["addr"] == "0.0.0.0"
