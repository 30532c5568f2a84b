"""Call a workload's checkpoint hook when a revocation notice arrives.

Owns ``CheckpointHook`` (the configured hook: a command, or an HTTP webhook),
``HookResult`` (what happened, for the decision log), ``HOOK_ENV_ALLOWLIST``,
``SIGNATURE_HEADER`` and the two ways to run a hook: ``run_checkpoint_hook``
(blocks for at most its budget) and ``HookRunner`` (a small thread pool, so
the notice path never waits at all).

The budget is what is left of the notice window once the decision is made
(``CheckpointVerdict.hook_budget_s``: AWS gives 120 s, GCP 30 s). A command
runs in its own process group and the whole group is killed when the budget
runs out; a webhook is a JSON POST whose wait is cut at the budget. Neither
raises: every failure is a ``HookResult`` with ``ok=False`` and a detail,
redacted (``markets.redaction``) before anyone stores or logs it.

**A command's environment is built, not inherited**: the variables of
``HOOK_ENV_ALLOWLIST`` taken from the daemon's, then the hook's own ``env``,
then the notice (``SPOTFOLIO_NOTICE_ID``, ``SPOTFOLIO_WORKLOAD``,
``SPOTFOLIO_INSTANCE_ID``, ``SPOTFOLIO_DEADLINE``, ``SPOTFOLIO_BUDGET_S``).
The daemon's credentials (``PGPASSWORD``, ``AWS_*``, ``GOOGLE_*``, the ECS
credentials URI) never reach a hook unless its ``env`` names them.

**A webhook** gets the same fields as JSON::

    {"notice_id": "...", "workload": "...", "instance_id": "...",
     "deadline": "2026-03-01T00:02:00+00:00", "budget_s": 110.0}

- redirects are not followed: a 3xx is a failed call, so the configured
  headers never reach another host (nor the instance metadata address);
- only the HTTP status is kept (the reply's body is never read into the
  record or the log);
- with a ``signing_key``, ``X-Spotfolio-Signature: sha256=<hex>`` is the
  HMAC-SHA256 of the exact body bytes under that key; a receiver recomputes
  it over the body it read and compares in constant time
  (``hmac.compare_digest``). The body's ``notice_id`` is the replay key;
- a call that fails with time left in the budget (no connection, a 5xx, 408
  or 429) is tried once more; one that used its whole budget is not.

Header values, ``env`` values and the signing key are secrets
(``markets.secretref.Secret``): a literal, or a reference resolved at call
time by the runner's ``SecretResolver`` (never logged, never stored)::

    checkpoint_hooks:
      llm-finetune: {command: ["/opt/train/ckpt-now", "--fast"],
                     env: {WANDB_API_KEY: {ssm: /ml/wandb-key}}}
      chat-api: {url: "https://drain.internal/ckpt",
                 headers: {X-Token: {env: DRAIN_TOKEN}},
                 signing_key: {secretsmanager: spotfolio/hook-signing-key}}

Must not: decide anything, block its caller beyond the budget, or put a
resolved secret in a result.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import http.client
import json
import os
import re
import signal
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from markets.clock import Clock, SystemClock
from markets.redaction import redact
from markets.secretref import (
    EnvSecrets,
    Secret,
    SecretRef,
    SecretResolver,
    SecretUnavailableError,
    resolve_secret,
)
from markets.validation import FieldError

__all__ = [
    "HOOK_ENV_ALLOWLIST",
    "SIGNATURE_HEADER",
    "CheckpointHook",
    "HookResult",
    "HookRunner",
    "command_env",
    "env_problem",
    "header_problem",
    "run_checkpoint_hook",
    "sign",
]

_DETAIL_CHARS = 300  # of a command's stderr kept in the record

# What a command hook inherits from the daemon's environment, and why:
# PATH (argv[0] and what the hook runs are found on it), HOME (tools keep
# their settings and caches there), LANG / LC_ALL / LC_CTYPE (the encoding of
# the hook's output, which we decode), TZ (its log times match ours), TMPDIR
# (a container's writable scratch), USER / LOGNAME (tools that ask who runs
# them). Nothing here carries a credential; proxies are left out because a
# proxy URL can (``http://user:pass@proxy``): a hook that needs one says so
# in its ``env``.
HOOK_ENV_ALLOWLIST: tuple[str, ...] = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "USER",
    "LOGNAME",
)

SIGNATURE_HEADER = "X-Spotfolio-Signature"
# A second try only makes sense in a window with room for it; below this
# much left it would be cut off before a server could answer.
_MIN_RETRY_BUDGET_S = 0.5
_RETRY_PAUSE_S = 0.2
_RETRY_STATUSES = frozenset({408, 429})
_HTTP_URL = re.compile(r"^https?://", re.IGNORECASE)


# RFC 9110 s5.1: a field name is a token (1*tchar).
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# RFC 9110 s5.5: a field value is visible characters (and obs-text) with
# single spaces or tabs between them: no CR, LF, NUL or other control.
# obs-text is %x80-FF: http.client sends a value as Latin-1.
_VCHAR = r"\x21-\x7e\x80-\xff"
_FIELD_VALUE = re.compile(rf"([{_VCHAR}]([\x20\x09{_VCHAR}]*[{_VCHAR}])?)?")
_URL_CHARS = re.compile(r"[\x21-\x7e\x80-\U0010ffff]+")
# Headers the webhook call sets itself: a configured one would be overwritten
# (or, for the framing headers, contradict the body).
_OWN_HEADERS = frozenset(
    h.lower()
    for h in ("Content-Type", "Content-Length", "Host", "Transfer-Encoding", SIGNATURE_HEADER)
)
# The notice's variables (command_env): a hook's own would be overwritten.
_NOTICE_VARIABLES = frozenset(
    f"SPOTFOLIO_{k}" for k in ("NOTICE_ID", "WORKLOAD", "INSTANCE_ID", "DEADLINE", "BUDGET_S")
)


def _shown(name: str) -> str:
    """A configured name as a message may quote it (control characters escaped)."""
    return name if name.isprintable() else repr(name)[1:-1]


def header_problem(name: str, value: str) -> str | None:
    """What makes ``name: value`` no HTTP header field (``None``: nothing)."""
    if not _TOKEN.fullmatch(name):
        return "a header name of letters, digits and !#$%&'*+-.^_`|~ (an RFC 9110 token)"
    if name.lower() in _OWN_HEADERS:
        return "a header the webhook call does not set itself (Content-Type, Host, ...)"
    if not _FIELD_VALUE.fullmatch(value):
        return (
            "a header value of visible characters, spaces and tabs inside (RFC 9110 "
            "field-value: no CR, LF, NUL or other control character)"
        )
    return None


def env_problem(name: str, value: str) -> str | None:
    """What makes ``name=value`` no POSIX environment variable (``None``: nothing)."""
    if not name or "=" in name or "\0" in name:
        return "a variable name without '=' or NUL (POSIX)"
    if name.upper() in _NOTICE_VARIABLES:
        return "a variable the notice does not set itself (SPOTFOLIO_NOTICE_ID, ...)"
    if "\0" in value:
        return "a value without NUL characters (POSIX)"
    return None


class CheckpointHook(BaseModel):
    """A command (argv, no shell) or a webhook URL; exactly one."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: tuple[str, ...] | None = Field(default=None, min_length=1)
    # A URL that embeds its credential (a chat service's incoming webhook)
    # can itself be a reference; a literal is checked here, a resolved one
    # at call time.
    url: Secret | None = None
    headers: dict[str, Secret] = Field(default_factory=dict)
    env: dict[str, Secret] = Field(default_factory=dict)
    # The HMAC-SHA256 key of the webhook's X-Spotfolio-Signature header.
    signing_key: Secret | None = None

    @model_validator(mode="after")
    def _one(self) -> Self:
        if (self.command is None) == (self.url is None):
            raise ValueError("exactly one of 'command' or 'url'")
        if isinstance(self.url, str) and not (
            _HTTP_URL.match(self.url) and _URL_CHARS.fullmatch(self.url)
        ):
            raise FieldError(
                "url",
                "a URL that starts with http:// or https:// (no spaces or control characters)",
            )
        for i, arg in enumerate(self.command or ()):
            if "\0" in arg or (i == 0 and not arg.strip()):
                raise FieldError(f"command[{i}]", "a program and arguments without NUL characters")
        for name, value in self.headers.items():
            why = header_problem(name, value if isinstance(value, str) else "")
            if why is not None:
                raise FieldError(f"headers.{_shown(name)}", why)
        for name, value in self.env.items():
            why = env_problem(name, value if isinstance(value, str) else "")
            if why is not None:
                raise FieldError(f"env.{_shown(name)}", why)
        if self.command is not None and (self.headers or self.signing_key is not None):
            raise ValueError("'headers' and 'signing_key' only with 'url' (a webhook)")
        return self

    def references(self) -> tuple[SecretRef, ...]:
        """The secret references among its headers, env and signing key."""
        values = [self.url, *self.headers.values(), *self.env.values(), self.signing_key]
        return tuple(v for v in values if isinstance(v, SecretRef))


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
    attempts: int = 1

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
            "attempts": self.attempts,
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
        attempts: int = 1,
    ) -> HookResult: ...


