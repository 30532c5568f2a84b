#!/usr/bin/env python3
"""Spotfolio's on-instance interruption watcher for EC2 Spot (stdlib only).

Runs *on the instance*: the AWS twin of ``markets/gcp/watcher.py``. The
daemon runs in Fargate and cannot reach a revoked instance's disk, so the
checkpoint hook has to run here. The watcher polls the instance metadata
service (IMDSv2) every ``--poll-s`` seconds (5 s, as the EC2 guide
recommends for the interruption notice):

- ``PUT /latest/api/token`` with ``X-aws-ec2-metadata-token-ttl-seconds``
  gives a session token; every ``GET`` carries it as
  ``X-aws-ec2-metadata-token``. A 401 means the token expired or is unknown:
  the watcher takes a new one and asks again (IMDSv1, without a token, is
  off on hardened launch templates, so it is never used).
- ``GET /latest/meta-data/spot/instance-action``: 404 until EC2 decides to
  interrupt, then ``{"action": "terminate" | "stop" | "hibernate", "time":
  "2026-03-01T08:22:00Z"}``, ``time`` being when the action happens (about
  two minutes after the notice: EC2 User Guide, "Spot Instance interruption
  notices"). The hook runs once for that notice, with a budget of
  ``min(time - now, --window-s) - --margin-s`` seconds, is killed (its
  whole process group) when the budget is spent, one JSON report line is
  written, and the watcher exits.
- ``GET /latest/meta-data/events/recommendations/rebalance``: 404 until EC2
  sees an elevated risk of interruption, then ``{"noticeTime": "..."}``. A
  recommendation has no deadline and may never be followed by an
  interruption, so by default it is only reported (one JSON line, event
  ``rebalance_recommendation``) and watching goes on; with
  ``--on-rebalance checkpoint`` the hook also runs, once per recommendation
  (budget ``--window-s - --margin-s``), and watching goes on, so the
  interruption notice that may follow runs it again.

"Once per notice" survives restarts: with ``--state FILE`` every notice
handled is appended to it (its kind and time), and a notice already in the
file is not handled again (systemd restarts a watcher whose hook failed; the
notice is still there). Metadata errors (refused connections, 5xx, bad JSON)
are logged and retried with backoff (1-10 s); they never end the watcher.

The hook gets ``SPOTFOLIO_HOOK_BUDGET_S`` (seconds it may take),
``SPOTFOLIO_PREEMPTION_DEADLINE`` (Unix time of the action),
``SPOTFOLIO_NOTICE_KIND`` (``instance-action`` or ``rebalance``) and, for
an interruption, ``SPOTFOLIO_INSTANCE_ACTION`` (terminate, stop, hibernate)
in its environment, as the GCP watcher's hook does (same names).

Shutdown races: a stop or hibernate shuts the OS down at ``time``, and
systemd then stops this service, possibly mid-hook. While the hook runs,
SIGTERM is ignored (``TimeoutStopSec`` covers the budget). On a SIGTERM while
waiting, the watcher reads ``instance-action`` once more and runs the hook if
a notice is there, else exits 0 (an ordinary shutdown).

Install with user data: ``terraform/modules/aws/watcher-user-data.sh.tftpl``
writes this file to ``/usr/local/bin/spotfolio-spot-watcher`` and a systemd
unit, ``spotfolio-spot-watcher.service``, running::

    spotfolio-spot-watcher --hook '/opt/job/checkpoint.sh' \\
        --state /var/lib/spotfolio/spot-watcher.state \\
        --report /var/log/spotfolio-spot-watcher.jsonl

Exit codes (those of the GCP watcher): 0 hook succeeded in time (or an
ordinary shutdown, or the notice was already handled), 1 hook failed, 2 bad
usage, 124 hook killed at the deadline, 3 gave up waiting
(``--give-up-after-s``, for tests).

Must not: import anything outside the standard library (nor the GCP
watcher: each is one file copied onto a bare image, so the hook runner is
written in both), call anything but the metadata service, or use syntax
newer than Python 3.8 outside annotations.
"""

