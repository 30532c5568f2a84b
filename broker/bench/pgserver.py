"""A throwaway PostgreSQL server for the benchmarks: initdb, pg_ctl, stop.

Owns: ``TempPostgres`` (a cluster made under a temporary directory, on a
free loopback port, trust authentication, stopped and deleted on exit; its
``restart`` is ``pg_ctl restart -m fast``, what an operator's restart of the
store server does to the daemon's connections) and ``missing`` (why none can
be started here, or ``None``). As root the server runs as the ``postgres``
user (PostgreSQL refuses root), through ``runuser``.

Must not: listen beyond 127.0.0.1, or outlive its ``with`` block.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from types import TracebackType

__all__ = ["TempPostgres", "missing"]

_BINARIES = ("initdb", "pg_ctl", "postgres")


def _bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    hits = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))  # Debian keeps them here
    return hits[-1] if hits else None


def _runuser_prefix() -> list[str] | None:
    if os.geteuid() != 0:
        return []
    import pwd

    try:
        pwd.getpwnam("postgres")
    except KeyError:
        return None
    runuser = shutil.which("runuser")
    return [runuser, "-u", "postgres", "--"] if runuser else None


def missing() -> str | None:
    """Why no server can be started here (``None``: one can)."""
    absent = [n for n in _BINARIES if _bin(n) is None]
    if absent:
        return f"PostgreSQL server binaries not found: {', '.join(absent)}"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg (the postgres extra's driver) is not installed"
    if _runuser_prefix() is None:
        return "running as root with no 'postgres' user or no runuser to run the server as"
    return None


class TempPostgres:
    """``with TempPostgres() as pg: pg.url``; ``pg.restart()`` in between."""

    def __init__(self) -> None:
        why = missing()
        if why is not None:
            raise RuntimeError(why)
        self._prefix = _runuser_prefix() or []
        self._root = tempfile.mkdtemp(prefix="spotfolio-bench-pg-")
        self._data = os.path.join(self._root, "data")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"
        self.restarts = 0

    def _ctl(self, *args: str) -> None:
        opts = f"-p {self.port} -k {self._root} -c listen_addresses=127.0.0.1 -c fsync=off"
        cmd = [*self._prefix, str(_bin("pg_ctl")), "-D", self._data, "-o", opts]
        subprocess.run(
            [*cmd, "-l", f"{self._root}/log", "-w", *args],
            check=True,
            capture_output=True,
            timeout=120,
        )

    def restart_argv(self) -> list[str]:
        """The command that restarts the server (for a child process to run)."""
        opts = f"-p {self.port} -k {self._root} -c listen_addresses=127.0.0.1 -c fsync=off"
        return [
            *self._prefix,
            str(_bin("pg_ctl")),
            "-D",
            self._data,
            "-o",
            opts,
            "-l",
            f"{self._root}/log",
            "-w",
            "-m",
            "fast",
            "restart",
        ]

    def restart(self) -> None:
        subprocess.run(self.restart_argv(), check=True, capture_output=True, timeout=120)
        self.restarts += 1

    def __enter__(self) -> TempPostgres:
        if self._prefix:
            import pwd

            pw = pwd.getpwnam("postgres")
            os.chown(self._root, pw.pw_uid, pw.pw_gid)
        initdb = [str(_bin("initdb")), "-D", self._data, "-U", "postgres", "--auth=trust"]
        subprocess.run(
            [*self._prefix, *initdb, "-E", "UTF8"], check=True, capture_output=True, timeout=120
        )
        self._ctl("start")
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
            self._ctl("-m", "immediate", "stop")
        shutil.rmtree(self._root, ignore_errors=True)
