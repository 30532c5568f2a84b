"""Mapping rules: which workload a bill's usage line belongs to.

Owns: ``MappingRules`` (read from YAML by ``load_rules``; any problem is one
``InputError`` naming the file and the field path), ``workload_name`` (a tag
value or instance type made a valid workload name) and ``rules_sql``, which
turns the rules into one SQL ``CASE`` over the columns ``markets.usage.formats``
exposes, with its parameters bound (never pasted into the SQL).

Must not: read bills or know their formats (``formats``), or decide anything.

A file looks like::

    rules:                       # first match wins
      - workload: chat-api
        tags: {team: chat}       # every condition of a rule must hold
      - workload: training
        account: "123456789012"
      - workload: batch
        instance_type: "p3.*"    # shell-style globs
        region: "us-east-*"
    unmatched: unmapped          # optional; the workload for the rest

Conditions: ``tags`` (key -> value glob; a key ``team`` also finds the
CUR 2.0 spelling ``user_team`` and ``user:team``), ``account`` (FOCUS
``SubAccountId``, CUR ``line_item_usage_account_id``), ``project`` (FOCUS
``SubAccountId`` or an ``x_`` project column), ``instance_type``, ``region``
and ``service``. A rule may also say what its workload is, over what the
bill's shape infers: ``class`` (serving, training, batch), ``deadline_hours``
(a job's, from the replayed window's start), ``team`` (its showback; over the
lines' ``team`` tag) and ``regions`` (where it may run; default: the bill's).
Usage no rule matches goes to ``unmatched`` and is reported
as unmapped: it is never dropped.

Without a rules file: the ``workload`` tag if a line has one, else one
workload per instance type.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, ValidationError, field_validator

from markets.errors import InputError
from markets.validation import StrictModel, input_error_from, read_yaml

__all__ = [
    "DEFAULT_TAG",
    "TEAM_TAG",
    "UNMAPPED",
    "MappingRules",
    "Rule",
    "load_rules",
    "rules_sql",
    "tag_sql",
    "workload_name",
]

UNMAPPED = "unmapped"
DEFAULT_TAG = "workload"  # the tag the default mapping reads
TEAM_TAG = "team"  # the tag showback reads (a workload's team)
MAX_RULES = 1000
MAX_FILE_BYTES = 1024 * 1024
# The workload names policies.workloads.spec accepts.
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
_TAG_KEY_RE = re.compile(r"^[A-Za-z0-9_.:/=+@ -]{1,128}$")  # AWS's tag key characters

Glob = Annotated[str, Field(min_length=1, max_length=256)]
_REGION = r"^[a-z0-9][a-z0-9-]{1,62}$"


class Rule(StrictModel):
    """One rule: a workload and the conditions a line must meet (all of them)."""

    workload: str
    tags: dict[str, Glob] = Field(default_factory=dict)
    account: Glob | None = None
    project: Glob | None = None
    instance_type: Glob | None = None
    region: Glob | None = None
    service: Glob | None = None
    # what the rule says of its workload, over what the bill's shape infers
    team: Annotated[str, Field(min_length=1, max_length=128)] | None = None
    workload_class: Literal["serving", "training", "batch"] | None = Field(
        default=None, alias="class"
    )
    deadline_hours: Annotated[float, Field(gt=0, le=1e6)] | None = None
    regions: (
        Annotated[list[Annotated[str, Field(pattern=_REGION)]], Field(min_length=1, max_length=500)]
        | None
    ) = None

    @field_validator("workload")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME_RE.match(v):
            raise ValueError("a workload name: lower-case letters, digits, '-' or '_'")
        return v

    @field_validator("tags")
    @classmethod
    def _keys(cls, v: dict[str, str]) -> dict[str, str]:
        for k in v:
            if not _TAG_KEY_RE.match(k):
                raise ValueError(f"tag keys of letters, digits and _.:/=+@- (got {k!r})")
        return v


class MappingRules(StrictModel):
    rules: Annotated[list[Rule], Field(min_length=1, max_length=MAX_RULES)]
    unmatched: str = UNMAPPED

    @field_validator("unmatched")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME_RE.match(v):
            raise ValueError("a workload name: lower-case letters, digits, '-' or '_'")
        return v


def load_rules(path: str | Path) -> MappingRules:
    source = str(path)
    try:
        if Path(path).stat().st_size > MAX_FILE_BYTES:
            raise InputError(source, None, f"a rules file of at most {MAX_FILE_BYTES:,} bytes")
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(source, None, f"a readable UTF-8 YAML file ({e})") from e
    data = read_yaml(text, source)
    if not isinstance(data, dict):
        raise InputError(source, None, "a mapping with a 'rules' list", got=type(data).__name__)
    try:
        return MappingRules.model_validate(data)
    except ValidationError as e:
        raise input_error_from(source, e) from e


def workload_name(text: str) -> str:
    """``text`` (a tag value, ``p3.2xlarge``) as a workload name (``p3-2xlarge``)."""
    name = re.sub(r"[^a-z0-9_-]+", "-", text.strip().lower()).strip("-_")[:63]
    return name or UNMAPPED


def tag_sql(tags: str, key: str, params: list[object]) -> str:
    """The value of tag ``key`` in the JSON object ``tags`` (an SQL expression),
    under its own name or CUR 2.0's ``user_`` / ``user:`` spellings."""
    # One JSON parse for the three spellings (a list of paths), not three.
    params.append(['$."' + k.replace('"', "") + '"' for k in (key, f"user_{key}", f"user:{key}")])
    return f"list_filter(json_extract_string({tags}, ?::VARCHAR[]), lambda v: v IS NOT NULL)[1]"


def rules_sql(rules: MappingRules | None, cols: dict[str, str], params: list[object]) -> str:
    """One SQL expression giving each line's workload (its parameters appended
    to ``params`` in order). ``cols``: the role -> SQL expression of
    ``formats.Columns`` (``tags``, ``account``, ``project``, ``instance_type``,
    ``region``, ``service``); a role the export lacks is ``NULL``."""
    if rules is None:
        tag = tag_sql(cols["tags"], DEFAULT_TAG, params)
        return f"coalesce(nullif({tag}, ''), {cols['instance_type']})"
    arms = []
    for rule in rules.rules:
        conds = []
        for key, glob in rule.tags.items():
            conds.append(f"{tag_sql(cols['tags'], key, params)} GLOB ?")
            params.append(glob)
        for role in ("account", "project", "instance_type", "region", "service"):
            glob = getattr(rule, role)
            if glob is not None:
                conds.append(f"{cols[role]} GLOB ?")
                params.append(glob)
        params.append(rule.workload)
        arms.append(f"WHEN {' AND '.join(conds) or 'TRUE'} THEN ?")
    params.append(rules.unmatched)
    return f"CASE {' '.join(arms)} ELSE ? END"
