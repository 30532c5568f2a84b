"""Parsing the AWS market's list options (``--regions``, ``--instance-types``).

Owns: ``parse_names`` and the name patterns. A composition root passes lists
or comma-separated strings; a name that cannot be an AWS region or instance
type is the user's typo and raises ``InputError`` naming the option.

Must not: call AWS (whether a well-formed name exists is AWS's answer).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import cast

from markets.errors import InputError

__all__ = ["REGION_PATTERN", "TYPE_PATTERN", "parse_names"]

REGION_PATTERN = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+$")  # us-east-1, ap-southeast-2
TYPE_PATTERN = re.compile(r"^[a-z0-9-]+\.[a-z0-9-]+$")  # g5.xlarge, p6-b200.48xlarge


def parse_names(value: object, option: str, pattern: re.Pattern[str], what: str) -> tuple[str, ...]:
    """A list option as sorted unique names: a comma-separated string or a
    sequence; empty or malformed names raise ``InputError`` for ``option``."""
    items = value.split(",") if isinstance(value, str) else list(cast(Iterable[object], value))
    names = tuple(sorted({str(v).strip() for v in items if str(v).strip()}))
    bad = [n for n in names if not pattern.match(n)]
    if not names or bad:
        raise InputError(option, None, what, got=", ".join(bad) or value)
    return names
