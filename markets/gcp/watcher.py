#!/usr/bin/env python3
"""Spotfolio's on-instance preemption watcher for GCP Spot VMs (stdlib only).

Runs *on the VM*. It long-polls the metadata server's ``preempted`` flag
(``GET http://metadata.google.internal/computeMetadata/v1/instance/preempted
?wait_for_change=true`` with header ``Metadata-Flavor: Google``; the server
answers when the value changes, or after ``timeout_sec``), and when the flag
reads ``TRUE`` it runs the checkpoint hook inside the 30-second preemption
window, kills the hook if it overruns, writes one JSON report line, and exits.

Why 30 s, and what overrunning means: Compute Engine sends the VM an ACPI
soft-off when it preempts it and stops it hard 30 s later (Compute Engine
docs, "Preemption process"). A checkpoint that needs longer cannot complete:
the hook is killed at ``window - margin`` seconds so that a half-written
checkpoint is not mistaken for a good one (write to a temporary name, rename
when done), and the broker's lifecycle manager restarts the job from its last
periodic checkpoint (``broker.lifecycle``: a checkpoint longer than the window
"does not fit").

The hook gets ``SPOTFOLIO_HOOK_BUDGET_S`` (seconds it may take) and
``SPOTFOLIO_PREEMPTION_DEADLINE`` (Unix time of the hard stop) in its
environment; it runs in its own process group, which is killed (SIGTERM, then
SIGKILL a second later) when the budget is spent.

Shutdown races: the soft-off also makes systemd stop services, possibly before
the long poll returns. On SIGTERM the watcher reads the flag once more: if it
is TRUE it runs the hook as above (ignoring further SIGTERMs until the budget
is spent), otherwise it exits 0 (an ordinary shutdown).

Install as a systemd unit (copy this one file; any Python >= 3.8)::

    sudo install -m 0755 watcher.py /usr/local/bin/spotfolio-preemption-watcher
    sudo tee /etc/systemd/system/spotfolio-preemption-watcher.service <<'EOF'
    [Unit]
    Description=Spotfolio GCP preemption watcher (checkpoint within 30 s)
    Wants=network-online.target
    After=network-online.target

    [Service]
    Type=simple
    ExecStart=/usr/local/bin/spotfolio-preemption-watcher \\
        --hook "/opt/job/checkpoint.sh" --report /var/log/spotfolio-preemption.json
    # Let the hook finish its budget when the preemption's shutdown stops us.
    KillMode=mixed
    TimeoutStopSec=35
    Restart=on-failure

    [Install]
    WantedBy=multi-user.target
    EOF
    sudo systemctl daemon-reload
    sudo systemctl enable --now spotfolio-preemption-watcher

(or put those lines in the instance template's ``startup-script``).

Exit codes: 0 hook succeeded in time (or ordinary shutdown), 1 hook failed,
2 bad usage, 124 hook killed at the deadline, 3 gave up waiting
(``--give-up-after-s``, for tests).

Must not: import anything outside the standard library, call any API but
the metadata server, or use syntax newer than Python 3.8 outside annotations
(annotations are never evaluated: ``from __future__ import annotations``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass

__all__ = [
    "METADATA_URL",
    "WINDOW_S",
    "HookResult",
    "main",
    "read_flag",
    "run_hook",
    "wait_for_preemption",
]

METADATA_URL = "http://metadata.google.internal/computeMetadata/v1/instance/preempted"
HEADERS = {"Metadata-Flavor": "Google"}
WINDOW_S = 30.0  # soft-off to hard stop (Compute Engine docs, "Preemption process")
DEFAULT_MARGIN_S = 3.0  # left for the report and the OS shutdown itself
POLL_TIMEOUT_S = 300  # server-side long-poll timeout (timeout_sec)
_KILL_GRACE_S = 1.0
EXIT_OK, EXIT_HOOK_FAILED, EXIT_USAGE, EXIT_GAVE_UP, EXIT_TIMED_OUT = 0, 1, 2, 3, 124


class Terminating(Exception):
    """SIGTERM arrived while waiting (the VM is shutting down)."""


@dataclass(frozen=True)
class HookResult:
    command: str
    budget_s: float
    elapsed_s: float
    exit_code: int | None  # None: killed
    timed_out: bool


def read_flag(
    url: str = METADATA_URL,
    *,
    wait: bool = False,
    etag: str = "",
    timeout_s: int = POLL_TIMEOUT_S,
) -> tuple[str, str]:
    """``(value, etag)`` of the metadata key; with ``wait``, returns when the
    value differs from ``etag``'s or after ``timeout_s`` (server side)."""
    query = ""
    if wait:
        query = f"?wait_for_change=true&timeout_sec={int(timeout_s)}"
        if etag:
            query += f"&last_etag={etag}"
    req = urllib.request.Request(url + query, headers=HEADERS)
    with urllib.request.urlopen(req, timeout=timeout_s + 10 if wait else 5) as reply:
        value = reply.read().decode().strip()
        return value, reply.headers.get("ETag", "")