@dataclass
class _Reply:
    """What one webhook attempt saw (status only: the body is not kept)."""

    status: int | None = None
    error: str | None = None
    timed_out: bool = False

    @property
    def retryable(self) -> bool:
        if self.timed_out:
            return False  # it had the whole budget
        if self.status is None:
            return True  # no connection, reset, DNS
        return self.status >= 500 or self.status in _RETRY_STATUSES


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


def sign(body: bytes, key: str) -> str:
    """The ``X-Spotfolio-Signature`` value of ``body``: ``sha256=<hex HMAC>``."""
    return "sha256=" + hmac.new(key.encode("utf-8"), body, hashlib.sha256).hexdigest()


def run_checkpoint_hook(
    hook: CheckpointHook | None,
    *,
    notice_id: str,
    workload: str,
    instance_id: str,
    deadline: datetime | None,
    budget_s: float,
    clock: Clock | None = None,
    secrets: SecretResolver | None = None,
) -> HookResult:
    """Run ``hook`` for one notice, for at most ``budget_s`` seconds.

    ``secrets`` resolves the hook's secret references (default: ``env``
    references only, from the daemon's environment)."""
    clock = clock or SystemClock()
    resolver = secrets or EnvSecrets()
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
        attempts: int = 1,
    ) -> HookResult:
        elapsed = clock.monotonic() - t0
        return HookResult(
            kind,
            ok,
            timed_out,
            elapsed,
            budget_s,
            started_at,
            redact(detail),
            exit_code,
            http_status,
            attempts,
        )

    if hook is None:
        return result("none", True, "no checkpoint hook configured")
    kind = "command" if hook.command is not None else "webhook"
    if budget_s <= 0:
        return result(kind, False, "no time left in the notice window: hook not called")
    if hook.command is not None:
        try:
            env = {k: resolve_secret(v, resolver) for k, v in hook.env.items()}
        except SecretUnavailableError as e:
            return result(kind, False, f"secret unavailable, hook not called: {e}", attempts=0)
        for name, value in env.items():
            if "\0" in value:  # a resolved reference: never quoted
                ref = hook.env[name]
                shown = ref.describe() if isinstance(ref, SecretRef) else name
                why = f"{shown} resolves to a value with NUL, hook not called"
                return result(kind, False, why, attempts=0)
        left = budget_s - (clock.monotonic() - t0)
        if left <= 0:
            return result(kind, False, "no time left after reading its secrets: hook not called")
        return _run_command(hook.command, command_env(env, payload), left, result)
    assert hook.url is not None
    return _run_webhook(hook, hook.url, payload, budget_s, resolver, clock, result)


