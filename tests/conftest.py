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