def wait_for_preemption(
    url: str = METADATA_URL,
    *,
    poll_timeout_s: int = POLL_TIMEOUT_S,
    give_up_after_s: float | None = None,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    log: Callable[[str], None] = lambda m: print(m, file=sys.stderr, flush=True),
) -> bool:
    """Block until the flag reads TRUE (returns True) or ``give_up_after_s``
    passes (False). Metadata server errors are retried with backoff (1-10 s)."""
    start = monotonic()
    etag = ""
    backoff = 1.0
    while give_up_after_s is None or monotonic() - start < give_up_after_s:
        _raise_if_terminating()
        timeout = poll_timeout_s
        if give_up_after_s is not None:
            left = give_up_after_s - (monotonic() - start)
            timeout = max(1, min(timeout, int(left) + 1))
        try:
            # Without an etag a long poll waits for the *next* change, so a VM
            # already preempted (the watcher restarted in the window) would be
            # missed: read the value first, then wait for it to change.
            value, etag = read_flag(url, wait=bool(etag), etag=etag, timeout_s=timeout)
        except (urllib.error.URLError, OSError, ValueError) as e:
            log(f"spotfolio-watcher: metadata server: {e}; retrying in {backoff:.0f} s")
            sleep(backoff)
            backoff = min(10.0, backoff * 2)
            etag = ""
            continue
        backoff = 1.0
        if value.upper() == "TRUE":
            return True
        if not etag:
            sleep(1.0)  # no ETag to wait on: poll once a second
    return False


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=_KILL_GRACE_S)
            return
        except subprocess.TimeoutExpired:
            continue


def run_hook(
    command: str,
    budget_s: float,
    *,
    deadline_unix: float | None = None,
    monotonic: Callable[[], float] = time.monotonic,
) -> HookResult:
    """Run ``command`` (split like a shell, no shell) for at most ``budget_s``."""
    env = dict(os.environ)
    env["SPOTFOLIO_HOOK_BUDGET_S"] = f"{budget_s:.1f}"
    if deadline_unix is not None:
        env["SPOTFOLIO_PREEMPTION_DEADLINE"] = f"{deadline_unix:.3f}"
    start = monotonic()
    proc = subprocess.Popen(shlex.split(command), env=env, start_new_session=True)
    try:
        code: int | None = proc.wait(timeout=max(0.0, budget_s))
        timed_out = False
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        code, timed_out = None, True
    return HookResult(command, budget_s, round(monotonic() - start, 3), code, timed_out)


# SIGTERM seen (``_on_term``). The exception it raises lands wherever the
# main thread is; in a finalizer (a socket or temporary file closed by the
# garbage collector) Python prints it and carries on, so the wait loop also
# checks this flag at each poll (seen swallowed in a test run: the watcher
# kept polling for its whole --give-up-after-s).
_TERM_SEEN = [False]


def _on_term(signum: int, frame: object) -> None:
    _TERM_SEEN[0] = True
    raise Terminating()


def _raise_if_terminating() -> None:
    if _TERM_SEEN[0]:
        raise Terminating()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run a checkpoint hook when GCP preempts this VM.")
    parser.add_argument("--hook", required=True, help="command to run on preemption (no shell)")
    parser.add_argument("--window-s", type=float, default=WINDOW_S)
    parser.add_argument("--margin-s", type=float, default=DEFAULT_MARGIN_S)
    parser.add_argument("--metadata-url", default=METADATA_URL)
    parser.add_argument("--poll-timeout-s", type=int, default=POLL_TIMEOUT_S)
    parser.add_argument("--give-up-after-s", type=float, default=None)
    parser.add_argument("--report", default=None, help="also append the JSON report here")
    args = parser.parse_args(argv)
    if not shlex.split(args.hook) or args.window_s <= 0 or args.margin_s < 0:
        print(
            "spotfolio-watcher: --hook must name a command; window > 0, margin >= 0",
            file=sys.stderr,
        )
        return EXIT_USAGE
    _TERM_SEEN[0] = False
    previous = signal.signal(signal.SIGTERM, _on_term)
    try:
        seen = wait_for_preemption(
            args.metadata_url,
            poll_timeout_s=args.poll_timeout_s,
            give_up_after_s=args.give_up_after_s,
        )
    except Terminating:
        try:
            seen = read_flag(args.metadata_url)[0].upper() == "TRUE"
        except (urllib.error.URLError, OSError):
            seen = False
        if not seen:
            return EXIT_OK  # an ordinary shutdown, not a preemption
    if not seen:
        return EXIT_GAVE_UP
    # From here the hook runs to its budget, whatever systemd says.
    signal.signal(signal.SIGTERM, lambda *_: None)
    seen_unix = time.time()
    budget = max(0.0, args.window_s - args.margin_s)
    result = run_hook(args.hook, budget, deadline_unix=seen_unix + args.window_s)
    signal.signal(signal.SIGTERM, previous)
    line = json.dumps({"event": "preempted", "seen_unix": round(seen_unix, 3), **asdict(result)})
    print(line, flush=True)
    if args.report:
        with open(args.report, "a", encoding="utf-8") as f:
            f.write(line + "\n")
    if result.timed_out:
        return EXIT_TIMED_OUT
    return EXIT_OK if result.exit_code == 0 else EXIT_HOOK_FAILED


if __name__ == "__main__":
    sys.exit(main())
