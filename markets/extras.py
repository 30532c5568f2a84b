"""Optional extras: which pip extra brings which optional library.

Owns: ``EXTRAS`` (a third-party import name -> the extra of ``pyproject.toml``
that installs it), ``MissingExtraError`` and ``needs_extra``, which turns the
``ModuleNotFoundError`` of an optional library into that error (``require``
checks for one up front): an ``InputError``, so the command line prints one
line naming the option that asked for it and the extra to install, and exits
2, instead of a traceback.

``pip install spotfolio`` is enough for the what-if on the embedded market and
the daemon on the simulated cloud with SQLite; ``spotfolio[aws]``,
``[gcp]``, ``[postgres]``, ``[plot]``, ``[highs]`` and ``[usage]`` add the rest.
``tests/contract/test_extras.py`` checks this table against the extras
declared in ``pyproject.toml`` and every import in the three packages.

Must not: import an optional library, or know which command needs which extra
(the caller names its option).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType

from markets.errors import InputError

__all__ = ["EXTRAS", "MissingExtraError", "extra_for", "needs_extra", "require"]

# top-level import name -> extra
EXTRAS: Mapping[str, str] = MappingProxyType(
    {
        "boto3": "aws",
        "botocore": "aws",
        "google": "gcp",  # google.cloud.compute_v1, google.api_core
        "requests": "gcp",  # google-api-core's transport (its errors are translated)
        "psycopg": "postgres",
        "matplotlib": "plot",
        "highspy": "highs",
        "duckdb": "usage",
    }
)


class MissingExtraError(InputError):
    """An optional library is not installed; ``extra`` names the extra that
    installs it."""

    def __init__(self, source: str, extra: str, *, got: object = None) -> None:
        self.extra = extra
        super().__init__(
            source,
            None,
            f"the {extra!r} extra installed (pip install 'spotfolio[{extra}]')",
            got=got,
        )


def extra_for(error: ModuleNotFoundError) -> str | None:
    """The extra that installs the module ``error`` could not find (``None``:
    not an optional library, so a bug or a broken install)."""
    return EXTRAS.get((error.name or "").split(".")[0])


@contextmanager
def needs_extra(source: str, *, got: object = None) -> Iterator[None]:
    """Run the block; an optional library missing inside it becomes a
    ``MissingExtraError`` naming ``source`` (the option or config field that
    asked for it) and ``got`` (what the user wrote there)."""
    try:
        yield
    except ModuleNotFoundError as e:
        extra = extra_for(e)
        if extra is None:
            raise
        raise MissingExtraError(source, extra, got=got) from e


def require(module: str, source: str, *, got: object = None) -> None:
    """Fail now, without importing it, if the optional ``module`` (a key of
    ``EXTRAS``) is not installed: for a command that would need it only at
    the end of a long run (a chart after a benchmark)."""
    if importlib.util.find_spec(module) is None:
        raise MissingExtraError(source, EXTRAS[module], got=got)
