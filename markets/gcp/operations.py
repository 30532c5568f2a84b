"""Waiting for Compute Engine operations, bounded, and reading how they ended.

Owns: ``await_operations``. An ``instances.insert`` answers at once with a
running operation; whether the VM was created (or the zone had no capacity,
or a quota was hit) is known only when the operation is DONE, so the provider
waits with ``zoneOperations.wait`` (the server holds each call until the
operation is done or about two minutes pass: Compute Engine API reference)
for at most ``wait_s`` in all.

Must not: retry anything itself (api-core's ``Retry`` does) or decide what a
failure means for the fleet (the provider does).
"""

from __future__ import annotations

import enum
import logging
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeVar

from markets.clock import Clock
from markets.errors import SpotfolioError
from markets.gcp.errors import gcp_call, operation_error
from markets.gcp.sdk import CallPolicy, ZoneOperationsApi

if TYPE_CHECKING:
    from google.api_core.extended_operation import ExtendedOperation
    from google.cloud.compute_v1 import Operation

__all__ = ["SERVER_WAIT_S", "await_operations", "status_name"]

log = logging.getLogger(__name__)
K = TypeVar("K")

SERVER_WAIT_S = 120.0  # the longest one zoneOperations.wait call is held


def status_name(op: Operation | ExtendedOperation) -> str:
    """``DONE``/``RUNNING``/``PENDING``: the name of the ``Operation.Status``
    enum (an ``ExtendedOperation``, untyped, hands on its operation's)."""
    status: object = op.status
    return status.name if isinstance(status, enum.Enum) else str(status or "")


def await_operations(
    client: ZoneOperationsApi,
    project: str,
    zone: str,
    ops: Mapping[K, Operation | ExtendedOperation],
    *,
    wait_s: float,
    clock: Clock,
    policy: CallPolicy,
    operation: str,
    pool_key: str | None = None,
) -> dict[K, SpotfolioError]:
    """Wait (at most ``wait_s`` in all) for ``ops`` in ``zone``; the project
    errors the finished ones report, by key. Operations still running at the
    deadline are logged and left out (their VMs show up in later lists)."""
    errors: dict[K, SpotfolioError] = {}
    deadline = clock.monotonic() + wait_s
    # With a manual clock time does not pass: the call count bounds the loop too.
    max_calls = math.ceil(wait_s / SERVER_WAIT_S) + 1
    for key, first in ops.items():
        op: Operation | ExtendedOperation = first
        calls = 0
        while status_name(op) != "DONE" and calls < max_calls and clock.monotonic() < deadline:
            calls += 1
            request: dict[str, str] = {"project": project, "zone": zone, "operation": str(op.name)}
            with gcp_call("compute.zoneOperations.wait"):
                op = client.wait(
                    request=request,
                    retry=policy.retry(),
                    timeout=policy.request_s + SERVER_WAIT_S,
                )
        if status_name(op) != "DONE":
            log.warning("%s %s in %s still running after %.0f s", operation, op.name, zone, wait_s)
            continue
        error = operation_error(op, operation=operation, pool_key=pool_key)
        if error is not None:
            errors[key] = error
    return errors
