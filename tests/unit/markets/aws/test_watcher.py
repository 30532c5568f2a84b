"""The on-instance Spot interruption watcher against a fake IMDSv2.

The watcher runs as its own process with ``python -I -S`` (no site-packages,
no project on the path), as it would on a bare AMI; the hook is a real
subprocess that appends a line to a file, so "exactly once" and "inside the
deadline" are read from the file. The fake metadata service
(``tests.fakes.imds``) issues tokens on PUT, answers 401 to any other token,
and 404 until a notice.
"""

from __future__ import annotations

import ast
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from markets.aws import watcher
from tests.fakes.imds import ACTION, REBALANCE, FakeImds

WATCHER = Path(watcher.__file__).resolve()


@pytest.fixture
def imds() -> Iterator[FakeImds]:
    fake = FakeImds().start()
    yield fake
    fake.stop()


def hook(tmp_path: Path, body: str = "") -> tuple[str, Path]:
    """A hook appending ``time kind action budget`` to a file, then ``body``."""
    marker = tmp_path / "hook-runs"
    script = tmp_path / "hook.py"
    script.write_text(
        "import os, sys, time, subprocess\n"
        f"with open({str(marker)!r}, 'a') as f:\n"
        "    f.write(f\"{time.time()} {os.environ['SPOTFOLIO_NOTICE_KIND']} "
        "{os.environ.get('SPOTFOLIO_INSTANCE_ACTION', '-')} "
        "{os.environ['SPOTFOLIO_HOOK_BUDGET_S']}\\n\")\n" + body + "\n"
    )
    return f"{sys.executable} -I -S {script}", marker


def runs(marker: Path) -> list[list[str]]:
    return [line.split() for line in marker.read_text().splitlines()] if marker.exists() else []


def start_watcher(
    imds: FakeImds, tmp_path: Path, command: str, *extra: str
) -> subprocess.Popen[str]:
    args = [
        sys.executable,
        "-I",
        "-S",
        str(WATCHER),
        "--hook",
        command,
        "--imds-url",
        imds.url,
        "--poll-s",
        "0.1",
        "--give-up-after-s",
        "20",
        "--report",
        str(tmp_path / "report.jsonl"),
        *extra,
    ]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def reports(tmp_path: Path) -> list[dict[str, object]]:
    path = tmp_path / "report.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_the_hook_runs_exactly_once_inside_the_two_minute_window(
    imds: FakeImds, tmp_path: Path
) -> None:
    command, marker = hook(tmp_path)
    proc = start_watcher(imds, tmp_path, command)
    imds.wait_for(3)  # watching: 404s
    assert runs(marker) == []
    imds.interrupt("terminate", in_s=120)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == watcher.EXIT_OK, err
    [[ran_at, kind, action, budget]] = runs(marker)
    assert imds.interrupted_at is not None and imds.deadline_unix is not None
    assert imds.interrupted_at <= float(ran_at) < imds.deadline_unix
    assert (kind, action) == ("instance-action", "terminate")
    # min(time - seen, 120 s) - 10 s margin; IMDS writes whole seconds.
    assert 100.0 < float(budget) <= 110.0
    [rep] = reports(tmp_path)
    assert rep["event"] == "interruption" and rep["action"] == "terminate"
    assert rep["exit_code"] == 0 and rep["timed_out"] is False
    assert json.loads(out.strip()) == rep  # also on stdout (journald)
    puts = [r for r in imds.requests if r.method == "PUT"]
    assert puts and all(r.header == str(watcher.TOKEN_TTL_S) for r in puts)
    assert all(r.header in imds.tokens for r in imds.requests if r.method == "GET")


def test_an_expired_token_is_replaced_and_watching_goes_on(imds: FakeImds, tmp_path: Path) -> None:
    command, marker = hook(tmp_path)
    proc = start_watcher(imds, tmp_path, command, "--token-ttl-s", "60")
    imds.wait_for(2)
    imds.expire_tokens()
    imds.wait_for(2)  # answered again, with a new token
    imds.interrupt()
    proc.communicate(timeout=30)
    assert proc.returncode == watcher.EXIT_OK
    assert len(runs(marker)) == 1
    assert any(r.status == 401 for r in imds.requests)
    assert sum(1 for r in imds.requests if r.method == "PUT") >= 2
    assert {r.header for r in imds.requests if r.method == "PUT"} == {"60"}


def test_a_token_refused_twice_is_an_imds_error_not_a_loop(imds: FakeImds) -> None:
    imds.accept_tokens = False
    client = watcher.Imds(imds.url)
    with pytest.raises(watcher.ImdsError, match="HTTP 401"):
        client.get(ACTION)
    assert [r.method for r in imds.requests] == ["PUT", "GET", "PUT", "GET"]


def test_a_rebalance_recommendation_is_reported_once_and_watching_goes_on(
    imds: FakeImds, tmp_path: Path
) -> None:
    command, marker = hook(tmp_path)
    proc = start_watcher(imds, tmp_path, command)
    imds.wait_for(2)
    imds.recommend()
    imds.wait_for(5, REBALANCE)  # seen five times over, reported once
    assert runs(marker) == [] and proc.poll() is None
    imds.interrupt()
    proc.communicate(timeout=30)
    assert proc.returncode == watcher.EXIT_OK
    events = reports(tmp_path)
    assert [e["event"] for e in events] == ["rebalance_recommendation", "interruption"]
    assert events[0]["hook"] is None
    assert [r[1] for r in runs(marker)] == ["instance-action"]


