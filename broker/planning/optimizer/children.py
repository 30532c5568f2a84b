"""No solver process outlives its caller.

Owns: ``solver_children()``, the context every CBC solve runs in, and the
hook that makes it work: PuLP starts CBC with a bare ``subprocess.Popen``
(``pulp.apis.coin_api``) and offers no way to pass options to it, so
``install()`` rebinds the ``subprocess`` name *in that PuLP module only* to a
shim whose ``Popen``

- on Linux, asks the kernel to SIGKILL the child when the thread that started
  it dies (``prctl(PR_SET_PDEATHSIG)``): a SIGKILL of our process, which no
  handler can catch, still takes CBC with it. util-linux's ``setpriv
  --pdeathsig KILL`` sets it and then ``exec``s CBC in the same process,
  where there is one; else ``prctl`` via ctypes in a ``preexec_fn``. Why
  ``setpriv`` first: any ``preexec_fn`` makes ``subprocess`` ``fork`` the
  whole interpreter instead of ``vfork``, which copies its page tables: 17
  ms a launch at ~300 MB of resident memory, measured (cProfile,
  ``fork_exec``) on ``whatif --days 60`` on a loaded 2-core machine, where
  a one-year what-if launches CBC ~7,000 times. Other systems have no such
  call; there a SIGKILL of the parent leaves CBC running until its own time
  limit;
- records the child, so that an exception unwinding through a solve
  (``KeyboardInterrupt`` on SIGINT, ``SystemExit`` from the CLI's SIGTERM
  handler, any error) kills and reaps it before it propagates.

Every other name of the shim is the real ``subprocess`` module's.

Must not: build or solve models, or touch ``subprocess`` for anyone but PuLP.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import shutil
import signal
import subprocess
import sys
import threading
import types
from collections.abc import Iterator
from typing import Any

import pulp.apis.coin_api as coin_api

__all__ = ["install", "live_children", "solver_children"]

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# child -> the thread that started it (a solve kills only its own children)
_LIVE: dict[subprocess.Popen[Any], int] = {}
_LOCK = threading.Lock()


def _die_with_parent() -> None:  # pragma: no cover - runs in the child, before exec
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


@functools.cache
def _setpriv() -> str | None:
    return shutil.which("setpriv") if sys.platform.startswith("linux") else None


def _popen(*args: Any, **kwargs: Any) -> subprocess.Popen[Any]:
    # ``Any``: the shim forwards PuLP's arguments to subprocess.Popen as given.
    if sys.platform.startswith("linux") and "preexec_fn" not in kwargs:
        wrapper = _setpriv()
        if wrapper is not None and args and isinstance(args[0], list) and not kwargs.get("shell"):
            args = ([wrapper, "--pdeathsig", "KILL", "--", *args[0]], *args[1:])
        else:
            kwargs["preexec_fn"] = _die_with_parent
    child: subprocess.Popen[Any] = subprocess.Popen(*args, **kwargs)
    with _LOCK:
        _LIVE[child] = threading.get_ident()
    return child


class _Shim(types.ModuleType):
    """``subprocess`` as PuLP sees it: our ``Popen``, the rest unchanged."""

    Popen = staticmethod(_popen)

    def __getattr__(self, name: str) -> Any:
        return getattr(subprocess, name)


def install() -> None:
    """Route PuLP's CBC launches through the shim (idempotent)."""
    if not isinstance(coin_api.subprocess, _Shim):
        coin_api.subprocess = _Shim("subprocess")


def live_children() -> list[int]:
    """Process ids of solver children still running (for tests)."""
    with _LOCK:
        return [c.pid for c in _LIVE if c.poll() is None]


def _mine() -> list[subprocess.Popen[Any]]:
    me = threading.get_ident()
    with _LOCK:
        return [c for c, t in _LIVE.items() if t == me]


def _reap(children: list[subprocess.Popen[Any]], *, kill: bool) -> None:
    for child in children:
        if kill and child.poll() is None:
            with contextlib.suppress(OSError):
                child.kill()
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            child.wait(timeout=5)
    with _LOCK:
        for child in children:
            if child.poll() is not None:
                _LIVE.pop(child, None)


@contextlib.contextmanager
def solver_children() -> Iterator[None]:
    """Run a solve; if it ends in an exception, the CBC it started is killed."""
    install()
    try:
        yield
    except BaseException:
        _reap(_mine(), kill=True)
        raise
    _reap(_mine(), kill=False)
