"""Find and load every dataset in a directory of public spot and price files.

Owns: ``discover(root) -> DataInventory``: walks ``root``, recognises each
file by its *content* (JSON keys, CSV header), not by its folder, loads it with
the matching loader, and summarises per dataset the files, row counts, bad
rows, time span and the regions/zones/instance types found. Missing datasets
are fine (their frames are empty); unknown files (README, LICENSE) are listed
as skipped; several files of one kind are concatenated.

Must not: build market snapshots (the replay market does, from the frames
here), or copy data anywhere.

Recognised files:

=====================  =====================================================
dataset                recognised by
=====================  =====================================================
spot_traces            ``.json`` with ``"gap_seconds"`` (``markets.files.traces``)
aws_spot_prices        CSV header ``Timestamp,AvailabilityZone,InstanceType,
                       SpotPrice``, or JSON with ``"SpotPriceHistory"`` /
                       ``"SpotPrice"`` (``markets.files.prices``)
price_history          CSV/Parquet with ``PRICE_COLUMNS`` (``market fetch``)
gcp_prices             CSV header with ``machine_type,region,hour``
gcp_machine_types      CSV header with ``machine_type,cpu,ram``
spot_advisor           JSON with ``"spot_advisor"`` (``markets.files.advisor``)
fleet_traces           header-less CSV of ``ms,add|remove,node``
=====================  =====================================================

``aws_spot_prices`` in the inventory holds both AWS files and price
histories (same schema), de-duplicated and sorted by (zone, instance_type,
timestamp).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TypedDict

import pandas as pd

from markets.clock import Clock, SystemClock
from markets.errors import InputError
from markets.files.advisor import SpotAdvisor, load_spot_advisor
from markets.files.fleet_traces import load_fleet_trace
from markets.files.parsing import ParseReport, get_report, open_text
from markets.files.prices import (
    GCP_PRICE_COLUMNS,
    PRICE_COLUMNS,
    load_aws_spot_prices,
    load_gcp_machine_types,
    load_gcp_prices,
    parquet_available,
    read_price_history,
)
from markets.files.traces import SpotTrace, load_spot_trace

__all__ = [
    "DATASETS",
    "DataInventory",
    "DatasetJson",
    "DatasetSummary",
    "FileSummary",
    "InventoryJson",
    "classify",
    "discover",
]

DATASETS = (
    "spot_traces",
    "aws_spot_prices",
    "price_history",
    "gcp_prices",
    "gcp_machine_types",
    "spot_advisor",
    "fleet_traces",
)
_FLEET_LINE = re.compile(r"^\s*\d+\s*,\s*(add|remove)\s*,")
_HEAD_BYTES = 4096


class DatasetJson(TypedDict):
    """``DatasetSummary.to_dict()``: a dataset in ``market show --json``."""

    name: str
    files: list[str]
    rows: int
    rows_bad: int
    start: str | None
    end: str | None
    regions: list[str]
    zones: list[str]
    instance_types: list[str]


class InventoryJson(TypedDict):
    root: str
    load_seconds: float
    datasets: list[DatasetJson]
    skipped: list[str]
    errors: list[str]


@dataclass(frozen=True)
class FileSummary:
    """One loaded file: rows, bad rows, span and what it covers."""

    path: str
    dataset: str
    rows: int
    rows_bad: int
    start: datetime | None
    end: datetime | None
    regions: tuple[str, ...] = ()
    zones: tuple[str, ...] = ()
    instance_types: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class DatasetSummary:
    """All files of one dataset, summed."""

    name: str
    files: tuple[FileSummary, ...]

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.files)

    @property
    def rows_bad(self) -> int:
        return sum(f.rows_bad for f in self.files)

    @property
    def start(self) -> datetime | None:
        starts = [f.start for f in self.files if f.start is not None]
        return min(starts) if starts else None

    @property
    def end(self) -> datetime | None:
        ends = [f.end for f in self.files if f.end is not None]
        return max(ends) if ends else None

    def _union(self, of: Callable[[FileSummary], tuple[str, ...]]) -> tuple[str, ...]:
        return tuple(sorted({v for f in self.files for v in of(f)}))

    @property
    def regions(self) -> tuple[str, ...]:
        return self._union(lambda f: f.regions)

    @property
    def zones(self) -> tuple[str, ...]:
        return self._union(lambda f: f.zones)

    @property
    def instance_types(self) -> tuple[str, ...]:
        return self._union(lambda f: f.instance_types)

    def to_dict(self) -> DatasetJson:
        return {
            "name": self.name,
            "files": [f.path for f in self.files],
            "rows": self.rows,
            "rows_bad": self.rows_bad,
            "start": self.start.isoformat() if self.start else None,
            "end": self.end.isoformat() if self.end else None,
            "regions": list(self.regions),
            "zones": list(self.zones),
            "instance_types": list(self.instance_types),
        }


@dataclass(frozen=True, eq=False)
class DataInventory:
    """Everything ``discover`` found and loaded under ``root``.

    Frames are empty (with their schema's columns) when a dataset is absent.
    ``errors`` lists files that failed to load when ``strict=False``.
    """

    root: str
    datasets: tuple[DatasetSummary, ...]
    spot_traces: tuple[SpotTrace, ...]
    aws_spot_prices: pd.DataFrame = field(repr=False)
    gcp_prices: pd.DataFrame = field(repr=False)
    gcp_machine_types: pd.DataFrame = field(repr=False)
    advisor: SpotAdvisor | None = field(repr=False)
    fleet_traces: dict[str, pd.DataFrame] = field(repr=False)
    skipped: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    load_seconds: float = 0.0

    def dataset(self, name: str) -> DatasetSummary | None:
        return next((d for d in self.datasets if d.name == name), None)

    def to_dict(self) -> InventoryJson:
        """A JSON-ready summary (what ``market show --json`` reports)."""
        return {
            "root": self.root,
            "load_seconds": round(self.load_seconds, 3),
            "datasets": [d.to_dict() for d in self.datasets],
            "skipped": list(self.skipped),
            "errors": list(self.errors),
        }


def classify(path: Path) -> str | None:
    """The dataset a file holds, judged by its first bytes; ``None`` if unknown."""
    name = path.name.lower()
    if name.endswith(".parquet"):
        return "price_history" if parquet_available() else None
    if not name.endswith((".json", ".json.gz", ".jsonl", ".jsonl.gz", ".csv", ".csv.gz", ".txt")):
        return None
    try:
        with open_text(path) as fh:
            head = fh.read(_HEAD_BYTES)
    except (UnicodeDecodeError, OSError, EOFError, InputError):
        return None
    stripped = head.lstrip()
    if stripped.startswith(("{", "[")):
        if '"gap_seconds"' in head:
            return "spot_traces"
        if '"SpotPriceHistory"' in head or '"SpotPrice"' in head:
            return "aws_spot_prices"
        if '"spot_advisor"' in head or ('"instance_types"' in head and '"emr"' in head):
            return "spot_advisor"
        return None
    first = stripped.splitlines()[0] if stripped else ""
    cols = {c.strip().lstrip("\ufeff") for c in first.split(",")}
    if {"Timestamp", "AvailabilityZone", "InstanceType", "SpotPrice"} <= cols:
        return "aws_spot_prices"
    if set(PRICE_COLUMNS) <= cols:
        return "price_history"
    if {"machine_type", "region", "hour"} <= cols:
        return "gcp_prices"
    if {"machine_type", "cpu", "ram"} <= cols:
        return "gcp_machine_types"
    if _FLEET_LINE.match(first):
        return "fleet_traces"
    return None


def discover(root: str | Path, *, strict: bool = True, clock: Clock | None = None) -> DataInventory:
    """Load every recognised dataset under ``root`` (see the module docstring).

    ``strict``: a recognised file that fails to load raises its ``InputError``;
    with ``strict=False`` the error is recorded in ``errors`` and the file left
    out."""
    clock = clock or SystemClock()
    t0 = clock.monotonic()
    root = Path(root)
    if not root.exists():
        raise InputError(str(root), None, "an existing data directory or file")
    paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    paths = [
        p for p in paths if not any(part.startswith(".") for part in p.relative_to(root).parts)
    ]
    files: dict[str, list[FileSummary]] = {name: [] for name in DATASETS}
    traces: list[SpotTrace] = []
    frames: dict[str, list[pd.DataFrame]] = {"aws": [], "gcp": [], "types": []}
    fleet: dict[str, pd.DataFrame] = {}
    advisor: SpotAdvisor | None = None
    skipped: list[str] = []
    errors: list[str] = []
    for path in paths:
        kind = classify(path)
        if kind is None:
            skipped.append(str(path))
            continue
        try:
            summary, loaded = _load(path, kind)
        except InputError as e:
            if strict:
                raise
            errors.append(str(e))
            continue
        files[kind].append(summary)
        if isinstance(loaded, SpotTrace):
            traces.append(loaded)
        elif isinstance(loaded, SpotAdvisor):
            if advisor is not None and not strict:
                errors.append(f"{path}: a second advisor snapshot, ignored")
                continue
            advisor = loaded
        elif kind in ("aws_spot_prices", "price_history"):
            frames["aws"].append(loaded)
        elif kind == "gcp_prices":
            frames["gcp"].append(loaded)
        elif kind == "gcp_machine_types":
            frames["types"].append(loaded)
        else:
            fleet[_fleet_name(path, fleet)] = loaded
    return DataInventory(
        root=str(root),
        datasets=tuple(DatasetSummary(n, tuple(fs)) for n, fs in files.items() if fs),
        spot_traces=tuple(traces),
        aws_spot_prices=_concat(
            frames["aws"], PRICE_COLUMNS, ["zone", "instance_type", "timestamp"]
        ),
        gcp_prices=_concat(
            frames["gcp"], GCP_PRICE_COLUMNS, ["region", "machine_type", "valid_from"]
        ),
        gcp_machine_types=_concat(
            frames["types"],
            ("machine_type", "family", "vcpus", "memory_gib", "gpu_model", "gpus"),
            ["machine_type"],
        ),
        advisor=advisor,
        fleet_traces=fleet,
        skipped=tuple(skipped),
        errors=tuple(errors),
        load_seconds=clock.monotonic() - t0,
    )


def _fleet_name(path: Path, taken: dict[str, pd.DataFrame]) -> str:
    name = path.name.split(".")[0].removesuffix("-trace")
    return name if name not in taken else str(path)


def _concat(parts: list[pd.DataFrame], columns: tuple[str, ...], sort: list[str]) -> pd.DataFrame:
    if not parts:
        return pd.DataFrame({c: pd.Series([], dtype=object) for c in columns})
    if len(parts) == 1:
        return parts[0]
    df = pd.concat(parts, ignore_index=True).drop_duplicates()
    return df.sort_values(sort, kind="stable").reset_index(drop=True)


def _load(path: Path, kind: str) -> tuple[FileSummary, SpotTrace | SpotAdvisor | pd.DataFrame]:
    """Load one file with its loader and summarise it."""
    if kind == "spot_traces":
        tr = load_spot_trace(path)
        return (
            FileSummary(
                str(path),
                kind,
                tr.ticks,
                0,
                tr.start,
                tr.end,
                (tr.region,),
                (tr.zone,),
                (tr.instance_type,),
            ),
            tr,
        )
    if kind == "spot_advisor":
        adv = load_spot_advisor(path)
        f = adv.frame
        return (
            FileSummary(
                str(path),
                kind,
                adv.report.rows_ok,
                adv.report.rows_bad,
                None,
                None,
                _uniq(f["region"]),
                (),
                _uniq(f["instance_type"]),
                adv.report.notes,
            ),
            adv,
        )
    if kind == "aws_spot_prices":
        df = load_aws_spot_prices(path)
        return _frame_summary(path, kind, df, "timestamp", "zone", "instance_type"), df
    if kind == "price_history":
        df = read_price_history(path)
        return _frame_summary(path, kind, df, "timestamp", "zone", "instance_type"), df
    if kind == "gcp_prices":
        df = load_gcp_prices(path)
        return _frame_summary(path, kind, df, "valid_from", None, "machine_type"), df
    if kind == "gcp_machine_types":
        df = load_gcp_machine_types(path)
        return _frame_summary(path, kind, df, None, None, "machine_type"), df
    df = load_fleet_trace(path)
    return _frame_summary(path, kind, df, None, None, None), df


def _frame_summary(
    path: Path,
    kind: str,
    df: pd.DataFrame,
    time_col: str | None,
    zone_col: str | None,
    type_col: str | None,
) -> FileSummary:
    report = get_report(df) or ParseReport(str(path), rows_read=len(df))
    start = end = None
    if time_col and len(df):
        start = df[time_col].min().to_pydatetime()
        end = df[time_col].max().to_pydatetime()
    return FileSummary(
        str(path),
        kind,
        len(df),
        report.rows_bad,
        start,
        end,
        _uniq(df["region"]) if "region" in df.columns else (),
        _uniq(df[zone_col]) if zone_col else (),
        _uniq(df[type_col]) if type_col else (),
        report.notes,
    )


def _uniq(s: pd.Series[str]) -> tuple[str, ...]:
    return tuple(sorted(map(str, pd.unique(s))))
