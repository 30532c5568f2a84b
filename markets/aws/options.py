"""Parsing the AWS market's list options (``--regions``, ``--instance-types``).

Owns: the name patterns, used with ``markets.options.parse_names`` (re-exported
here). A composition root passes lists or comma-separated strings; a name
that cannot be an AWS region or instance type is the user's typo and raises
``InputError`` naming the option.

Must not: call AWS (whether a well-formed name exists is AWS's answer).
"""

from __future__ import annotations

import re

from markets.options import parse_names

__all__ = ["REGION_PATTERN", "TYPE_PATTERN", "parse_names"]

REGION_PATTERN = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+$")  # us-east-1, ap-southeast-2
TYPE_PATTERN = re.compile(r"^[a-z0-9-]+\.[a-z0-9-]+$")  # g5.xlarge, p6-b200.48xlarge
