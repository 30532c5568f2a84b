"""Translate Google API errors into the project's error tree, at the boundary.

Owns: the reason/code tables, ``translate`` (an exception raised by a
google-cloud-compute call), ``operation_error`` (the ``error`` of a finished
Compute Engine operation: capacity errors of an insert arrive there, in an
HTTP 200 reply, not as an exception) and ``gcp_call`` (a context manager every
SDK call in ``markets.gcp`` runs inside).

How Compute Engine reports what, and what the caller should do:

=====================================  =================  ==========================
reply                                  project error      caller
=====================================  =================  ==========================
ZONE_RESOURCE_POOL_EXHAUSTED[_WITH_    CapacityUnavail-   try the next pool
DETAILS] (operation error; a stockout)  ableError
QUOTA_EXCEEDED / quotaExceeded (403,   QuotaExceeded-     a human raises the quota
or operation error)                    Error
rateLimitExceeded (403), 429           ThrottledError     later (retries exhausted)
401, other 403 (permission denied)     AuthError          fail fast
500, 502, 503, 504, network            TransientError     later (retries exhausted)
400, 404 on a read                     InputError         fix the option (project,
                                                          zone, machine type)
=====================================  =================  ==========================

api-core has retried 429 and 5xx by the time an exception reaches us
(``sdk.CallPolicy``), so ``ThrottledError`` / ``TransientError`` here mean
"retries exhausted". Callers that give 404 or 409 a meaning (a deleted
instance, a name already taken) catch ``NotFound`` / ``Conflict`` inside the
``gcp_call`` block.

Must not: retry, sleep, or swallow anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import requests
from google.api_core import exceptions as gexc
from google.auth import exceptions as auth_exc

from markets.errors import (
    AuthError,
    CapacityUnavailableError,
    FatalError,
    InputError,
    QuotaExceededError,
    SpotfolioError,
    ThrottledError,
    TransientError,
)

if TYPE_CHECKING:
    from google.api_core.extended_operation import ExtendedOperation
    from google.cloud.compute_v1 import Operation

__all__ = [
    "CAPACITY_CODES",
    "QUOTA_CODES",
    "THROTTLE_CODES",
    "gcp_call",
    "operation_error",
    "operation_error_codes",
    "translate",
]

# A zone out of the requested resources right now ("stockout"); the
# _WITH_DETAILS variant names the machine type and the zones that have it.
# Compute Engine docs, "Troubleshooting resource availability errors".
CAPACITY_CODES = frozenset(
    {
        "ZONE_RESOURCE_POOL_EXHAUSTED",
        "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
        "REGION_RESOURCE_POOL_EXHAUSTED",
        "resourcePoolExhausted",
    }
)
QUOTA_CODES = frozenset({"QUOTA_EXCEEDED", "quotaExceeded"})
# Per-minute API rate limits come back as 403 rateLimitExceeded as well as 429.
THROTTLE_CODES = frozenset({"rateLimitExceeded", "userRateLimitExceeded", "RATE_LIMIT_EXCEEDED"})
# Operation error codes that mean the request itself named something wrong.
_INPUT_CODES = frozenset({"RESOURCE_NOT_FOUND", "INVALID_USAGE", "INVALID_FIELD_VALUE"})
_CAPACITY_TEXT = "does not have enough resources available"


def _codes(e: gexc.GoogleAPICallError) -> set[str]:
    found = {str(e.reason)} if e.reason else set()
    for item in e.errors or ():
        if isinstance(item, dict):
            found |= {str(item[k]) for k in ("reason", "code") if item.get(k)}
    return found


def _classify(
    codes: Iterable[str], status: int, text: str, *, source: str, pool_key: str | None
) -> SpotfolioError:
    codes = set(codes)
    if codes & CAPACITY_CODES or _CAPACITY_TEXT in text:
        return CapacityUnavailableError(text, pool_key=pool_key)
    if codes & QUOTA_CODES:
        return QuotaExceededError(text)
    if codes & THROTTLE_CODES or status == 429:
        return ThrottledError(text)
    if status in (401, 403):
        return AuthError(text)
    if status >= 500:
        return TransientError(text)
    if status in (400, 404) or codes & _INPUT_CODES:
        return InputError(source, None, "names Compute Engine knows", got=text)
    return FatalError(text)


def translate(e: BaseException, *, operation: str, pool_key: str | None = None) -> SpotfolioError:
    """The project error for an exception raised by ``operation``
    (``"compute.instances.insert"``); ``pool_key`` names the pool of a launch."""
    if isinstance(e, gexc.RetryError):
        cause = e.cause
        if cause is None or isinstance(cause, gexc.RetryError):
            return TransientError(f"{operation}: {e}")
        return translate(cause, operation=operation, pool_key=pool_key)
    if isinstance(e, gexc.GoogleAPICallError):
        status = int(e.code or 0)
        text = f"{operation}: {status} {e.message}"
        return _classify(_codes(e), status, text, source=f"gcp {operation}", pool_key=pool_key)
    if isinstance(e, auth_exc.DefaultCredentialsError | auth_exc.RefreshError):
        return AuthError(f"{operation}: {e}")
    if isinstance(e, auth_exc.TransportError | requests.RequestException):
        # Connection refused, timeouts, reset connections: the network, not us.
        return TransientError(f"{operation}: {e}")
    return FatalError(f"{operation}: {type(e).__name__}: {e}")


def operation_error_codes(op: Operation | ExtendedOperation) -> list[str]:
    """The ``error.errors[].code`` values of a Compute Engine operation (an
    unset ``error`` reads as an empty message: no codes)."""
    return [str(item.code) for item in op.error.errors if item.code]


def operation_error(
    op: Operation | ExtendedOperation, *, operation: str, pool_key: str | None = None
) -> SpotfolioError | None:
    """The project error a finished operation reports, or ``None``."""
    codes = operation_error_codes(op)
    if not codes:
        return None
    messages = [str(item.message) for item in op.error.errors if item.message]
    status = int(op.http_error_status_code or 0)
    text = f"{operation}: {', '.join(codes)}: {'; '.join(messages)}"
    return _classify(codes, status, text, source=f"gcp {operation}", pool_key=pool_key)


@contextmanager
def gcp_call(operation: str, *, pool_key: str | None = None) -> Iterator[None]:
    """Run SDK calls for ``operation`` (``"compute.zones.list"``), raising
    project errors instead of Google's. Programming errors (``TypeError``,
    ``ValueError`` from a malformed request) keep their own type."""
    try:
        yield
    except SpotfolioError:
        raise
    except (
        gexc.GoogleAPICallError,
        gexc.RetryError,
        auth_exc.GoogleAuthError,
        requests.RequestException,
    ) as e:
        raise translate(e, operation=operation, pool_key=pool_key) from e
