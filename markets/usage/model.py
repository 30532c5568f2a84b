"""What a bill says was used: hourly instance-hours per workload, and the rest.

Owns: ``HourlyUsage`` (the reader's result) and its reports: ``UsageFile``
(one file read), ``LeftOver`` (lines that are not instance usage, counted and
costed), ``BillCommitment`` (what the bill says of one commitment it names)
and the accessors the what-if needs (``instance_hours``,
``covered_instance_hours``, ``unmapped``).

Must not: read files (``reader``) or convert instance-hours to capacity units
(the caller knows the instance types' units: ``broker.cli._usage``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import numpy.typing as npt
import pandas as pd

__all__ = ["FRAME_COLUMNS", "TIERS", "BillCommitment", "HourlyUsage", "LeftOver", "UsageFile"]

FloatArray = npt.NDArray[np.float64]
TIERS = ("committed", "spot", "on_demand")
# HourlyUsage.frame: one row per (hour, workload, instance type, region, tier,
# commitment type); ``instance_hours`` is the average number of instances that
# ran in that hour (a line spanning several hours is spread over them by overlap);
# ``cost_usd`` is what it cost as the bill amortises it (FOCUS EffectiveCost),
# ``billed_usd`` what was invoiced for it (BilledCost; CUR: the unblended cost).
FRAME_COLUMNS = (
    "hour",
    "workload",
    "instance_type",
    "region",
    "tier",
    "commitment",
    "instance_hours",
    "cost_usd",
    "billed_usd",
)


@dataclass(frozen=True)
class UsageFile:
    """One export file: its format, lines read and usage lines kept."""

    path: str
    format: str
    lines: int
    usage_lines: int


@dataclass(frozen=True)
class LeftOver:
    """Lines of one kind kept out of the demand, with what they add up to."""

    what: str
    lines: int
    hours: float  # instance-hours or hours of the line's own unit; 0 when not time
    cost_usd: float


@dataclass(frozen=True)
class BillCommitment:
    """One commitment as the bill names it (``markets.usage.commitments``).

    ``kind`` is ``None`` when the bill's type says nothing the planner models.
    Instance commitments (reserved, CUD) carry ``instance_type``, ``region``
    and ``count`` (the most instances it covered, or idled, in one hour, or
    the bill's own count); savings plans ``usd_per_hour`` (the commitment per
    hour: its fee lines, else its used and unused cost over the hours seen)
    and ``rates`` (instance type, region, USD per instance-hour charged).
    ``term_years``, ``start``, ``end`` and ``payment`` are ``None`` where the
    bill does not say (FOCUS has no column for them). ``used_*`` / ``unused_*``:
    what ran on it and what it idled over the bill (instance-hours for an
    instance commitment, dollars for every kind); ``spend_based``: a dollar
    commitment planned as ``count`` x ``instance_type`` (a GCP spend-based CUD)."""

    id: str
    provider: str
    kind: str | None
    billed_as: str
    category: str | None
    region: str | None
    instance_type: str | None
    family: str | None
    count: int
    usd_per_hour: float
    rates: tuple[tuple[str, str, float], ...]
    term_years: int | None
    start: datetime | None
    end: datetime | None
    payment: str | None
    first_seen: datetime
    last_seen: datetime
    used_instance_hours: float
    used_cost_usd: float
    unused_instance_hours: float
    unused_cost_usd: float
    covered: tuple[tuple[str, str, float], ...] = ()  # (type, region, instance-hours)
    spend_based: bool = False

    @property
    def hours_seen(self) -> float:
        return (self.last_seen - self.first_seen).total_seconds() / 3600.0

    @property
    def utilisation(self) -> float | None:
        """The share of the commitment the bill shows used: dollars for a
        savings plan, instance-hours of ``count`` over the hours seen else."""
        if self.kind is not None and self.kind.startswith("savings_plan"):
            paid = self.used_cost_usd + self.unused_cost_usd
            return None if paid <= 0 else min(1.0, self.used_cost_usd / paid)
        cap = self.count * self.hours_seen
        return None if cap <= 0 else min(1.0, self.used_instance_hours / cap)

    def to_dict(self) -> dict[str, object]:
        u = self.utilisation
        return {
            "id": self.id,
            "provider": self.provider,
            "kind": self.kind,
            "billed_as": self.billed_as,
            "category": self.category,
            "region": self.region,
            "instance_type": self.instance_type,
            "family": self.family,
            "count": self.count,
            "usd_per_hour": round(self.usd_per_hour, 4),
            "rates": [
                {"instance_type": t, "region": r, "usd_per_instance_hour": round(v, 6)}
                for t, r, v in self.rates
            ],
            "term_years": self.term_years,
            "start": None if self.start is None else self.start.isoformat(),
            "end": None if self.end is None else self.end.isoformat(),
            "payment": self.payment,
            "first_seen": self.first_seen.isoformat(),
            "last_seen": self.last_seen.isoformat(),
            "used_instance_hours": round(self.used_instance_hours, 3),
            "used_cost_usd": round(self.used_cost_usd, 2),
            "unused_instance_hours": round(self.unused_instance_hours, 3),
            "unused_cost_usd": round(self.unused_cost_usd, 2),
            "utilisation": None if u is None else round(u, 4),
            "covered_instance_hours": [
                {"instance_type": t, "region": r, "instance_hours": round(v, 3)}
                for t, r, v in self.covered
            ],
            "spend_based": self.spend_based,
        }


@dataclass(frozen=True, eq=False)
class HourlyUsage:
    """Hourly usage per workload read from billing exports.

    ``start`` is the first hour with usage, ``hours`` the count of hours to the
    last one (inclusive); ``frame`` has ``FRAME_COLUMNS`` (``hour`` tz-aware
    UTC). ``unmatched`` is the workload usage no mapping rule matched went to
    (``None`` without rules: the default mapping maps every line).
    ``teams``: each workload's ``team`` tag (CUR ``user_team``), the one on
    most of its instance-hours, where its lines have one. ``names`` maps each
    workload name to the tag value or instance type it was made from, when
    they differ (``p3-2xlarge`` <- ``p3.2xlarge``)."""

    source: str
    mapped_by: str
    files: tuple[UsageFile, ...]
    start: datetime
    hours: int
    frame: pd.DataFrame = field(repr=False)
    unmatched: str | None = None
    left_over: tuple[LeftOver, ...] = ()
    unused_commitment_hours: Mapping[str, float] = field(default_factory=dict)
    names: Mapping[str, str] = field(default_factory=dict)
    commitments: tuple[BillCommitment, ...] = ()
    teams: Mapping[str, str] = field(default_factory=dict)  # workload -> its team tag

    @property
    def index(self) -> pd.DatetimeIndex:
        return pd.date_range(self.start, periods=self.hours, freq="h", tz="UTC")

    def workloads(self) -> list[str]:
        """Workload names, by instance-hours, most first."""
        by = self.frame.groupby("workload")["instance_hours"].sum()
        return [str(n) for n in by.sort_values(ascending=False, kind="stable").index]

    def instance_types(self, workload: str) -> list[str]:
        """The types a workload ran on, by instance-hours, most first."""
        rows = self.frame[self.frame["workload"] == workload]
        by = rows.groupby("instance_type")["instance_hours"].sum()
        return [str(n) for n in by.sort_values(ascending=False, kind="stable").index]

    def _hourly(self, rows: pd.DataFrame) -> FloatArray:
        out = np.zeros(self.hours)
        if len(rows):
            idx = ((rows["hour"] - pd.Timestamp(self.start)) // pd.Timedelta(hours=1)).to_numpy()
            np.add.at(out, idx.astype(np.int64), rows["instance_hours"].to_numpy(dtype=float))
        return out

    def instance_hours(self, workload: str, instance_type: str) -> FloatArray:
        """Instances of ``instance_type`` the workload ran, per hour from ``start``."""
        f = self.frame
        return self._hourly(f[(f["workload"] == workload) & (f["instance_type"] == instance_type)])

    def covered_instance_hours(self, workload: str, instance_type: str) -> FloatArray:
        """The part of ``instance_hours`` that ran on a commitment (reservation,
        savings plan, committed use) already bought."""
        f = self.frame
        sel = (f["workload"] == workload) & (f["instance_type"] == instance_type)
        return self._hourly(f[sel & (f["tier"] == "committed")])

    def by_tier(self) -> dict[str, float]:
        """Instance-hours per tier over the whole bill."""
        s = self.frame.groupby("tier")["instance_hours"].sum()
        return {t: float(s.get(t, 0.0)) for t in TIERS}

    def by_commitment(self) -> dict[str, float]:
        """Covered instance-hours per commitment type (as the export names it)."""
        rows = self.frame[self.frame["tier"] == "committed"]
        kinds = rows["commitment"].fillna("commitment")
        s = rows.groupby(kinds)["instance_hours"].sum()
        return {str(k): float(v) for k, v in s.items()}

    def unmapped(self) -> dict[str, float]:
        """Instance-hours per instance type that no mapping rule matched."""
        if self.unmatched is None:
            return {}
        rows = self.frame[self.frame["workload"] == self.unmatched]
        s = rows.groupby("instance_type")["instance_hours"].sum()
        return {str(k): float(v) for k, v in s.items()}
