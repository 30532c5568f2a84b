"""Parsing list options that composition roots hand to market and provider adapters.

Owns: ``parse_names``. A CLI (``--market-option regions=us-west-2,us-east-1``),
a daemon config or a test passes a list or a comma-separated string; an empty
list or a malformed name is the user's typo and raises ``InputError`` naming
the option. The name patterns belong to each cloud (``markets.aws.options``,
``markets.gcp.market``).

Must not: decide whether a well-formed name exists (the cloud or the data
answers that).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import cast

from markets.errors import InputError

__all__ = ["parse_names"]


def parse_names(value: object, option: str, pattern: re.Pattern[str], what: str) -> tuple[str, ...]:
    """A list option (comma-separated string or sequence) as sorted unique
    names; empty or malformed names raise ``InputError`` naming ``option``."""
    items = value.split(",") if isinstance(value, str) else list(cast(Iterable[object], value))
    names = tuple(sorted({str(v).strip() for v in items if str(v).strip()}))
    bad = [n for n in names if not pattern.match(n)]
    if not names or bad:
        raise InputError(option, None, what, got=", ".join(bad) or value)
    return names
