"""Shared pytest fixtures. Each fixture is self-contained; add yours below."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

# -- moto's HTTP server (real HTTP on 127.0.0.1), for the AWS adapter tests ----


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    """URL of a moto server on a free 127.0.0.1 port, for the whole session.

    Clients reach it with ``endpoint_url=`` and dummy credentials; state is
    shared by every test using it, so tests only read from it (EC2's built-in
    zones, instance types and offerings) or use their own resources.
    """
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


# -- a throwaway PostgreSQL cluster, for the store tests ------------------------

_PG_BINARIES = ("initdb", "pg_ctl", "postgres")


def _pg_bin(name: str) -> str | None:
    import shutil

    found = shutil.which(name)
    if found:
        return found
    import glob

    # Debian keeps the server binaries out of PATH.
    hits = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return hits[-1] if hits else None


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """Base URL (``postgresql+psycopg://postgres@127.0.0.1:PORT``) of a
    PostgreSQL cluster made for this session under a temporary directory and
    stopped at the end. Skips, saying why, when the server binaries or the
    psycopg driver are missing. As root (CI, these machines) the server runs
    as the ``postgres`` user: PostgreSQL refuses to run as root."""
    import os
    import shutil
    import subprocess
    import tempfile

    bins = {n: _pg_bin(n) for n in _PG_BINARIES}
    missing = [n for n, p in bins.items() if p is None]
    if missing:
        pytest.skip(f"PostgreSQL server binaries not found: {', '.join(missing)}")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg (the test extra's PostgreSQL driver) is not installed")
    prefix: list[str] = []
    root = tempfile.mkdtemp(prefix="spotfolio-pg-")
    if os.geteuid() == 0:
        import pwd

        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and no 'postgres' user to run the server as")
        runuser = shutil.which("runuser")
        if runuser is None:
            pytest.skip("running as root and no runuser to drop privileges")
        prefix = [runuser, "-u", "postgres", "--"]
        os.chown(root, pw.pw_uid, pw.pw_gid)
    data = os.path.join(root, "data")
    port = _free_port()
    subprocess.run(
        [*prefix, str(bins["initdb"]), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8"],
        check=True,
        capture_output=True,
    )
    opts = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
    subprocess.run(
        [*prefix, str(bins["pg_ctl"]), "-D", data, "-o", opts, "-l", f"{root}/log", "-w", "start"],
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run(
            [*prefix, str(bins["pg_ctl"]), "-D", data, "-m", "immediate", "-w", "stop"],
            capture_output=True,
        )
        shutil.rmtree(root, ignore_errors=True)


# -- a fake Compute Engine REST API (tests/fakes/gcp.py), for the GCP adapters --


@pytest.fixture(scope="session")
def gcp_fake() -> Iterator[object]:
    """A ``tests.fakes.gcp.FakeCompute`` on a free 127.0.0.1 port for the whole
    session. Shared: tests using it only read (zones, machine types); tests
    that launch or preempt start their own ``FakeCompute``."""
    from tests.fakes.gcp import FakeCompute

    with FakeCompute(lifetime_s=3600.0) as fake:  # stops itself after an hour at most
        yield fake


# -- the "spotfolio" logger as each test found it ------------------------------


@pytest.fixture(autouse=True)
def _spotfolio_logger() -> Iterator[None]:
    """The CLI configures the project's loggers (their own handler, no
    propagation): put it back after each test, so a later test's ``caplog``
    still sees the records."""
    import logging

    # ``spotfolio daemon`` configures every project logger (the daemon's and
    # the packages' module loggers).
    logs = [logging.getLogger(n) for n in ("spotfolio", "markets", "policies", "broker")]
    saved = [(log.handlers[:], log.propagate, log.level) for log in logs]
    yield
    for log, (handlers, propagate, level) in zip(logs, saved, strict=True):
        log.handlers[:], log.propagate, log.level = handlers, propagate, level
