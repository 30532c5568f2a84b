"""The on-instance preemption watcher against a fake GCE metadata server.

The watcher runs as a separate process with ``python -I -S`` (no
site-packages, no project on the path): if it imported anything outside the
standard library, these tests would fail, as it would on a bare VM image. The
fake metadata server answers like the real one: 403 without the
``Metadata-Flavor: Google`` header, an ``ETag`` on every reply, and
``wait_for_change=true`` held until the value differs from ``last_etag`` (or
changes, without one) or ``timeout_sec`` passes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from markets.gcp import watcher

WATCHER = Path(watcher.__file__).resolve()
PATH = "/computeMetadata/v1/instance/preempted"


class FakeMetadata:
    """``instance/preempted`` of one VM; ``flip()`` preempts it."""

    def __init__(self, *, lifetime_s: float = 60.0) -> None:
        self.value = "FALSE"
        self.version = 1
        self.flipped_at: float | None = None
        self.requests: list[tuple[str, str]] = []  # (query, Metadata-Flavor header)
        self.cond = threading.Condition()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                flavor = self.headers.get("Metadata-Flavor", "")
                with fake.cond:
                    fake.requests.append((parts.query, flavor))
                    fake.cond.notify_all()
                if parts.path != PATH or flavor != "Google":
                    self._reply(403, "Missing Metadata-Flavor:Google header.", "")
                    return
                q = {k: v[-1] for k, v in parse_qs(parts.query).items()}
                with fake.cond:
                    if q.get("wait_for_change") == "true":
                        seen = q.get("last_etag") or f"v{fake.version}"
                        fake.cond.wait_for(
                            lambda: f"v{fake.version}" != seen,
                            timeout=float(q.get("timeout_sec", "300")),
                        )
                    value, etag = fake.value, f"v{fake.version}"
                self._reply(200, value, etag)

            def _reply(self, status: int, body: str, etag: str) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/text")
                if etag:
                    self.send_header("ETag", etag)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{PATH}"
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._timer = threading.Timer(lifetime_s, self.stop)  # bounded: stops itself
        self._timer.daemon = True

    def start(self) -> FakeMetadata:
        self._thread.start()
        self._timer.start()
        return self

    def stop(self) -> None:
        self._timer.cancel()
        with self.cond:
            self.version += 1  # release held long polls
            self.cond.notify_all()
        self.server.shutdown()
        self.server.server_close()

    def flip(self) -> None:
        with self.cond:
            self.value, self.version = "TRUE", self.version + 1
            self.flipped_at = time.time()
            self.cond.notify_all()

    def wait_for_long_poll(self, timeout_s: float = 10.0) -> None:
        with self.cond:
            ok = self.cond.wait_for(
                lambda: any("wait_for_change=true" in q for q, _ in self.requests),
                timeout=timeout_s,
            )
        assert ok, "the watcher never long-polled"


@pytest.fixture
def metadata() -> Iterator[FakeMetadata]:
    fake = FakeMetadata().start()
    yield fake
    fake.stop()


def hook(tmp_path: Path, body: str) -> str:
    """A hook command: a Python script (stdlib) with ``body``."""
    script = tmp_path / "hook.py"
    script.write_text("import os, sys, time, pathlib, subprocess\n" + body + "\n")
    return f"{sys.executable} -I -S {script}"


def start_watcher(
    metadata: FakeMetadata, tmp_path: Path, command: str, *extra: str
) -> subprocess.Popen[str]:
    args = [
        sys.executable,
        "-I",
        "-S",
        str(WATCHER),
        "--hook",
        command,
        "--metadata-url",
        metadata.url,
        "--give-up-after-s",
        "20",
        "--report",
        str(tmp_path / "report.jsonl"),
        *extra,
    ]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def report(tmp_path: Path) -> dict[str, object]:
    lines = (tmp_path / "report.jsonl").read_text().splitlines()
    assert len(lines) == 1
    data: dict[str, object] = json.loads(lines[0])
    return data


def test_the_hook_runs_inside_the_window_when_preempted_flips(
    metadata: FakeMetadata, tmp_path: Path
) -> None:
    marker = tmp_path / "checkpointed"
    budget_seen = tmp_path / "budget"
    command = hook(
        tmp_path,
        f"pathlib.Path({str(budget_seen)!r}).write_text(os.environ['SPOTFOLIO_HOOK_BUDGET_S'])\n"
        f"pathlib.Path({str(marker)!r}).write_text(repr(time.time()))",
    )
    proc = start_watcher(metadata, tmp_path, command)
    metadata.wait_for_long_poll()
    metadata.flip()
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert metadata.flipped_at is not None
    assert 0 <= float(marker.read_text()) - metadata.flipped_at < 30.0  # inside the window
    assert float(budget_seen.read_text()) == 27.0  # 30 s window - 3 s margin
    rep = report(tmp_path)
    assert rep["event"] == "preempted" and rep["exit_code"] == 0 and rep["timed_out"] is False
    assert json.loads(out.strip()) == rep  # also on stdout (journald)
    assert all(flavor == "Google" for _, flavor in metadata.requests)


def test_a_hook_slower_than_the_window_is_killed_and_reported(
    metadata: FakeMetadata, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    command = hook(
        tmp_path,
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"pathlib.Path({str(pids)!r}).write_text(f'{{os.getpid()}} {{child.pid}}')\n"
        "time.sleep(60)",
    )
    proc = start_watcher(metadata, tmp_path, command, "--window-s", "2", "--margin-s", "0.5")
    metadata.wait_for_long_poll()
    metadata.flip()
    started = time.monotonic()
    proc.communicate(timeout=30)
    assert proc.returncode == watcher.EXIT_TIMED_OUT
    assert time.monotonic() - started < 10  # killed at 1.5 s, not after the hook's 60 s
    rep = report(tmp_path)
    assert rep["timed_out"] is True and rep["exit_code"] is None and rep["budget_s"] == 1.5
    for pid in map(int, pids.read_text().split()):  # the hook and its child: the whole group
        assert not _alive(pid)


def _alive(pid: int) -> bool:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except FileNotFoundError:
            return False
        if state == "Z":
            return False  # dead, waiting to be reaped
        time.sleep(0.05)
    return True


def test_a_failing_hook_is_reported_as_failed(metadata: FakeMetadata, tmp_path: Path) -> None:
    proc = start_watcher(metadata, tmp_path, hook(tmp_path, "sys.exit(7)"))
    metadata.wait_for_long_poll()
    metadata.flip()
    proc.communicate(timeout=30)
    assert proc.returncode == watcher.EXIT_HOOK_FAILED
    assert report(tmp_path)["exit_code"] == 7


def test_a_vm_already_preempted_when_the_watcher_starts_runs_the_hook(
    metadata: FakeMetadata, tmp_path: Path
) -> None:
    metadata.flip()
    proc = start_watcher(metadata, tmp_path, hook(tmp_path, "pass"))
    proc.communicate(timeout=30)
    assert proc.returncode == 0 and report(tmp_path)["exit_code"] == 0


def test_an_ordinary_shutdown_exits_without_running_the_hook(
    metadata: FakeMetadata, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    command = hook(tmp_path, f"pathlib.Path({str(marker)!r}).write_text('x')")
    proc = start_watcher(metadata, tmp_path, command)
    metadata.wait_for_long_poll()
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=10)
    assert proc.returncode == 0 and not marker.exists()


def test_metadata_server_errors_are_retried_with_backoff() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    closed = "http://127.0.0.1:9/computeMetadata/v1/instance/preempted"  # discard port: refused
    seen = watcher.wait_for_preemption(
        closed, give_up_after_s=30, monotonic=lambda: now[0], sleep=sleep, log=lambda _: None
    )
    assert seen is False
    assert slept[:5] == [1.0, 2.0, 4.0, 8.0, 10.0]


def test_bad_usage_exits_2(tmp_path: Path) -> None:
    assert watcher.main(["--hook", " ", "--give-up-after-s", "1"]) == watcher.EXIT_USAGE
    assert os.path.exists(WATCHER)


def test_the_watcher_is_stdlib_only_python_38_syntax() -> None:
    import ast

    tree = ast.parse(WATCHER.read_text(), feature_version=(3, 8))  # VM images' oldest Python
    names = {
        a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    }
    names |= {
        n.module.split(".")[0]
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and n.module and n.level == 0
    }
    assert names <= set(sys.stdlib_module_names) | {"__future__"}, names


def test_a_sigterm_swallowed_by_a_finalizer_still_ends_the_wait() -> None:
    """The SIGTERM handler's exception lands wherever the main thread is; in
    a finalizer Python prints it and carries on. The wait ends at its next
    poll anyway (as the EC2 watcher's, ``markets.aws.watcher``)."""
    with pytest.raises(watcher.Terminating):
        watcher._on_term(signal.SIGTERM, None)  # the exception a finalizer swallows
    try:
        with pytest.raises(watcher.Terminating):
            watcher.wait_for_preemption(
                "http://127.0.0.1:9", give_up_after_s=20, sleep=lambda _: None, log=lambda _: None
            )
    finally:
        watcher._TERM_SEEN[0] = False