from __future__ import annotations

import argparse
import calendar
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
    "IMDS_URL",
    "WINDOW_S",
    "Handled",
    "HookResult",
    "Imds",
    "ImdsError",
    "Notice",
    "Options",
    "main",
    "run_hook",
    "watch",
]

IMDS_URL = "http://169.254.169.254"
TOKEN_PATH = "/latest/api/token"
ACTION_PATH = "/latest/meta-data/spot/instance-action"
REBALANCE_PATH = "/latest/meta-data/events/recommendations/rebalance"
# Six hours, the longest IMDSv2 grants; a 401 refreshes it sooner.
TOKEN_TTL_S = 21600
WINDOW_S = 120.0  # notice to action (EC2 User Guide, "Spot Instance interruption notices")
DEFAULT_MARGIN_S = 10.0  # left for the report and the shutdown itself
POLL_S = 5.0  # the EC2 guide: "check for interruption notices every 5 seconds"
_HTTP_TIMEOUT_S = 2.0  # IMDS is link-local: a slow answer is a broken one
_KILL_GRACE_S = 1.0
EXIT_OK, EXIT_HOOK_FAILED, EXIT_USAGE, EXIT_GAVE_UP, EXIT_TIMED_OUT = 0, 1, 2, 3, 124

Log = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class Terminating(Exception):
    """SIGTERM arrived while waiting (the instance is shutting down)."""


class ImdsError(Exception):
    """The metadata service did not give a usable answer (retry later)."""


@dataclass(frozen=True)
class Notice:
    """One interruption notice or rebalance recommendation, as read."""

    kind: str  # "instance-action" | "rebalance"
    action: str  # terminate | stop | hibernate; "" for a rebalance
    time: str  # as IMDS wrote it (the notice's identity, with kind)
    deadline_unix: float | None  # when the action happens; None: no deadline

    @property
    def key(self) -> str:
        return f"{self.kind} {self.action or '-'} {self.time}"


@dataclass(frozen=True)
class HookResult:
    command: str
    budget_s: float
    elapsed_s: float
    exit_code: int | None  # None: killed
    timed_out: bool


def _parse_time(text: str) -> float | None:
    try:
        return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None


class Imds:
    """IMDSv2 reads with a session token, taken again on a 401."""

    def __init__(self, base_url: str = IMDS_URL, *, token_ttl_s: int = TOKEN_TTL_S) -> None:
        self.base_url = base_url.rstrip("/")
        self.token_ttl_s = token_ttl_s
        self._token = ""

    def _token_now(self) -> str:
        if not self._token:
            req = urllib.request.Request(
                self.base_url + TOKEN_PATH,
                method="PUT",
                headers={"X-aws-ec2-metadata-token-ttl-seconds": str(self.token_ttl_s)},
            )
            with urllib.request.urlopen(req, timeout=_HTTP_TIMEOUT_S) as reply:
                self._token = reply.read().decode().strip()
        return self._token

    def get(self, path: str) -> str | None:
        """The body at ``path``, or None on 404 (no notice)."""
        for attempt in (1, 2):
            req = urllib.request.Request(
                self.base_url + path, headers={"X-aws-ec2-metadata-token": self._token_now()}
            )
            try:
                with urllib.request.urlopen(req, timeout=_HTTP_TIMEOUT_S) as reply:
                    body: str = reply.read().decode()
                    return body
            except urllib.error.HTTPError as e:
                if e.code == 404:
                    return None
                if e.code == 401:
                    self._token = ""  # expired or unknown: take a new one
                    if attempt == 1:
                        continue
                raise ImdsError(f"GET {path}: HTTP {e.code}") from e
        raise AssertionError("unreachable: the second attempt returns or raises")

    def instance_action(self) -> Notice | None:
        body = self.get(ACTION_PATH)
        if body is None:
            return None
        data = _json_object(body, ACTION_PATH)
        when = str(data.get("time", ""))
        return Notice("instance-action", str(data.get("action", "")), when, _parse_time(when))

    def rebalance(self) -> Notice | None:
        body = self.get(REBALANCE_PATH)
        if body is None:
            return None
        return Notice(
            "rebalance", "", str(_json_object(body, REBALANCE_PATH).get("noticeTime")), None
        )


