"""Call a workload's checkpoint hook when a revocation notice arrives.

Owns ``CheckpointHook`` (the configured hook: a command, or an HTTP webhook),
``HookResult`` (what happened, for the decision log) and the two ways to run
one: ``run_checkpoint_hook`` (blocks for at most its budget) and
``HookRunner`` (a small thread pool, so the notice path never waits at all).

The budget is what is left of the notice window once the decision is made
(``CheckpointVerdict.hook_budget_s``: AWS gives 120 s, GCP 30 s). A command
runs in its own process group and the whole group is killed when the budget
runs out; a webhook is a JSON POST whose wait is cut at the budget. Neither
raises: every failure is a ``HookResult`` with ``ok=False`` and a detail.

A command gets the notice in its environment (``SPOTFOLIO_NOTICE_ID``,
``SPOTFOLIO_WORKLOAD``, ``SPOTFOLIO_INSTANCE_ID``, ``SPOTFOLIO_DEADLINE``,
``SPOTFOLIO_BUDGET_S``); a webhook gets the same fields as JSON::

    {"notice_id": "...", "workload": "...", "instance_id": "...",
     "deadline": "2026-03-01T00:02:00+00:00", "budget_s": 110.0}

Configured per workload, for example (YAML)::

    checkpoint_hooks:
      llm-finetune: {command: ["/opt/train/ckpt-now", "--fast"]}
      chat-api: {url: "http://127.0.0.1:9000/drain", headers: {X-Token: "..."}}

Must not: decide anything, or block its caller beyond the budget.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import ssl
import subprocess
import threading
import urllib.error
import urllib.request
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from markets.clock import Clock, SystemClock

__all__ = ["CheckpointHook", "HookResult", "HookRunner", "run_checkpoint_hook"]

_DETAIL_CHARS = 300  # of a command's stderr / a webhook's body kept in the record
_RESPONSE_BYTES = 64 * 1024


class CheckpointHook(BaseModel):
    """A command (argv, no shell) or a webhook URL; exactly one."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: tuple[str, ...] | None = Field(default=None, min_length=1)
    url: str | None = Field(default=None, pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one(self) -> Self:
        if (self.command is None) == (self.url is None):
            raise ValueError("exactly one of 'command' or 'url'")
        return self


@dataclass(frozen=True, slots=True)
class HookResult:
    """What a hook did. ``kind`` is ``command``, ``webhook`` or ``none``."""

    kind: str
    ok: bool
    timed_out: bool
    elapsed_s: float
    budget_s: float
    started_at: datetime
    detail: str
    exit_code: int | None = None
    http_status: int | None = None

    def as_record(self) -> dict[str, str | float | int | bool | None]:
        return {
            "kind": self.kind,
            "ok": self.ok,
            "timed_out": self.timed_out,
            "elapsed_s": round(self.elapsed_s, 3),
            "budget_s": round(self.budget_s, 3),
            "started_at": self.started_at.isoformat(),
            "detail": self.detail,
            "exit_code": self.exit_code,
            "http_status": self.http_status,
        }


# What a hook is told about the notice (its environment, or its JSON body).
Payload = dict[str, str | float | None]


class _Outcome(Protocol):
    """Builds the ``HookResult`` of one call (the elapsed time filled in)."""

    def __call__(
        self,
        kind: str,
        ok: bool,
        detail: str,
        *,
        timed_out: bool = False,
        exit_code: int | None = None,
        http_status: int | None = None,
    ) -> HookResult: ...


@dataclass
class _Reply:
    """What the webhook's worker thread saw."""

    status: int | None = None
    body: bytes = b""
    error: str | None = None
    timed_out: bool = False


def _payload(
    notice_id: str, workload: str, instance_id: str, deadline: datetime | None, budget_s: float
) -> Payload:
    return {
        "notice_id": notice_id,
        "workload": workload,
        "instance_id": instance_id,
        "deadline": None if deadline is None else deadline.isoformat(),
        "budget_s": round(budget_s, 3),
    }


def run_checkpoint_hook(
    hook: CheckpointHook | None,
    *,
    notice_id: str,
    workload: str,
    instance_id: str,
    deadline: datetime | None,
    budget_s: float,
    clock: Clock | None = None,
) -> HookResult:
    """Run ``hook`` for one notice, for at most ``budget_s`` seconds."""
    clock = clock or SystemClock()
    started_at, t0 = clock.now(), clock.monotonic()
    payload = _payload(notice_id, workload, instance_id, deadline, budget_s)

    def result(
        kind: str,
        ok: bool,
        detail: str,
        *,
        timed_out: bool = False,
        exit_code: int | None = None,
        http_status: int | None = None,
    ) -> HookResult:
        elapsed = clock.monotonic() - t0
        return HookResult(
            kind, ok, timed_out, elapsed, budget_s, started_at, detail, exit_code, http_status
        )

    if hook is None:
        return result("none", True, "no checkpoint hook configured")
    kind = "command" if hook.command is not None else "webhook"
    if budget_s <= 0:
        return result(kind, False, "no time left in the notice window: hook not called")
    if hook.command is not None:
        return _run_command(hook, hook.command, payload, budget_s, result)
    assert hook.url is not None
    return _run_webhook(hook, hook.url, payload, budget_s, result)


def _run_command(
    hook: CheckpointHook,
    argv: tuple[str, ...],
    payload: Payload,
    budget_s: float,
    result: _Outcome,
) -> HookResult:
    env = {**os.environ, **hook.env}
    env.update({f"SPOTFOLIO_{k.upper()}": "" if v is None else str(v) for k, v in payload.items()})
    try:
        # Own process group: a timeout kills the hook and anything it started.
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
    except OSError as e:
        return result("command", False, f"could not start {argv[0]!r}: {e.strerror or e}")
    try:
        _, err = proc.communicate(timeout=budget_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return result("command", False, f"killed after its {budget_s:.1f} s budget", timed_out=True)
    tail = err.decode("utf-8", "replace").strip()[-_DETAIL_CHARS:]
    code = proc.returncode
    if code == 0:
        return result("command", True, tail or "exit 0", exit_code=0)
    return result(
        "command", False, f"exit {code}: {tail}" if tail else f"exit {code}", exit_code=code
    )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):  # it ended on its own meanwhile
        os.killpg(proc.pid, signal.SIGKILL)
    try:
        proc.communicate(timeout=1.0)
    except subprocess.TimeoutExpired:  # a grandchild left the group and holds the pipe
        if proc.stderr is not None:
            proc.stderr.close()
        proc.wait(timeout=1.0)


def _run_webhook(
    hook: CheckpointHook,
    url: str,
    payload: Payload,
    budget_s: float,
    result: _Outcome,
) -> HookResult:
    body = json.dumps(payload).encode("utf-8")
    headers = {"Content-Type": "application/json", **hook.headers}
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    box = _Reply()

    def call() -> None:
        try:
            # The socket timeout bounds each blocking read; join() below bounds
            # the whole exchange (a server dribbling bytes cannot hold us).
            with urllib.request.urlopen(request, timeout=budget_s) as resp:
                box.status = resp.status
                box.body = resp.read(_RESPONSE_BYTES)
        except urllib.error.HTTPError as e:
            box.status = e.code
            try:
                box.body = e.read(_RESPONSE_BYTES) if e.fp is not None else b""
            finally:
                e.close()
        except (urllib.error.URLError, OSError, ValueError) as e:
            # URLError wraps the socket's error in ``reason`` (a str or an
            # OSError); an SSLError names its own.
            reason: object = e.reason if isinstance(e, urllib.error.URLError | ssl.SSLError) else e
            box.error = str(reason)
            # The socket's own timeout (connect or read) can fire just before
            # join() gives up: it is the same outcome, a hook out of budget.
            box.timed_out = isinstance(reason, TimeoutError)

    worker = threading.Thread(target=call, name="spotfolio-webhook", daemon=True)
    worker.start()
    worker.join(budget_s)
    if worker.is_alive():
        return result(
            "webhook", False, f"no answer within its {budget_s:.1f} s budget", timed_out=True
        )
    if box.timed_out:
        return result(
            "webhook", False, f"no answer within its {budget_s:.1f} s budget", timed_out=True
        )
    if box.error is not None:
        return result("webhook", False, f"request failed: {box.error}")
    assert box.status is not None  # the worker ended without an error: it has a status
    status = box.status
    text = box.body.decode("utf-8", "replace").strip()[:_DETAIL_CHARS]
    ok = 200 <= status < 300
    return result(
        "webhook", ok, f"HTTP {status}" + (f": {text}" if text else ""), http_status=status
    )


class HookRunner:
    """Runs hooks on a small thread pool: ``submit`` returns at once.

    The future's result is the ``HookResult`` (never an exception). Call
    ``shutdown`` when the daemon stops.
    """

    def __init__(self, max_workers: int = 4, clock: Clock | None = None) -> None:
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="ckpt-hook")
        self._clock = clock

    def submit(
        self,
        hook: CheckpointHook | None,
        *,
        notice_id: str,
        workload: str,
        instance_id: str,
        deadline: datetime | None,
        budget_s: float,
    ) -> Future[HookResult]:
        return self._pool.submit(
            run_checkpoint_hook,
            hook,
            notice_id=notice_id,
            workload=workload,
            instance_id=instance_id,
            deadline=deadline,
            budget_s=budget_s,
            clock=self._clock,
        )

    def shutdown(self, wait: bool = True) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=not wait)
