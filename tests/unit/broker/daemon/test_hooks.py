"""Checkpoint hooks at notice time: a command or a webhook, bounded by the
notice window's budget, every outcome recorded (broker.daemon.hooks)."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from pydantic import ValidationError

from broker.daemon.hooks import (
    HOOK_ENV_ALLOWLIST,
    SIGNATURE_HEADER,
    CheckpointHook,
    HookResult,
    HookRunner,
    run_checkpoint_hook,
    sign,
)

DEADLINE = datetime(2026, 3, 1, 0, 2, tzinfo=UTC)


def _run(hook: CheckpointHook | None, budget_s: float = 5.0) -> HookResult:
    return run_checkpoint_hook(
        hook,
        notice_id="evt-1",
        workload="llm-finetune",
        instance_id="i-abc",
        deadline=DEADLINE,
        budget_s=budget_s,
    )


def _py(code: str) -> CheckpointHook:
    return CheckpointHook(command=(sys.executable, "-c", code))


# --- configuration ------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param({}, id="neither"),
        pytest.param({"command": ["true"], "url": "http://x/"}, id="both"),
        pytest.param({"url": "file:///etc/passwd"}, id="not-http"),
        pytest.param({"command": []}, id="empty-command"),
    ],
)
def test_a_hook_is_exactly_one_command_or_one_http_url(spec: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        CheckpointHook.model_validate(spec)


# --- commands ---------------------------------------------------------------------


def test_command_success_gets_the_notice_in_its_environment(tmp_path: Path) -> None:
    out = tmp_path / "env.json"
    code = (
        "import json, os, sys; "
        f"json.dump({{k: v for k, v in os.environ.items() if k.startswith('SPOTFOLIO_')}}, "
        f"open({str(out)!r}, 'w')); sys.stderr.write('saved step 1200')"
    )
    r = _run(_py(code))
    assert r.ok and r.kind == "command" and r.exit_code == 0
    assert r.detail == "saved step 1200"
    env = json.loads(out.read_text())
    assert env["SPOTFOLIO_NOTICE_ID"] == "evt-1"
    assert env["SPOTFOLIO_WORKLOAD"] == "llm-finetune"
    assert env["SPOTFOLIO_INSTANCE_ID"] == "i-abc"
    assert env["SPOTFOLIO_DEADLINE"] == DEADLINE.isoformat()
    assert float(env["SPOTFOLIO_BUDGET_S"]) == 5.0


def test_command_failure_is_recorded_with_its_exit_code_and_stderr() -> None:
    r = _run(_py("import sys; sys.stderr.write('disk full'); sys.exit(3)"))
    assert not r.ok and not r.timed_out
    assert r.exit_code == 3
    assert r.detail == "exit 3: disk full"


def test_command_that_cannot_start_is_a_failure_not_an_exception(tmp_path: Path) -> None:
    r = _run(CheckpointHook(command=(str(tmp_path / "no-such-hook"),)))
    assert not r.ok and "could not start" in r.detail


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")  # dead, waiting to be reaped by init


def test_command_over_budget_is_killed_with_everything_it_started(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    code = (
        "import subprocess, sys, time; "
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        f"open({str(pidfile)!r}, 'w').write(str(p.pid)); time.sleep(60)"
    )
    t0 = time.monotonic()
    r = _run(_py(code), budget_s=1.0)
    elapsed = time.monotonic() - t0
    assert r.timed_out and not r.ok
    assert "killed after its 1.0 s budget" in r.detail
    assert elapsed < 20  # the budget plus the kill's bounded wait, far short of the 60 s sleep
    grandchild = int(pidfile.read_text())
    for _ in range(40):
        if _gone(grandchild):
            break
        time.sleep(0.05)
    assert _gone(grandchild)


@pytest.mark.parametrize("budget_s", [0.0, -3.0], ids=["zero", "window-passed"])
def test_no_time_left_means_the_hook_is_not_called(budget_s: float, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    r = _run(_py(f"open({str(marker)!r}, 'w')"), budget_s=budget_s)
    assert not r.ok and "not called" in r.detail
    assert not marker.exists()


def test_no_hook_configured() -> None:
    r = _run(None)
    assert r.ok and r.kind == "none"


# --- webhooks against a local server --------------------------------------------------


class _Hooks(BaseHTTPRequestHandler):
    received: ClassVar[list[dict[str, object]]] = []
    release: ClassVar[threading.Event] = threading.Event()

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Hooks.received.append({"path": self.path, "body": body, "token": self.headers["X-Token"]})
        if self.path == "/slow":
            _Hooks.release.wait(5.0)  # bounded: the fixture releases it at teardown
        status = 500 if self.path == "/broken" else 200
        reply = b"checkpoint failed" if status == 500 else b'{"saved": true}'
        try:
            self.send_response(status)
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)
        except (BrokenPipeError, ConnectionResetError):
            pass  # /slow: the client gave up at its budget, as it should

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Hooks.received = []
    _Hooks.release.clear()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Hooks)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        _Hooks.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5.0)


def _hook(url: str) -> CheckpointHook:
    return CheckpointHook(url=url, headers={"X-Token": "t0k"})


def test_webhook_success_posts_the_notice_as_json(server: str) -> None:
    r = _run(_hook(f"{server}/ckpt"))
    assert r.ok and r.kind == "webhook" and r.http_status == 200
    assert r.detail == "HTTP 200" and r.attempts == 1  # the status only, never the body
    (got,) = _Hooks.received
    assert got["path"] == "/ckpt" and got["token"] == "t0k"
    assert got["body"] == {
        "notice_id": "evt-1",
        "workload": "llm-finetune",
        "instance_id": "i-abc",
        "deadline": DEADLINE.isoformat(),
        "budget_s": 5.0,
    }


def test_webhook_error_status_is_a_recorded_failure_after_one_retry(server: str) -> None:
    r = _run(_hook(f"{server}/broken"))
    assert not r.ok and r.http_status == 500
    assert r.detail == "HTTP 500"  # "checkpoint failed", the body, is not kept
    assert r.attempts == 2 and [x["path"] for x in _Hooks.received] == ["/broken"] * 2


def test_webhook_that_does_not_answer_in_budget_times_out(server: str) -> None:
    t0 = time.monotonic()
    r = _run(_hook(f"{server}/slow"), budget_s=0.3)
    assert time.monotonic() - t0 < 1.5
    assert r.timed_out and not r.ok
    assert "no answer within its 0.3 s budget" in r.detail


def test_webhook_to_a_closed_port_fails_fast() -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = _run(_hook(f"http://127.0.0.1:{port}/x"), budget_s=2.0)
    assert not r.ok and not r.timed_out
    assert r.detail.startswith("request failed")


def test_runner_returns_at_once_and_the_result_comes_within_budget(server: str) -> None:
    runner = HookRunner(max_workers=2)
    try:
        t0 = time.monotonic()
        fut = runner.submit(
            _hook(f"{server}/slow"),
            notice_id="evt-2",
            workload="w",
            instance_id="i-1",
            deadline=None,
            budget_s=0.4,
        )
        assert time.monotonic() - t0 < 0.2  # the notice path does not wait
        r = fut.result(timeout=3.0)
        assert r.timed_out
        assert r.as_record()["budget_s"] == 0.4
    finally:
        runner.shutdown()
    assert os.environ.get("SPOTFOLIO_NOTICE_ID") is None  # nothing leaked into our env


def test_a_socket_timeout_that_beats_the_join_is_still_a_timeout(
    monkeypatch: pytest.MonkeyPatch, server: str
) -> None:
    """The socket's own timeout and the thread join share the budget; when
    the socket's fires first the hook is out of budget all the same (seen as
    a flaky 'request failed: timed out' under load)."""
    import urllib.error

    from broker.daemon import hooks

    class Opener:
        def __init__(self, error: BaseException) -> None:
            self.error, self.calls = error, 0

        def open(self, *_a: object, **_k: object) -> None:
            self.calls += 1
            raise self.error

    timing_out = Opener(urllib.error.URLError(TimeoutError("timed out")))
    monkeypatch.setattr(hooks, "_OPENER", timing_out)
    r = _run(_hook(f"{server}/slow"), budget_s=5.0)
    assert r.timed_out and not r.ok and "budget" in r.detail
    assert timing_out.calls == 1  # a timeout had its budget: no second try

    # Other failures stay failures, not timeouts (and are tried once more).
    refused = Opener(urllib.error.URLError(ConnectionRefusedError("refused")))
    monkeypatch.setattr(hooks, "_OPENER", refused)
    r = _run(_hook(f"{server}/slow"), budget_s=5.0)
    assert not r.timed_out and not r.ok and "refused" in r.detail
    assert refused.calls == 2 and r.attempts == 2


# --- the environment a command gets -----------------------------------------------

DAEMON_SECRETS = {
    "PGPASSWORD": "pg-s3cret",
    "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "aws-s3cret",
    "AWS_SESSION_TOKEN": "aws-session",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/v2/credentials/abc",
    "GOOGLE_APPLICATION_CREDENTIALS": "/secrets/sa.json",
    "HTTPS_PROXY": "http://user:proxy-s3cret@proxy:3128",
}


def test_a_command_gets_the_allowlist_its_own_env_and_the_notice_never_the_daemons(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for k, v in DAEMON_SECRETS.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("DRAIN_KEY", "from-a-reference")
    out = tmp_path / "env.json"
    code = f"import json, os; json.dump(dict(os.environ), open({str(out)!r}, 'w'))"
    hook = CheckpointHook.model_validate(
        {
            "command": [sys.executable, "-c", code],
            "env": {"JOB_DIR": "/data/job", "DRAIN_KEY": {"env": "DRAIN_KEY"}},
        }
    )
    r = _run(hook)
    assert r.ok, r.detail
    env = json.loads(out.read_text())
    notice = {k for k in env if k.startswith("SPOTFOLIO_")}
    assert notice == {
        "SPOTFOLIO_NOTICE_ID",
        "SPOTFOLIO_WORKLOAD",
        "SPOTFOLIO_INSTANCE_ID",
        "SPOTFOLIO_DEADLINE",
        "SPOTFOLIO_BUDGET_S",
    }
    # Python itself may add LC_CTYPE when it coerces the C locale; nothing else.
    assert set(env) - notice <= set(HOOK_ENV_ALLOWLIST) | {"JOB_DIR", "DRAIN_KEY"}
    assert env["PATH"] == os.environ["PATH"] and env["LANG"] == "C.UTF-8"
    assert env["JOB_DIR"] == "/data/job" and env["DRAIN_KEY"] == "from-a-reference"
    assert not set(DAEMON_SECRETS) & set(env)
    assert not [v for v in env.values() if "s3cret" in v or "aws-session" in v]


def test_a_hook_whose_secret_is_unset_is_not_called_and_says_which(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    hook = CheckpointHook.model_validate(
        {
            "command": [sys.executable, "-c", f"open({str(marker)!r}, 'w')"],
            "env": {"K": {"env": "SPOTFOLIO_TEST_UNSET_VAR"}},
        }
    )
    r = _run(hook)
    assert not r.ok and not marker.exists() and r.attempts == 0
    assert "env:SPOTFOLIO_TEST_UNSET_VAR" in r.detail and "not set" in r.detail


def test_a_commands_stderr_is_redacted_before_it_is_kept() -> None:
    r = _run(_py("import sys; sys.stderr.write('upload failed: token=abc123 url=s3://k:pw@h/x')"))
    assert r.ok
    assert "abc123" not in r.detail and ":pw@" not in r.detail
    assert "token=***" in r.detail and "s3://k:***@h/x" in r.detail


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param({"command": ["true"], "headers": {"X": "y"}}, id="headers-on-a-command"),
        pytest.param({"command": ["true"], "signing_key": "k"}, id="key-on-a-command"),
        pytest.param({"url": "http://x/", "headers": {"X": {"vault": "a"}}}, id="unknown-ref"),
        pytest.param({"url": "http://x/", "headers": {"X": {"env": "A", "ssm": "/b"}}}, id="two"),
        pytest.param({"url": "http://x/", "signing_key": {"env": "1BAD"}}, id="bad-env-name"),
    ],
)
def test_secret_fields_take_a_literal_or_exactly_one_known_reference(
    spec: dict[str, object],
) -> None:
    with pytest.raises(ValidationError):
        CheckpointHook.model_validate(spec)


# --- webhooks: redirects, signature, retry -------------------------------------------


class _Recorder(BaseHTTPRequestHandler):
    """One server's view: every request's path, headers and raw body; what
    it answers is set per path by the test."""

    seen: list[tuple[str, dict[str, str], bytes]]
    answers: dict[str, list[tuple[int, dict[str, str]]]]

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.seen.append((self.path, dict(self.headers.items()), raw))
        queue = self.answers.get(self.path) or [(200, {})]
        status, headers = queue.pop(0) if len(queue) > 1 else queue[0]
        body = b"token=leaked-by-the-receiver"  # what must never be kept
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server:
    def __init__(self, host: str) -> None:
        handler = type("H", (_Recorder,), {"seen": [], "answers": {}})
        self.handler: type[_Recorder] = handler
        self.httpd = ThreadingHTTPServer((host, 0), handler)
        self.url = f"http://{host}:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}
        )
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5.0)


@pytest.fixture
def two_hosts() -> Iterator[tuple[_Server, _Server]]:
    """Two servers on two loopback addresses (two hosts to a client)."""
    a = _Server("127.0.0.1")
    try:
        b = _Server("127.0.0.2")
    except OSError as e:  # pragma: no cover - Linux routes all of 127/8 to lo
        a.close()
        pytest.fail(f"cannot bind 127.0.0.2 for the second host: {e}")
    try:
        yield a, b
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_to_another_host_is_not_followed_and_gets_no_header(
    two_hosts: tuple[_Server, _Server], status: int
) -> None:
    a, b = two_hosts
    a.handler.answers["/drain"] = [(status, {"Location": f"{b.url}/steal"})]
    hook = CheckpointHook(url=f"{a.url}/drain", headers={"X-Token": "t0k"})
    r = _run(hook)
    assert not r.ok and r.http_status == status and r.attempts == 1
    assert "not followed" in r.detail and "leaked" not in r.detail
    assert [p for p, _, _ in a.handler.seen] == ["/drain"]
    assert b.handler.seen == []  # the other host saw nothing, header or not


def test_the_signature_header_verifies_over_the_exact_body(
    two_hosts: tuple[_Server, _Server],
) -> None:
    import hashlib
    import hmac

    from markets.secretref import EnvSecrets

    a, _ = two_hosts
    key = "hook-signing-key-0123"
    hook = CheckpointHook.model_validate(
        {
            "url": f"{a.url}/ckpt",
            "signing_key": {"env": "HOOK_KEY"},
            "headers": {"X-Token": {"env": "HOOK_TOKEN"}},
        }
    )
    r = run_checkpoint_hook(
        hook,
        notice_id="evt-9",
        workload="w",
        instance_id="i-9",
        deadline=DEADLINE,
        budget_s=5.0,
        secrets=EnvSecrets({"HOOK_KEY": key, "HOOK_TOKEN": "tok-from-env"}),
    )
    assert r.ok, r.detail
    ((_, headers, raw),) = a.handler.seen
    assert headers["X-Token"] == "tok-from-env"
    # What a receiver does: recompute over the raw body, compare in constant time.
    want = "sha256=" + hmac.new(key.encode(), raw, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(headers[SIGNATURE_HEADER], want)
    assert headers[SIGNATURE_HEADER] == sign(raw, key)
    assert json.loads(raw)["notice_id"] == "evt-9"
    # A tampered body or another key does not verify.
    assert sign(raw.replace(b"evt-9", b"evt-0"), key) != headers[SIGNATURE_HEADER]
    assert sign(raw, key + "x") != headers[SIGNATURE_HEADER]


def test_a_webhook_without_a_signing_key_sends_no_signature(
    two_hosts: tuple[_Server, _Server],
) -> None:
    a, _ = two_hosts
    assert _run(CheckpointHook(url=f"{a.url}/ckpt")).ok
    ((_, headers, _),) = a.handler.seen
    assert SIGNATURE_HEADER not in headers


def test_a_failed_call_is_retried_once_inside_the_window(
    two_hosts: tuple[_Server, _Server],
) -> None:
    a, _ = two_hosts
    a.handler.answers["/flaky"] = [(503, {}), (200, {})]
    r = _run(CheckpointHook(url=f"{a.url}/flaky"), budget_s=5.0)
    assert r.ok and r.attempts == 2 and r.http_status == 200
    assert len(a.handler.seen) == 2
    assert r.elapsed_s < r.budget_s
    # The same body both times: a receiver dedups by notice_id.
    assert a.handler.seen[0][2] == a.handler.seen[1][2]


@pytest.mark.parametrize("status", [400, 401, 404])
def test_a_client_error_is_not_retried(two_hosts: tuple[_Server, _Server], status: int) -> None:
    a, _ = two_hosts
    a.handler.answers["/x"] = [(status, {})]
    r = _run(CheckpointHook(url=f"{a.url}/x"))
    assert not r.ok and r.attempts == 1 and len(a.handler.seen) == 1


def test_no_retry_when_the_window_has_no_room_for_one(two_hosts: tuple[_Server, _Server]) -> None:
    a, _ = two_hosts
    a.handler.answers["/x"] = [(503, {})]
    r = _run(CheckpointHook(url=f"{a.url}/x"), budget_s=0.4)  # below the retry's minimum
    assert not r.ok and r.attempts == 1 and len(a.handler.seen) == 1


def test_a_webhook_secret_that_cannot_be_read_sends_nothing(
    two_hosts: tuple[_Server, _Server],
) -> None:
    a, _ = two_hosts
    hook = CheckpointHook.model_validate(
        {"url": f"{a.url}/x", "headers": {"Authorization": {"ssm": "/spotfolio/token"}}}
    )
    r = _run(hook)  # the default resolver reads env references only
    assert not r.ok and r.attempts == 0 and a.handler.seen == []
    assert "ssm:/spotfolio/token" in r.detail and "no resolver" in r.detail


def test_a_webhook_url_can_be_a_reference_and_never_shows_in_the_result(
    two_hosts: tuple[_Server, _Server],
) -> None:
    from markets.secretref import EnvSecrets

    a, _ = two_hosts
    hook = CheckpointHook.model_validate({"url": {"env": "HOOK_URL"}})
    good = f"{a.url}/services/T0/B0/s3cretpath"
    for target, ok in (
        (good, True),
        ("ftp://x/s3cretpath", False),
        (f"{a.url}:x/s3cretpath", False),
    ):
        r = run_checkpoint_hook(
            hook,
            notice_id="e",
            workload="w",
            instance_id="i",
            deadline=None,
            budget_s=5.0,
            secrets=EnvSecrets({"HOOK_URL": target}),
        )
        assert r.ok is ok, r.detail
        assert "s3cretpath" not in json.dumps(r.as_record())
    assert [p for p, _, _ in a.handler.seen] == ["/services/T0/B0/s3cretpath"]


def test_a_reply_that_is_not_http_is_a_failure_not_a_crashed_thread() -> None:
    import socket

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def garbage() -> None:
        for _ in range(2):  # the call and its one retry
            conn, _ = srv.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")

    t = threading.Thread(target=garbage)
    t.start()
    try:
        r = _run(CheckpointHook(url=f"http://127.0.0.1:{srv.getsockname()[1]}/x"), budget_s=5.0)
    finally:
        t.join(5.0)
        srv.close()
    assert not r.ok and not r.timed_out and r.attempts == 2
    assert "malformed HTTP reply" in r.detail


def test_a_header_reference_that_resolves_to_a_crlf_sends_nothing_and_never_shows_it(
    two_hosts: tuple[_Server, _Server],
) -> None:
    """A literal header is checked when the file is read; a reference only
    at call time: a value with CR/LF would inject a header, so nothing is sent."""
    from markets.secretref import EnvSecrets

    a, _ = two_hosts
    hook = CheckpointHook.model_validate(
        {"url": f"{a.url}/x", "headers": {"X-Token": {"env": "T"}}}
    )
    for value in ("tok\r\nX-Injected: s3cret", "tok\ns3cret", "tok\0s3cret"):
        r = run_checkpoint_hook(
            hook,
            notice_id="e",
            workload="w",
            instance_id="i",
            deadline=None,
            budget_s=5.0,
            secrets=EnvSecrets({"T": value}),
        )
        assert not r.ok and r.attempts == 0, r.detail
        assert "env:T" in r.detail and "s3cret" not in json.dumps(r.as_record())
    assert a.handler.seen == []


def test_an_env_reference_that_resolves_to_a_nul_runs_nothing(tmp_path: Path) -> None:
    from markets.secretref import EnvSecrets

    marker = tmp_path / "ran"
    hook = CheckpointHook.model_validate(
        {
            "command": [sys.executable, "-c", f"open({str(marker)!r}, 'w')"],
            "env": {"K": {"env": "V"}},
        }
    )
    r = run_checkpoint_hook(
        hook,
        notice_id="e",
        workload="w",
        instance_id="i",
        deadline=None,
        budget_s=5.0,
        secrets=EnvSecrets({"V": "a\0s3cret"}),
    )
    assert not r.ok and not marker.exists() and r.attempts == 0
    assert "env:V" in r.detail and "s3cret" not in r.detail