def _json_object(body: str, path: str) -> dict[str, object]:
    try:
        data = json.loads(body)
    except ValueError as e:
        raise ImdsError(f"GET {path}: not JSON: {body[:80]!r}") from e
    if not isinstance(data, dict):
        raise ImdsError(f"GET {path}: not a JSON object: {body[:80]!r}")
    return data


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
    notice: Notice,
    *,
    monotonic: Callable[[], float] = time.monotonic,
) -> HookResult:
    """Run ``command`` (split like a shell, no shell) for at most ``budget_s``,
    in its own process group (killed with it when the budget is spent)."""
    env = dict(os.environ)
    env["SPOTFOLIO_HOOK_BUDGET_S"] = f"{budget_s:.1f}"
    env["SPOTFOLIO_NOTICE_KIND"] = notice.kind
    if notice.deadline_unix is not None:
        env["SPOTFOLIO_PREEMPTION_DEADLINE"] = f"{notice.deadline_unix:.3f}"
    if notice.action:
        env["SPOTFOLIO_INSTANCE_ACTION"] = notice.action
    start = monotonic()
    proc = subprocess.Popen(shlex.split(command), env=env, start_new_session=True)
    try:
        code: int | None = proc.wait(timeout=max(0.0, budget_s))
        timed_out = False
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        code, timed_out = None, True
    return HookResult(command, budget_s, round(monotonic() - start, 3), code, timed_out)


