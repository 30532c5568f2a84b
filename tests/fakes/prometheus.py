"""A real Prometheus server with a stated history, for the live-demand tests.

``prometheus_with`` writes the samples as OpenMetrics, backfills them into a
fresh TSDB with ``promtool tsdb create-blocks-from openmetrics`` (so the
history may lie anywhere in time: the simulated account's clock), starts
``prometheus`` on a free 127.0.0.1 port over that TSDB and yields its URL;
the server is stopped (by its own pid) on the way out. Debian's
``prometheus`` package has both binaries (``.ci/run`` installs it);
``PROMETHEUS_ABSENT`` says why a test is skipped without them.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

__all__ = ["PROMETHEUS_ABSENT", "daily_steps", "free_port", "prometheus_with"]

PROMETHEUS_ABSENT = shutil.which("prometheus") is None or shutil.which("promtool") is None
READY_TIMEOUT_S = 60.0

Series = tuple[str, Sequence[tuple[datetime, float]]]  # (name{labels}, samples)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _openmetrics(series: Sequence[Series]) -> str:
    lines: list[str] = []
    for name, samples in series:
        family = name.split("{", 1)[0]
        lines.append(f"# TYPE {family} gauge")
        lines += [f"{name} {v:g} {t.timestamp():.3f}" for t, v in samples]
    return "\n".join([*lines, "# EOF", ""])


@contextmanager
def prometheus_with(series: Sequence[Series], workdir: Path) -> Iterator[str]:
    """A Prometheus server holding ``series``; yields its base URL."""
    data = workdir / "tsdb"
    src = workdir / "history.om"
    src.write_text(_openmetrics(series), encoding="utf-8")
    subprocess.run(
        ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(src), str(data)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    cfg = workdir / "prometheus.yml"
    cfg.write_text("global: {}\n", encoding="utf-8")
    port = free_port()
    log = (workdir / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={cfg}",
            f"--storage.tsdb.path={data}",
            f"--web.listen-address=127.0.0.1:{port}",
            # The backfilled history is months old: keep it.
            "--storage.tsdb.retention.time=100y",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    "prometheus did not become ready: "
                    + (workdir / "prometheus.log").read_text(errors="replace")[-2000:]
                )
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        log.close()


def daily_steps(
    start: datetime, days: int, *, up_hour: int, down_hour: int, low: float, high: float
) -> list[tuple[datetime, float]]:
    """A sample a minute for ``days`` from ``start``: ``high`` from
    ``up_hour`` to ``down_hour`` (UTC) each day, ``low`` otherwise."""
    out = []
    for i in range(days * 24 * 60):
        t = start + timedelta(minutes=i)
        out.append((t, high if up_hour <= t.hour < down_hour else low))
    return out