def command_env(hook_env: Mapping[str, str], payload: Payload) -> dict[str, str]:
    """A command hook's whole environment: the allowlist, its own, the notice."""
    env = {k: os.environ[k] for k in HOOK_ENV_ALLOWLIST if k in os.environ}
    env.update(hook_env)
    env.update({f"SPOTFOLIO_{k.upper()}": "" if v is None else str(v) for k, v in payload.items()})
    return env


def _run_command(
    argv: tuple[str, ...],
    env: dict[str, str],
    budget_s: float,
    result: _Outcome,
) -> HookResult:
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


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A 3xx comes back as an ``HTTPError`` with its status: never followed,
    so the configured headers never go to the redirect's target."""

    def redirect_request(self, *_args: object, **_kwargs: object) -> None:
        return None


# Built once: an opener is a stack of handlers, shared safely across threads.
_OPENER = urllib.request.build_opener(_NoRedirect)


def _attempt(request: urllib.request.Request, timeout_s: float) -> _Reply:
    try:
        # The socket timeout bounds each blocking read; the caller's join()
        # bounds the whole exchange (a server dribbling bytes cannot hold us).
        with _OPENER.open(request, timeout=timeout_s) as resp:
            return _Reply(status=resp.status)
    except urllib.error.HTTPError as e:
        e.close()  # the body is not read: only the status is kept
        return _Reply(status=e.code)
    except (ValueError, http.client.InvalidURL) as e:
        # A malformed URL (InvalidURL quotes it): the URL may be a resolved
        # secret, so only the kind of fault is kept.
        return _Reply(error=f"{type(e).__name__} (a malformed URL)")
    except http.client.HTTPException as e:  # BadStatusLine, IncompleteRead, ...
        return _Reply(error=f"{type(e).__name__} (a malformed HTTP reply)")
    except (urllib.error.URLError, OSError) as e:
        # URLError wraps the socket's error in ``reason`` (a str or an
        # OSError); an SSLError names its own.
        reason: object = e.reason if isinstance(e, urllib.error.URLError | ssl.SSLError) else e
        # The socket's own timeout (connect or read) can fire just before
        # join() gives up: it is the same outcome, a hook out of budget.
        return _Reply(error=str(reason), timed_out=isinstance(reason, TimeoutError))


