"""The AWS Spot Instance Advisor snapshot: interruption buckets and savings.

Owns: ``load_spot_advisor`` (the advisor's JSON, as mirrored by
alexei-led/spotinfo: ``{"spot_advisor": {region: {os: {type: {"r": bucket,
"s": savings %}}}}, "instance_types": {type: {"cores", "ram_gb", "emr"}},
"ranges": [...]}``), ``INTERRUPTION_BUCKETS`` and ``bucket_hazard_per_hour``
(a bucket as a *prior* hazard).

Must not: estimate hazards from observations (``markets.hazard.posterior`` does,
using this module's prior).

``load_spot_advisor(path).frame`` schema, sorted by (region, os, instance_type):

=================  ========  ================================================
column             dtype     meaning
=================  ========  ================================================
region             str       ``us-east-1``
os                 str       ``Linux`` | ``Windows``
instance_type      str       ``p3.2xlarge``
bucket             int64     0..4, AWS's "frequency of interruption" band
interruption_low   float64   lower bound of the band, share of instances per
                             month (0, 0.05, 0.10, 0.15, 0.20)
interruption_high  float64   upper bound (0.05, 0.10, 0.15, 0.20, 1.0)
savings_fraction   float64   spot savings over on-demand, 0-1 (``s`` / 100)
=================  ========  ================================================

``.instance_types``: ``instance_type``, ``vcpus`` (int64), ``memory_gib``
(float64), ``emr`` (bool).

Bucket meanings (AWS Spot Instance Advisor page): the share
of instances of that type and region that Spot reclaimed over the trailing
month: 0 ``<5 %``, 1 ``5-10 %``, 2 ``10-15 %``, 3 ``15-20 %``, 4 ``>20 %``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from markets.errors import InputError
from markets.files.parsing import (
    DEFAULT_POLICY,
    BadRow,
    BadRowPolicy,
    ParseReport,
    check_report,
    read_text,
    with_report,
)
from markets.hazard.prior import ADVISOR_BUCKET_SHARES, HOURS_PER_MONTH, monthly_share_to_rate
from markets.validation import json_loads

__all__ = [
    "ADVISOR_COLUMNS",
    "HOURS_PER_MONTH",
    "INTERRUPTION_BUCKETS",
    "TOP_BUCKET_REPRESENTATIVE_SHARE",
    "SpotAdvisor",
    "bucket_hazard_per_hour",
    "load_spot_advisor",
]

ADVISOR_COLUMNS = (
    "region",
    "os",
    "instance_type",
    "bucket",
    "interruption_low",
    "interruption_high",
    "savings_fraction",
)

# bucket -> (low, high) share of instances reclaimed per month (AWS Spot
# Instance Advisor legend: <5 %, 5-10 %, 10-15 %, 15-20 %, >20 %).
INTERRUPTION_BUCKETS: dict[int, tuple[float, float]] = {
    0: (0.0, 0.05),
    1: (0.05, 0.10),
    2: (0.10, 0.15),
    3: (0.15, 0.20),
    4: (0.20, 1.0),
}
# The representative share of each band (midpoints; 25 % for the open top
# band, an assumption) and the month-to-hour conversion are the hazard
# prior's (markets.hazard.prior): one source for both.
TOP_BUCKET_REPRESENTATIVE_SHARE = ADVISOR_BUCKET_SHARES[-1]


def bucket_hazard_per_hour(
    bucket: int, *, share: float | None = None, hours_per_month: float = HOURS_PER_MONTH
) -> float:
    """A prior interruption hazard (per instance-hour on spot) for a bucket.

    Conversion (``markets.hazard.prior.monthly_share_to_rate``): if a share
    ``p`` of the instances running through a month is reclaimed at a constant
    rate, ``lambda = -ln(1 - p) / 730``. ``p`` is the bucket's representative
    share (2.5 %, 7.5 %, 12.5 %, 17.5 %, 25 %) unless ``share`` is given.
    Bucket 4 gives about 3.9e-4 per hour (one interruption per ~107 days held).
    Bad input raises ``InputError`` (it comes from files and options).
    """
    if bucket not in INTERRUPTION_BUCKETS:
        raise InputError("advisor bucket", None, "an integer 0-4", got=bucket)
    if share is None:
        share = ADVISOR_BUCKET_SHARES[bucket]
    if not 0.0 <= share < 1.0:
        raise InputError("advisor share", None, "a monthly share in [0, 1)", got=share)
    return monthly_share_to_rate(share, hours_per_month)


@dataclass(frozen=True)
class SpotAdvisor:
    """The advisor snapshot: per (region, os, type) rows and type sizes."""

    frame: pd.DataFrame = field(repr=False)
    instance_types: pd.DataFrame = field(repr=False)
    report: ParseReport
    path: str = ""

    def hazard_prior(self, region: str, instance_type: str, os: str = "Linux") -> float | None:
        """``bucket_hazard_per_hour`` for one pool's type and region, or ``None``."""
        f = self.frame
        hit = f[(f["region"] == region) & (f["instance_type"] == instance_type) & (f["os"] == os)]
        return None if hit.empty else bucket_hazard_per_hour(int(hit["bucket"].iloc[0]))


