"""Translate botocore exceptions into the project's error tree, at the boundary.

Owns: the error-code tables and ``aws_call`` (a context manager every SDK call
in ``markets.aws`` runs inside). botocore has already retried throttling and
5xx by the time an exception reaches us (see ``sdk.client_config``), so a
``ThrottledError`` or ``TransientError`` here means "retries exhausted".

Must not: retry, sleep, or swallow anything: every exception leaves as a
``SpotfolioError`` subclass raised ``from`` the original, except programming
errors (``ParamValidationError`` and the like), which keep their own type.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from botocore.exceptions import (
    ClientError,
    ConnectionError,
    CredentialRetrievalError,
    HTTPClientError,
    NoCredentialsError,
    PartialCredentialsError,
)

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

__all__ = [
    "AUTH_CODES",
    "CAPACITY_CODES",
    "LAUNCH_CAPACITY_CODES",
    "THROTTLE_CODES",
    "aws_call",
    "translate",
]

# Error codes as EC2 (query protocol) and the JSON services (Pricing) spell them.
THROTTLE_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "RequestThrottled",
        "RequestThrottledException",
    }
)
# Credentials or permissions: retrying cannot help and a stale snapshot would
# hide a broken deployment, so these fail fast.
AUTH_CODES = frozenset(
    {
        "UnauthorizedOperation",
        "AuthFailure",
        "InvalidClientTokenId",
        "ExpiredToken",
        "ExpiredTokenException",
        "AccessDenied",
        "AccessDeniedException",
        "SignatureDoesNotMatch",
        "UnrecognizedClientException",
        "OptInRequired",
    }
)
CAPACITY_CODES = frozenset({"InsufficientInstanceCapacity", "InsufficientCapacity"})
# What RunInstances answers when *this zone* cannot supply the type now: the
# next acceptable pool may. ``Unsupported``: the type is not offered in the
# zone; ``SpotMaxPriceTooLow``: the spot price is above our maximum; a full
# subnet is local to its zone too. Kept apart from CAPACITY_CODES because on a
# read-only call these codes mean something else.
LAUNCH_CAPACITY_CODES = CAPACITY_CODES | frozenset(
    {
        "InsufficientHostCapacity",
        "InsufficientFreeAddressesInSubnet",
        "SpotMaxPriceTooLow",
        "UnfulfillableCapacity",
        "Unsupported",
    }
)
QUOTA_CODES = frozenset(
    {"VcpuLimitExceeded", "InstanceLimitExceeded", "MaxSpotInstanceCountExceeded"}
)
TRANSIENT_CODES = frozenset(
    {
        "InternalError",
        "InternalFailure",
        "ServiceUnavailable",
        "Unavailable",
        "InternalErrorException",
    }
)


def translate(
    e: ClientError,
    *,
    operation: str,
    capacity_codes: frozenset[str] = CAPACITY_CODES,
    pool_key: str | None = None,
) -> SpotfolioError:
    """The project error for a botocore ``ClientError`` raised by ``operation``
    (``capacity_codes`` and ``pool_key``: for a launch into one pool)."""
    err = e.response.get("Error", {})
    code = str(err.get("Code", ""))
    message = str(err.get("Message", "")) or str(e)
    status = int(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    text = f"{operation}: {code}: {message}"
    if code in THROTTLE_CODES:
        return ThrottledError(text)
    if code in AUTH_CODES:
        return AuthError(text)
    if code in capacity_codes:
        return CapacityUnavailableError(text, pool_key=pool_key)
    if code in QUOTA_CODES:
        return QuotaExceededError(text)
    if code in TRANSIENT_CODES or status >= 500:
        return TransientError(text)
    if code.startswith("Invalid") or status == 400:
        # The request named something AWS does not know (an instance type, a
        # region): the user's option, not a fault of the cloud.
        return InputError(f"aws {operation}", None, "values AWS accepts", got=f"{code}: {message}")
    return FatalError(text)


@contextmanager
def aws_call(
    operation: str,
    *,
    capacity_codes: frozenset[str] = CAPACITY_CODES,
    pool_key: str | None = None,
) -> Iterator[None]:
    """Run SDK calls for ``operation`` (e.g. ``"ec2:DescribeSpotPriceHistory"``),
    raising project errors instead of botocore's."""
    try:
        yield
    except ClientError as e:
        raise translate(
            e, operation=operation, capacity_codes=capacity_codes, pool_key=pool_key
        ) from e
    except (NoCredentialsError, PartialCredentialsError, CredentialRetrievalError) as e:
        raise AuthError(f"{operation}: {e}") from e
    except (ConnectionError, HTTPClientError) as e:
        # Connection refused, timeouts, reset connections: the network, not us.
        raise TransientError(f"{operation}: {e}") from e
