"""Commitments as values: terms, payment options, and what is already owned.

Owns: ``TERM_HOURS`` (the hours a 1- or 3-year term bills), ``PaymentOption``,
``CommitmentKind``, ``OwnedCommitment`` (one reservation, savings plan or
committed-use discount already bought, with its expiry) and ``load_owned`` (a
YAML or CSV file of them). The account readers (``markets.aws.commitments``,
``markets.gcp.commitments``) return the same value.

Must not: price anything, decide what to buy (``broker.planning.optimizer``
does) or call a cloud. Bad input is an ``InputError`` naming the file, the row
and the field: ``owned.csv: row 3: end: expected an ISO time after start``.

Example file (YAML; a CSV has the same column names)::

    commitments:
      - id: ri-0a1b
        provider: aws
        kind: reserved            # reserved | savings_plan_compute | savings_plan_ec2 | cud
        region: us-east-1
        instance_type: p4d.24xlarge
        count: 2
        start: 2026-01-01T00:00:00Z
        end: 2027-01-01T00:00:00Z
        payment: no_upfront       # no_upfront | partial_upfront | all_upfront
      - id: sp-77
        provider: aws
        kind: savings_plan_compute
        usd_per_hour: 40.0        # a savings plan commits dollars per hour
        start: 2026-03-01T00:00:00Z
        end: 2029-03-01T00:00:00Z
        payment: all_upfront
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import TypeVar

import yaml

from markets.clock import ensure_utc
from markets.errors import InputError
from markets.model import Provider

__all__ = [
    "HOURS_PER_MONTH",
    "MAX_OWNED_FILE_BYTES",
    "TERM_HOURS",
    "CommitmentKind",
    "OwnedCommitment",
    "PaymentOption",
    "load_owned",
    "parse_owned",
    "term_hours",
]

# A term bills every hour of 365 days a year (AWS: "1 year = 31,536,000
# seconds", the RI and Savings Plans FAQ; GCP CUDs bill monthly for 1 or 3
# years): 8,760 and 26,280 hours.
TERM_HOURS: Mapping[int, int] = MappingProxyType({1: 8760, 3: 26280})
# Monthly figures use the average month of a 365-day year (8,760 / 12).
HOURS_PER_MONTH = 730.0
MAX_OWNED_FILE_BYTES = 4 * 1024 * 1024
_E = TypeVar("_E", bound=StrEnum)


def term_hours(term_years: int) -> int:
    """Hours billed by a ``term_years`` (1 or 3) commitment."""
    try:
        return TERM_HOURS[term_years]
    except KeyError:
        raise InputError("term_years", None, "1 or 3", got=term_years) from None


class PaymentOption(StrEnum):
    """How a term is paid: all monthly, part upfront, or all upfront (AWS RIs
    and Savings Plans offer the three; GCP CUDs bill monthly only)."""

    NO_UPFRONT = "no_upfront"
    PARTIAL_UPFRONT = "partial_upfront"
    ALL_UPFRONT = "all_upfront"


class CommitmentKind(StrEnum):
    """``reserved``: EC2 reserved instances (a count of one type in one
    region). ``savings_plan_compute``: dollars per hour covering any family
    and region. ``savings_plan_ec2``: dollars per hour covering one family in
    one region. ``cud``: a Compute Engine committed-use discount (a count of
    one machine type's resources in one region)."""

    RESERVED = "reserved"
    SAVINGS_PLAN_COMPUTE = "savings_plan_compute"
    SAVINGS_PLAN_EC2 = "savings_plan_ec2"
    CUD = "cud"

    @property
    def is_savings_plan(self) -> bool:
        return self in (CommitmentKind.SAVINGS_PLAN_COMPUTE, CommitmentKind.SAVINGS_PLAN_EC2)


@dataclass(frozen=True, slots=True)
class OwnedCommitment:
    """One commitment already bought. Instance commitments (``reserved``,
    ``cud``) carry ``instance_type`` and ``count``; savings plans carry
    ``usd_per_hour`` (and ``family`` and ``region`` for an EC2 Instance SP)."""

    id: str
    provider: Provider
    kind: CommitmentKind
    start: datetime
    end: datetime
    payment: PaymentOption = PaymentOption.NO_UPFRONT
    region: str | None = None
    instance_type: str | None = None
    family: str | None = None
    count: int = 0
    usd_per_hour: float = 0.0
    # A savings plan's own rates read from the account (instance type,
    # region, USD per instance-hour); empty: the catalog's rule applies.
    rates: tuple[tuple[str, str, float], ...] = ()

    @property
    def group(self) -> str | None:
        """The optimizer's commitment group (``provider/region/type``) of an
        instance commitment; ``None`` for a savings plan."""
        if self.kind.is_savings_plan or self.region is None or self.instance_type is None:
            return None
        return f"{self.provider.value}/{self.region}/{self.instance_type}"

    def active_at(self, at: datetime) -> bool:
        return self.start <= at < self.end

    def hours_left(self, at: datetime) -> float:
        """Hours of the term still to run at ``at`` (0 once expired)."""
        return max(0.0, (self.end - max(at, self.start)).total_seconds() / 3600.0)


_FIELDS = (
    "id",
    "provider",
    "kind",
    "region",
    "instance_type",
    "family",
    "count",
    "usd_per_hour",
    "start",
    "end",
    "payment",
)


class _Row:
    """One input row and where it came from, for errors naming both."""

    def __init__(self, source: str, index: int, data: Mapping[str, object]) -> None:
        self.source = source
        self.where = f"row {index}"
        self.data = data

    def fail(self, name: str, expected: str) -> InputError:
        return InputError(self.source, f"{self.where}: {name}", expected, got=self.data.get(name))

    def text(self, name: str, *, required: bool = False) -> str | None:
        raw = self.data.get(name)
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            if required:
                raise self.fail(name, "a value")
            return None
        if not isinstance(raw, str | int | float) or isinstance(raw, bool):
            raise self.fail(name, "a text value")
        return str(raw).strip()

    def choice(self, name: str, enum: type[_E], default: _E | None = None) -> _E:
        raw = self.text(name, required=default is None)
        if raw is None:
            assert default is not None
            return default
        try:
            return enum(raw.lower())
        except ValueError:
            raise self.fail(name, "one of " + ", ".join(e.value for e in enum)) from None

    def time(self, name: str) -> datetime:
        raw = self.data.get(name)
        if isinstance(raw, datetime):
            return ensure_utc(raw)
        text = self.text(name, required=True)
        assert text is not None
        try:
            return ensure_utc(datetime.fromisoformat(text.replace("Z", "+00:00")))
        except ValueError:
            raise self.fail(name, "an ISO 8601 time like 2026-01-01T00:00:00Z") from None

    def number(self, name: str, *, integer: bool) -> float:
        raw = self.data.get(name)
        if raw is None or raw == "":
            return 0.0
        try:
            value = float(str(raw)) if not isinstance(raw, int | float) else float(raw)
        except ValueError:
            value = math.nan
        ok = math.isfinite(value) and value >= 0 and not isinstance(raw, bool)
        if ok and integer:
            ok = value == int(value) and value <= 1_000_000
        if not ok or value > 1e9:
            raise self.fail(name, "a whole number >= 0" if integer else "a number >= 0")
        return value


def _owned(row: _Row) -> OwnedCommitment:
    unknown = sorted(set(row.data) - set(_FIELDS))
    if unknown:
        raise InputError(row.source, f"{row.where}: {unknown[0]}", "one of " + ", ".join(_FIELDS))
    kind = row.choice("kind", CommitmentKind)
    provider = row.choice("provider", Provider)
    start, end = row.time("start"), row.time("end")
    if end <= start:
        raise row.fail("end", "a time after start")
    count = int(row.number("count", integer=True))
    usd = row.number("usd_per_hour", integer=False)
    region = row.text("region")
    itype = row.text("instance_type")
    family = row.text("family")
    if (provider is Provider.GCP) != (kind is CommitmentKind.CUD):
        raise row.fail("kind", "cud for gcp; reserved or a savings plan for aws")
    if kind.is_savings_plan:
        if usd <= 0:
            raise row.fail("usd_per_hour", "the plan's commitment in dollars per hour, > 0")
        if kind is CommitmentKind.SAVINGS_PLAN_EC2 and (region is None or family is None):
            raise row.fail("family" if region else "region", "a family and a region (EC2 SP)")
    else:
        if itype is None:
            raise row.fail("instance_type", "the instance type committed")
        if region is None:
            raise row.fail("region", "the region committed")
        if count <= 0:
            raise row.fail("count", "the number of instances committed, > 0")
    return OwnedCommitment(
        id=row.text("id", required=True) or "",
        provider=provider,
        kind=kind,
        start=start,
        end=end,
        payment=row.choice("payment", PaymentOption, PaymentOption.NO_UPFRONT),
        region=region,
        instance_type=itype,
        family=family,
        count=count,
        usd_per_hour=usd,
    )


def parse_owned(rows: Sequence[Mapping[str, object]], source: str) -> tuple[OwnedCommitment, ...]:
    """Owned commitments from parsed rows (numbered from 1 in errors)."""
    out = [_owned(_Row(source, i, r)) for i, r in enumerate(rows, start=1)]
    seen: set[str] = set()
    for i, c in enumerate(out, start=1):
        if c.id in seen:
            raise InputError(source, f"row {i}: id", "ids listed once", got=c.id)
        seen.add(c.id)
    return tuple(out)


def load_owned(path: str | Path) -> tuple[OwnedCommitment, ...]:
    """Read ``path`` (``.csv``, else YAML: a list, or a mapping with a
    ``commitments`` list)."""
    p = Path(path)
    source = str(path)
    try:
        if p.stat().st_size > MAX_OWNED_FILE_BYTES:
            raise InputError(source, None, f"a file under {MAX_OWNED_FILE_BYTES} bytes")
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(source, None, "a readable UTF-8 file", got=type(e).__name__) from e
    if p.suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        if reader.fieldnames is None:
            raise InputError(source, "header", "a header row naming " + ", ".join(_FIELDS))
        rows: list[Mapping[str, object]] = [
            {k: v for k, v in r.items() if k is not None and v not in (None, "")} for r in reader
        ]
        return parse_owned(rows, source)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        line = getattr(getattr(e, "problem_mark", None), "line", None)
        field = None if line is None else f"line {line + 1}"
        raise InputError(source, field, "valid YAML") from e
    if isinstance(data, dict):
        data = data.get("commitments")
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise InputError(source, "commitments", "a list of commitments (mappings)")
    return parse_owned([{str(k): v for k, v in r.items()} for r in data], source)