def test_with_on_rebalance_checkpoint_the_hook_runs_once_per_recommendation(
    imds: FakeImds, tmp_path: Path
) -> None:
    command, marker = hook(tmp_path)
    proc = start_watcher(imds, tmp_path, command, "--on-rebalance", "checkpoint")
    imds.wait_for(2)
    imds.recommend()
    imds.wait_for(5, REBALANCE)
    imds.interrupt("stop")
    proc.communicate(timeout=30)
    assert proc.returncode == watcher.EXIT_OK
    kinds = [(r[1], r[2]) for r in runs(marker)]
    assert kinds == [("rebalance", "-"), ("instance-action", "stop")]
    # No deadline on a recommendation: the whole window less the margin.
    assert float(runs(marker)[0][3]) == watcher.WINDOW_S - watcher.DEFAULT_MARGIN_S


def test_a_notice_already_in_the_state_file_is_not_handled_again(
    imds: FakeImds, tmp_path: Path
) -> None:
    command, marker = hook(tmp_path, "sys.exit(1)")  # failed: systemd restarts the watcher
    state = tmp_path / "state"
    imds.interrupt()
    first = start_watcher(imds, tmp_path, command, "--state", str(state))
    first.communicate(timeout=30)
    assert first.returncode == watcher.EXIT_HOOK_FAILED
    again = start_watcher(imds, tmp_path, command, "--state", str(state))
    _, err = again.communicate(timeout=30)
    assert again.returncode == watcher.EXIT_OK
    assert "already handled" in err
    assert len(runs(marker)) == 1 and len(reports(tmp_path)) == 1


def test_a_hook_slower_than_the_deadline_is_killed_before_it(
    imds: FakeImds, tmp_path: Path
) -> None:
    command, marker = hook(tmp_path, "time.sleep(60)")
    imds.interrupt(in_s=4)
    started = time.time()
    proc = start_watcher(imds, tmp_path, command, "--margin-s", "0.5")
    proc.communicate(timeout=30)
    assert proc.returncode == watcher.EXIT_TIMED_OUT
    assert imds.deadline_unix is not None
    assert time.time() < imds.deadline_unix + 2  # killed at the budget, not after 60 s
    assert time.time() - started < 10
    [rep] = reports(tmp_path)
    assert rep["timed_out"] is True and rep["exit_code"] is None
    assert float(str(rep["budget_s"])) <= 4.0 - 0.5
    assert len(runs(marker)) == 1


def test_metadata_errors_are_retried_with_backoff_and_the_notice_still_handled(
    imds: FakeImds, tmp_path: Path
) -> None:
    command, marker = hook(tmp_path)
    slept: list[float] = []
    logged: list[str] = []
    imds.fail_next(3)
    imds.interrupt()
    options = watcher.Options(command, poll_s=0.1, give_up_after_s=20)
    code = watcher.watch(
        options,
        watcher.Imds(imds.url),
        watcher.Handled(None),
        sleep=slept.append,
        log=logged.append,
    )
    assert code == watcher.EXIT_OK
    assert slept == [1.0, 2.0, 4.0]
    assert len(logged) == 3 and all("HTTP 500" in m for m in logged)
    assert len(runs(marker)) == 1


def test_an_unreachable_metadata_service_is_retried_until_giving_up(tmp_path: Path) -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    closed = "http://127.0.0.1:9"  # the discard port: connection refused
    code = watcher.watch(
        watcher.Options("true", give_up_after_s=30),
        watcher.Imds(closed),
        watcher.Handled(None),
        monotonic=lambda: now[0],
        sleep=sleep,
        log=lambda _: None,
    )
    assert code == watcher.EXIT_GAVE_UP
    assert slept[:5] == [1.0, 2.0, 4.0, 8.0, 10.0]


def test_an_ordinary_shutdown_exits_without_running_the_hook(
    imds: FakeImds, tmp_path: Path
) -> None:
    command, marker = hook(tmp_path)
    proc = start_watcher(imds, tmp_path, command)
    imds.wait_for(2)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=10)
    assert proc.returncode == watcher.EXIT_OK and runs(marker) == []
    assert any(r.path == ACTION for r in imds.requests)


def test_bad_usage_exits_2() -> None:
    assert watcher.main(["--hook", " ", "--give-up-after-s", "1"]) == watcher.EXIT_USAGE
    assert watcher.main(["--hook", "true", "--token-ttl-s", "0"]) == watcher.EXIT_USAGE


def test_the_watcher_is_stdlib_only_python_38_syntax() -> None:
    tree = ast.parse(WATCHER.read_text(), feature_version=(3, 8))  # AMIs' oldest Python
    names = {
        a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    }
    names |= {
        n.module.split(".")[0]
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and n.module and n.level == 0
    }
    assert names <= set(sys.stdlib_module_names) | {"__future__"}, names


def test_a_sigterm_swallowed_by_a_finalizer_still_ends_the_wait(imds: FakeImds) -> None:
    """The SIGTERM handler's exception lands wherever the main thread is; in
    a finalizer (a socket closed by the garbage collector) Python prints it
    and carries on. The wait loop then ends at its next poll anyway (seen in
    a CI run: the watcher polled on for its whole --give-up-after-s and
    ``test_an_ordinary_shutdown_exits_without_running_the_hook`` timed out)."""
    with pytest.raises(watcher.Terminating):
        watcher._on_term(signal.SIGTERM, None)  # the exception a finalizer swallows
    polled = len(imds.requests)
    try:
        with pytest.raises(watcher.Terminating):
            watcher.watch(
                watcher.Options("true", poll_s=0.1, give_up_after_s=20),
                watcher.Imds(imds.url),
                watcher.Handled(None),
                sleep=lambda _: None,
                log=lambda _: None,
            )
        assert len(imds.requests) == polled  # no poll after the SIGTERM
    finally:
        watcher._TERM_SEEN[0] = False