class Handled:
    """Notices already handled: in memory, and in ``--state`` when given."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.keys: set[str] = set()
        if path and os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                self.keys = {line.strip() for line in f if line.strip()}

    def __contains__(self, notice: Notice) -> bool:
        return notice.key in self.keys

    def add(self, notice: Notice) -> None:
        self.keys.add(notice.key)
        if self.path:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(notice.key + "\n")
                f.flush()
                os.fsync(f.fileno())


@dataclass(frozen=True)
class Options:
    hook: str
    window_s: float = WINDOW_S
    margin_s: float = DEFAULT_MARGIN_S
    poll_s: float = POLL_S
    on_rebalance: str = "report"  # report | checkpoint
    give_up_after_s: float | None = None
    report: str | None = None


def _emit(options: Options, record: dict[str, object]) -> None:
    line = json.dumps(record)
    print(line, flush=True)
    if options.report:
        with open(options.report, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def _handle(options: Options, notice: Notice, handled: Handled) -> HookResult | None:
    """Run the hook for ``notice`` (or only report a rebalance), once."""
    seen_unix = time.time()
    base: dict[str, object] = {
        "event": "interruption" if notice.kind == "instance-action" else "rebalance_recommendation",
        "seen_unix": round(seen_unix, 3),
        "notice_time": notice.time,
    }
    if notice.action:
        base["action"] = notice.action
    if notice.kind == "rebalance" and options.on_rebalance != "checkpoint":
        handled.add(notice)
        _emit(options, {**base, "hook": None})
        return None
    window = options.window_s
    if notice.deadline_unix is not None:
        window = min(window, notice.deadline_unix - seen_unix)
    budget = max(0.0, window - options.margin_s)
    # Recorded before the hook runs: a hook that the shutdown cuts short is
    # not run a second time for the same notice after a restart.
    handled.add(notice)
    # The hook runs to its budget, whatever systemd says (a handler, not
    # SIG_IGN: an ignored signal would stay ignored in the hook's process).
    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        result = run_hook(options.hook, budget, notice)
    finally:
        signal.signal(signal.SIGTERM, previous)
    _emit(options, {**base, **asdict(result)})
    return result


def _exit_code(result: HookResult) -> int:
    if result.timed_out:
        return EXIT_TIMED_OUT
    return EXIT_OK if result.exit_code == 0 else EXIT_HOOK_FAILED


def watch(
    options: Options,
    imds: Imds,
    handled: Handled,
    *,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    log: Log = _stderr,
) -> int:
    """Poll until an interruption notice is handled (its hook's exit code)
    or ``give_up_after_s`` passes (``EXIT_GAVE_UP``)."""
    start = monotonic()
    backoff = 1.0
    limit = options.give_up_after_s
    while limit is None or monotonic() - start < limit:
        _raise_if_terminating()
        try:
            action = imds.instance_action()
            if action is not None and action not in handled:
                result = _handle(options, action, handled)
                return EXIT_OK if result is None else _exit_code(result)
            rebalance = imds.rebalance()
        except (ImdsError, urllib.error.URLError, OSError) as e:
            log(f"spotfolio-spot-watcher: metadata service: {e}; retrying in {backoff:.0f} s")
            sleep(backoff)
            backoff = min(10.0, backoff * 2)
            continue
        backoff = 1.0
        if action is not None:
            log(f"spotfolio-spot-watcher: notice already handled: {action.key}")
            return EXIT_OK
        if rebalance is not None and rebalance not in handled:
            _handle(options, rebalance, handled)
        sleep(options.poll_s)
    return EXIT_GAVE_UP


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
    parser = argparse.ArgumentParser(
        description="Run a checkpoint hook when EC2 interrupts this Spot Instance."
    )
    parser.add_argument("--hook", required=True, help="command to run on a notice (no shell)")
    parser.add_argument("--window-s", type=float, default=WINDOW_S)
    parser.add_argument("--margin-s", type=float, default=DEFAULT_MARGIN_S)
    parser.add_argument("--poll-s", type=float, default=POLL_S)
    parser.add_argument("--on-rebalance", choices=("report", "checkpoint"), default="report")
    parser.add_argument("--imds-url", default=IMDS_URL)
    parser.add_argument("--token-ttl-s", type=int, default=TOKEN_TTL_S)
    parser.add_argument("--state", default=None, help="notices handled (kept across restarts)")
    parser.add_argument("--give-up-after-s", type=float, default=None)
    parser.add_argument("--report", default=None, help="also append the JSON reports here")
    args = parser.parse_args(argv)
    if (
        not shlex.split(args.hook)
        or args.window_s <= 0
        or args.margin_s < 0
        or args.poll_s <= 0
        or not 1 <= args.token_ttl_s <= TOKEN_TTL_S
    ):
        _stderr(
            "spotfolio-spot-watcher: --hook must name a command; window > 0, margin >= 0, "
            f"poll > 0, 1 <= token TTL <= {TOKEN_TTL_S}"
        )
        return EXIT_USAGE
    options = Options(
        args.hook,
        args.window_s,
        args.margin_s,
        args.poll_s,
        args.on_rebalance,
        args.give_up_after_s,
        args.report,
    )
    imds = Imds(args.imds_url, token_ttl_s=args.token_ttl_s)
    handled = Handled(args.state)
    _TERM_SEEN[0] = False
    previous = signal.signal(signal.SIGTERM, _on_term)
    try:
        return watch(options, imds, handled)
    except Terminating:
        signal.signal(signal.SIGTERM, lambda *_: None)  # no second Terminating
        try:
            action = imds.instance_action()
        except (ImdsError, urllib.error.URLError, OSError):
            action = None
        if action is None or action in handled:
            return EXIT_OK  # an ordinary shutdown, not an interruption
        result = _handle(options, action, handled)
        return EXIT_OK if result is None else _exit_code(result)
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
