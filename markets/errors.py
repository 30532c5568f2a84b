"""The project's one error tree, split by what the caller should do.

Every package raises these (``markets`` is the bottom layer, so it owns them);
SDK exceptions are translated at the adapter boundary with ``raise ... from e``.

::

    SpotfolioError
    ├── TransientError            retry with jittered backoff
    │   └── ThrottledError        the API said "slow down"
    ├── CapacityUnavailableError  try the next acceptable pool
    ├── FatalError                fail fast and loudly
    │   ├── AuthError             credentials / permissions
    │   ├── QuotaExceededError    account limit: a human must act
    │   └── InputError            a bad file, option or field (CLI exit 2)
    │       └── StaleDataError    no usable market data at all
    └── ExplainableError          a decision that cannot be made; say why
        ├── InfeasiblePlanError   the constraints conflict (lists them)
        ├── SolverTimeLimitError  the solver stopped at its time limit with no plan
        └── SpotNeverFinishesError  lambda * (R + L) >= 1

``InputError`` carries the file, the field path and the expectation so that the
command line can print one line naming all three.

Every error here (and every subclass elsewhere) pickles to itself: its type,
``args`` and fields are rebuilt without calling ``__init__`` again
(``RebuiltByState``), so an error raised in a worker process reaches the
parent as the same one-line error, whatever its constructor takes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "AuthError",
    "CapacityUnavailableError",
    "ExplainableError",
    "FatalError",
    "InfeasiblePlanError",
    "InputError",
    "QuotaExceededError",
    "RebuiltByState",
    "SolverTimeLimitError",
    "SpotNeverFinishesError",
    "SpotfolioError",
    "StaleDataError",
    "ThrottledError",
    "TransientError",
]


def _rebuilt(cls: type[BaseException], args: tuple[object, ...], state: dict[str, Any]) -> object:
    err = cls.__new__(cls, *args)
    err.args = args
    err.__dict__.update(state)
    return err


class RebuiltByState:
    """Mixin for an exception whose ``__init__`` takes other arguments than
    its ``args``: unpickling restores ``args`` and the instance's fields
    instead of calling ``__init__`` with ``args`` (Python's default, which
    fails or garbles the message for such a constructor)."""

    args: tuple[object, ...]

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuilt, (type(self), self.args, dict(vars(self))))


class SpotfolioError(RebuiltByState, Exception):
    """Root of every error Spotfolio raises on purpose."""


class TransientError(SpotfolioError):
    """A temporary fault (5xx, timeout): the same call may succeed later."""


class ThrottledError(TransientError):
    """The provider throttled us after botocore's own retries ran out."""


class CapacityUnavailableError(SpotfolioError):
    """A pool cannot supply capacity now; try the next acceptable pool."""

    def __init__(self, message: str, *, pool_key: str | None = None) -> None:
        super().__init__(message)
        self.pool_key = pool_key


class FatalError(SpotfolioError):
    """Retrying will not help: stop and tell a human."""


class AuthError(FatalError):
    """Credentials are missing, expired or lack a permission."""


class QuotaExceededError(FatalError):
    """An account quota (vCPU limit, instance limit) blocks the request."""


class InputError(FatalError):
    """Bad input from a file, an option or a cloud response.

    ``source`` names the file or option, ``field`` the path inside it
    (``workloads[2].max_spot_share``, ``line 17``), ``expected`` what would
    have been accepted. ``str()`` gives the one-line message the CLI prints.
    """

    def __init__(
        self,
        source: str,
        field: str | None,
        expected: str,
        *,
        got: object = None,
    ) -> None:
        self.source = source
        self.field = field
        self.expected = expected
        self.got = got
        where = f"{source}: {field}" if field else source
        detail = f"expected {expected}"
        if got is not None:
            detail += f", got {got!r}"
        super().__init__(f"{where}: {detail}")


class StaleDataError(InputError):
    """No usable market data: refuse to plan on empty data."""


class ExplainableError(SpotfolioError):
    """A decision cannot be made; the message explains why in user terms."""


class InfeasiblePlanError(ExplainableError):
    """The optimizer's constraints conflict.

    ``conflicts`` lists the constraints, in words, that cannot hold together.
    """

    def __init__(self, message: str, conflicts: Sequence[str] = ()) -> None:
        self.conflicts = tuple(conflicts)
        text = message
        if self.conflicts:
            text += "\n" + "\n".join(f"  - {c}" for c in self.conflicts)
        super().__init__(text)


class SolverTimeLimitError(ExplainableError):
    """The solver reached its time limit before finding any feasible plan.

    Not a conflict between constraints: nothing was proven infeasible. More
    time (``--time-limit``) or a smaller model may find one.
    """

    def __init__(self, time_limit_s: float) -> None:
        self.time_limit_s = time_limit_s
        super().__init__(
            f"the solver hit its time limit ({time_limit_s:g} s) before finding any feasible "
            "plan (none proven infeasible): allow more time (--time-limit) or a shorter horizon"
        )


class SpotNeverFinishesError(ExplainableError):
    """Interruptions arrive faster than work can be redone: spot never finishes."""