def load_spot_advisor(path: str | Path, *, policy: BadRowPolicy = DEFAULT_POLICY) -> SpotAdvisor:
    """Load the advisor JSON. A record without a valid bucket (0-4) or savings
    (a number <= 100; negative when spot costs more) is a bad row, located as
    ``spot_advisor.<region>.<os>.<type>``."""
    path = Path(path)
    try:
        doc: object = json_loads(read_text(path), str(path))
    except json.JSONDecodeError as e:
        raise InputError(str(path), f"line {e.lineno}", "valid JSON", got=e.msg) from e
    advisor = doc.get("spot_advisor") if isinstance(doc, dict) else None
    if not isinstance(advisor, dict):
        raise InputError(str(path), "spot_advisor", "an object {region: {os: {type: {r, s}}}}")
    rows: list[tuple[str, str, str, object, object]] = []
    for region, by_os in advisor.items():
        if not isinstance(by_os, dict):
            raise InputError(str(path), f"spot_advisor.{region}", "an object {os: {...}}")
        for os_name, by_type in by_os.items():
            if not isinstance(by_type, dict):
                raise InputError(str(path), f"spot_advisor.{region}.{os_name}", "an object")
            for itype, rec in by_type.items():
                r = rec.get("r") if isinstance(rec, dict) else None
                s = rec.get("s") if isinstance(rec, dict) else None
                rows.append((region, os_name, itype, r, s))
    frame = pd.DataFrame(rows, columns=["region", "os", "instance_type", "r", "s"])
    bucket = pd.to_numeric(frame["r"], errors="coerce")
    savings = pd.to_numeric(frame["s"], errors="coerce")
    # Savings may be negative: spot sometimes costs more than on-demand (the
    # 2025-06-28 snapshot has p5.48xlarge in ca-central-1 at -62 %).
    ok = bucket.isin(list(INTERRUPTION_BUCKETS)).to_numpy() & (
        (savings > -1000) & (savings <= 100)
    ).to_numpy(dtype=bool)
    bad = [
        BadRow(
            f"spot_advisor.{frame['region'].iat[i]}.{frame['os'].iat[i]}.{frame['instance_type'].iat[i]}",
            "expected r in 0-4 and s a savings % <= 100",
            f"r={rows[i][3]} s={rows[i][4]}",
        )
        for i in map(int, np.flatnonzero(~ok))
    ]
    report = ParseReport(str(path)).add(bad, rows_read=len(frame))
    negative = int((savings[ok] < 0).sum())
    if negative:
        report = report.note(f"{negative} rows with negative savings (spot above on-demand)")
    check_report(report, policy)
    frame = frame[ok]
    b = bucket[ok].astype(np.int64)
    lows = np.array([INTERRUPTION_BUCKETS[k][0] for k in range(5)])
    highs = np.array([INTERRUPTION_BUCKETS[k][1] for k in range(5)])
    out = pd.DataFrame(
        {
            "region": frame["region"].astype(str),
            "os": frame["os"].astype(str),
            "instance_type": frame["instance_type"].astype(str),
            "bucket": b,
            "interruption_low": lows[b.to_numpy()],
            "interruption_high": highs[b.to_numpy()],
            "savings_fraction": savings[ok].astype(np.float64) / 100.0,
        }
    ).sort_values(["region", "os", "instance_type"], kind="stable")
    types = _instance_types(path, doc.get("instance_types", {}) if isinstance(doc, dict) else {})
    return SpotAdvisor(
        frame=with_report(out.reset_index(drop=True), report),
        instance_types=types,
        report=report,
        path=str(path),
    )


def _instance_types(path: Path, types: object) -> pd.DataFrame:
    if not isinstance(types, dict):
        raise InputError(str(path), "instance_types", "an object {type: {cores, ram_gb}}")
    names = list(types)
    cores = pd.to_numeric(pd.Series([_get(types[n], "cores") for n in names]), errors="coerce")
    ram = pd.to_numeric(pd.Series([_get(types[n], "ram_gb") for n in names]), errors="coerce")
    bad = np.flatnonzero(~((cores > 0) & (ram > 0)).to_numpy(dtype=bool))
    if len(bad):
        n = names[int(bad[0])]
        raise InputError(str(path), f"instance_types.{n}", "cores > 0 and ram_gb > 0", got=types[n])
    return (
        pd.DataFrame(
            {
                "instance_type": pd.Series(names, dtype=str),
                "vcpus": cores.astype(np.int64),
                "memory_gib": ram.astype(np.float64),
                "emr": pd.Series([bool(_get(types[n], "emr")) for n in names], dtype=bool),
            }
        )
        .sort_values("instance_type")
        .reset_index(drop=True)
    )


def _get(rec: object, key: str) -> object:
    return rec.get(key) if isinstance(rec, dict) else None