@dataclass
class _Exchange:
    """The webhook's worker thread's outcome: the last reply, and how many tries."""

    reply: _Reply | None = None
    attempts: int = 0
    secret_error: str | None = None


def _run_webhook(
    hook: CheckpointHook,
    url: Secret,
    payload: Payload,
    budget_s: float,
    secrets: SecretResolver,
    clock: Clock,
    result: _Outcome,
) -> HookResult:
    body = json.dumps(payload).encode("utf-8")
    t0 = clock.monotonic()
    box = _Exchange()

    def call() -> None:
        # Secrets are read here, inside the budget the join below enforces.
        try:
            target = resolve_secret(url, secrets)
            headers = {k: resolve_secret(v, secrets) for k, v in hook.headers.items()}
            key = None if hook.signing_key is None else resolve_secret(hook.signing_key, secrets)
        except SecretUnavailableError as e:
            box.secret_error = str(e)
            return
        if not (_HTTP_URL.match(target) and _URL_CHARS.fullmatch(target)):
            box.secret_error = f"{url.describe() if isinstance(url, SecretRef) else 'url'} "
            box.secret_error += "(resolves to no http:// or https:// URL)"
            return
        for name, value in headers.items():
            if header_problem(name, value) is not None:  # a resolved reference: never quoted
                ref = hook.headers[name]
                box.secret_error = f"{ref.describe() if isinstance(ref, SecretRef) else name} "
                box.secret_error += "(resolves to no HTTP header value: CR, LF or a control)"
                return
        headers["Content-Type"] = "application/json"
        if key is not None:
            headers[SIGNATURE_HEADER] = sign(body, key)
        try:
            request = urllib.request.Request(target, data=body, headers=headers, method="POST")
        except ValueError as e:  # unparsable: as in _attempt, the URL is not quoted
            box.reply = _Reply(error=f"{type(e).__name__} (a malformed URL)")
            return
        for _ in range(2):
            left = budget_s - (clock.monotonic() - t0)
            box.attempts += 1
            box.reply = reply = _attempt(request, max(left, 0.05))
            ok = reply.status is not None and 200 <= reply.status < 300
            left = budget_s - (clock.monotonic() - t0)
            if ok or not reply.retryable or left < _MIN_RETRY_BUDGET_S + _RETRY_PAUSE_S:
                return
            time.sleep(_RETRY_PAUSE_S)

    worker = threading.Thread(target=call, name="spotfolio-webhook", daemon=True)
    worker.start()
    worker.join(budget_s)
    n = max(box.attempts, 1)
    if worker.is_alive() or (box.reply is not None and box.reply.timed_out):
        return result(
            "webhook",
            False,
            f"no answer within its {budget_s:.1f} s budget",
            timed_out=True,
            attempts=n,
        )
    if box.secret_error is not None:
        return result(
            "webhook", False, f"secret unavailable, hook not called: {box.secret_error}", attempts=0
        )
    reply = box.reply
    assert reply is not None  # the worker ended, with a reply or a secret error
    if reply.error is not None:
        return result("webhook", False, f"request failed: {reply.error}", attempts=n)
    assert reply.status is not None
    status = reply.status
    detail = f"HTTP {status}"
    if 300 <= status < 400:
        detail += " (a redirect: not followed)"
    return result("webhook", 200 <= status < 300, detail, http_status=status, attempts=n)


class HookRunner:
    """Runs hooks on a small thread pool: ``submit`` returns at once.

    The future's result is the ``HookResult`` (never an exception). Call
    ``shutdown`` when the daemon stops.
    """

    def __init__(
        self,
        max_workers: int = 4,
        clock: Clock | None = None,
        secrets: SecretResolver | None = None,
    ) -> None:
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="ckpt-hook")
        self._clock = clock
        self._secrets = secrets

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
            secrets=self._secrets,
        )

    def shutdown(self, wait: bool = True) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=not wait)
