"""Demand inputs: the hourly serving curves the optimizer plans against.

Owns: reading hourly serving demand from a CSV or YAML file (``load_demand``)
with errors that name the file, the line and the column; building curves from
the workloads' inline shapes (``DemandSet.from_shapes``); ``DemandSet.forecast``
hands each curve's history to ``broker.planning.forecast`` (re-exported here).

Training and batch demand is not here: it is the workload's own spec
(``unit_hours``, ``deadline_hours``, gang sizes in ``policies.workloads.spec``).

Must not: decide anything, know prices or markets, or read the clock (the
caller says where the horizon starts).

File formats (units are reference capacity units, see ``policies.workloads.spec``):

- CSV, wide: ``hour,<workload>,<workload>...``, one row per UTC hour.
- CSV, long: ``hour,workload,units``, one row per workload and hour.
- YAML: ``start`` (ISO time), optional ``hours``, and ``workloads``: per
  serving workload a list of hourly values from ``start`` or a shape
  (``base_units``, ``peak_units``, ... as in the workloads file).
"""

from __future__ import annotations

import csv
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import ValidationError

from broker.planning.forecast import HOUR, Forecast, forecast_hour_of_week, hourly_index
from markets.errors import InputError
from markets.numbers import MAX_HOURS, MAX_UNITS, Bounded, NumberError
from markets.validation import input_error_from, read_yaml
from policies.workloads.spec import DemandShape, WorkloadClass, WorkloadSet

__all__ = ["DemandSet", "Forecast", "example_demand_path", "forecast_hour_of_week", "load_demand"]

DEFAULT_NOISE = 0.03  # 3 % hour-to-hour jitter on shape curves: "a little noise"
# Units of one workload in one hour, and hours of one file (markets.numbers):
# memory scales with the hours (YAML ``hours: 1e9`` asked for 7.45 GiB).
UNITS = Bounded(ge=0, le=MAX_UNITS)
HOURS = Bounded(ge=1, le=MAX_HOURS, integer=True, unit="hours")
# Hours a demand file may name: pandas' nanosecond times end in 2262.
FIRST_HOUR = pd.Timestamp("2000-01-01", tz="UTC")
LAST_HOUR = pd.Timestamp("2200-01-01", tz="UTC")
# A demand file of 10 years x 100 workloads in CSV is ~100 MB.
MAX_FILE_BYTES = 256 * 1024 * 1024


def _from_shape(
    shape: DemandShape, index: pd.DatetimeIndex, name: str, seed: int, noise: float
) -> pd.Series:
    """The shape's curve on ``index`` times (1 + noise * N(0, 1)), seeded per name."""
    hod = index.hour.to_numpy()
    s, e = shape.peak_start_hour, shape.peak_end_hour
    in_peak = (hod >= s) & (hod < e) if s < e else (hod >= s) | (hod < e)
    weekend = index.day_of_week.to_numpy() >= 5
    extra = (shape.peak_units - shape.base_units) * np.where(weekend, shape.weekend_factor, 1.0)
    curve = np.where(in_peak, shape.base_units + extra, shape.base_units)
    # Per-name stream: adding a workload leaves the other curves unchanged.
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    values = np.clip(curve * (1.0 + noise * rng.standard_normal(len(curve))), 0.0, None)
    return pd.Series(values, index=index, name=name, dtype=float)


@dataclass(frozen=True, eq=False)
class DemandSet:
    """Hourly serving demand per workload, all on one hourly UTC index.

    ``serving[name]`` is a float Series in reference units indexed by ``hour``
    (a tz-aware UTC ``DatetimeIndex`` at hourly frequency).
    """

    serving: Mapping[str, pd.Series]
    index: pd.DatetimeIndex
    source: str = "<shapes>"

    @classmethod
    def from_shapes(
        cls,
        workloads: WorkloadSet,
        start: datetime | pd.Timestamp,
        hours: int,
        seed: int = 0,
        *,
        noise: float = DEFAULT_NOISE,
        live_elsewhere: bool = False,
    ) -> DemandSet:
        """Curves from every serving workload's inline shape, with seeded noise
        (each workload's stream depends only on ``seed`` and its name).
        ``live_elsewhere``: the caller reads live demand (``demand_metric``,
        ``broker.planning.autoscale``), so those workloads are left out;
        without it they are an error (a live metric has no history here)."""
        index = hourly_index(start, hours)
        out: dict[str, pd.Series] = {}
        for w in workloads.of_class(WorkloadClass.SERVING):
            if w.demand_metric is not None and live_elsewhere:
                continue
            if w.demand is None:
                live = " (a demand_metric is read by the daemon only)" if w.demand_metric else ""
                raise InputError(
                    "workloads",
                    f"{w.name}.demand",
                    f"an inline demand shape or a demand file{live}",
                )
            out[w.name] = _from_shape(w.demand, index, w.name, seed, noise)
        return cls(serving=out, index=index)

    def names(self) -> list[str]:
        return list(self.serving)

    def series(self, name: str) -> pd.Series:
        try:
            return self.serving[name]
        except KeyError:
            raise KeyError(f"no serving demand for {name!r} (have: {self.names()})") from None

    def frame(self) -> pd.DataFrame:
        """Hours x workloads, reference units."""
        return pd.DataFrame(dict(self.serving), index=self.index)

    @property
    def start(self) -> pd.Timestamp:
        return self.index[0]

    @property
    def hours(self) -> int:
        return len(self.index)

    def window(self, start: datetime | pd.Timestamp, hours: int) -> DemandSet:
        """The hours ``[start, start + hours)``; an ``InputError`` naming the
        demand's source (the file) if it does not cover them all."""
        index = hourly_index(start, hours)
        if not index.isin(self.index).all():
            raise InputError(
                self.source,
                None,
                f"demand for every planned hour, {index[0].isoformat()} .. "
                f"{index[-1].isoformat()} (it covers {self.index[0].isoformat()} .. "
                f"{self.index[-1].isoformat()}: give --start and --days inside that)",
            )
        return DemandSet({n: s.loc[index] for n, s in self.serving.items()}, index, self.source)

    def forecast(
        self,
        start: datetime | pd.Timestamp,
        hours: int,
        *,
        smoothing: float = 0.3,
        quantile: float = 0.9,
    ) -> dict[str, Forecast]:
        """Per workload, a forecast from the history strictly before ``start``."""
        cut = hourly_index(start, 1)[0]
        return {
            n: forecast_hour_of_week(s[s.index < cut], cut, hours, smoothing, quantile)
            for n, s in self.serving.items()
        }


# --- reading demand files --------------------------------------------------------------


def load_demand(
    path: str | Path,
    workloads: WorkloadSet,
    *,
    start: datetime | None = None,
    hours: int | None = None,
    seed: int = 0,
) -> DemandSet:
    """Hourly serving demand from a CSV (wide or long) or YAML file.

    Every serving workload needs a curve: from the file, else from its inline
    shape over the file's hours. ``start``/``hours`` are used only where a YAML
    file leaves them out. Any problem raises ``InputError`` naming the file,
    the line (1-based, the header is line 1) or field, and the column.
    """
    source = str(path)
    try:
        size = Path(path).stat().st_size
    except OSError as e:
        raise InputError(source, None, f"a readable demand file ({e.strerror})") from e
    if size > MAX_FILE_BYTES:
        raise InputError(source, None, f"a demand file of at most {MAX_FILE_BYTES:,} bytes")
    if Path(path).suffix.lower() in (".yaml", ".yml"):
        serving, index = _read_yaml(Path(path), source, workloads, start, hours, seed)
    else:
        serving, index = _read_csv(Path(path), source, workloads)
    for w in workloads.of_class(WorkloadClass.SERVING):
        if w.name in serving:
            continue
        if w.demand is None:
            raise InputError(
                source, None, f"demand for serving workload {w.name!r} (it has no inline shape)"
            )
        serving[w.name] = _from_shape(w.demand, index, w.name, seed, DEFAULT_NOISE)
    return DemandSet(serving=serving, index=index, source=source)


def example_demand_path() -> Path:
    """The shipped example: 6 weeks of hourly ``chat-api`` demand from 2026-01-05
    (the built-in workloads' serving shape, seed 2026), for ``--demand``."""
    return Path(str(resources.files("broker").joinpath("examples/demand.csv")))


def _check_name(source: str, where: str, name: str, workloads: WorkloadSet) -> None:
    known = [w.name for w in workloads.of_class(WorkloadClass.SERVING)]
    if name in known:
        return
    if name in workloads.names():
        expected = "a serving workload (training and batch demand comes from their spec)"
    else:
        expected = f"a serving workload's name ({', '.join(known) or 'none defined'})"
    raise InputError(source, where, expected, got=name)


def _read_csv(
    path: Path, source: str, workloads: WorkloadSet
) -> tuple[dict[str, pd.Series], pd.DatetimeIndex]:
    # The csv module, not pandas, splits rows: it counts physical lines (so
    # errors can name them) and rejects ragged rows pandas would silently trim.
    try:
        with path.open(encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(f)
            header = [c.strip() for c in next(reader, [])]
            rows, line_numbers = [], []
            for row in reader:
                if not any(cell.strip() for cell in row):
                    continue  # blank line
                if len(row) != len(header):
                    raise InputError(
                        source,
                        f"line {reader.line_num}",
                        f"{len(header)} fields like the header",
                        got=f"{len(row)} fields",
                    )
                rows.append(row)
                line_numbers.append(reader.line_num)
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise InputError(source, None, f"a readable UTF-8 CSV file ({e})") from e
    if not header:
        raise InputError(source, "line 1", "a header row: hour,<workload>,...")
    for i, col in enumerate(header):
        if col in header[:i] or not col:
            raise InputError(source, f"line 1, column {i + 1}", "a unique, non-empty name", got=col)
    raw = pd.DataFrame(rows, columns=header, dtype=str)
    lines = np.asarray(line_numbers, dtype=np.int64)
    if "hour" not in header:
        raise InputError(source, "line 1", "a column named 'hour'", got=",".join(header))
    if len(raw) == 0:
        raise InputError(source, "line 2", "at least one row of demand")
    hours = _parse_hours(raw["hour"], lines, source)
    if set(header) == {"hour", "workload", "units"}:
        return _long(raw, hours, lines, source, workloads)
    serving: dict[str, pd.Series] = {}
    index = _contiguous(hours, lines, source, raw["hour"].to_numpy())
    for col in header:
        if col == "hour":
            continue
        _check_name(source, f"line 1, column {col}", col, workloads)
        units = _parse_units(raw[col], lines, source, col)
        serving[col] = pd.Series(units, index=index, name=col, dtype=float)
    return serving, index


def _long(
    raw: pd.DataFrame,
    hours: pd.DatetimeIndex,
    lines: np.ndarray,
    source: str,
    workloads: WorkloadSet,
) -> tuple[dict[str, pd.Series], pd.DatetimeIndex]:
    names = raw["workload"].str.strip().to_numpy()
    units = _parse_units(raw["units"], lines, source, "units")
    serving: dict[str, pd.Series] = {}
    index: pd.DatetimeIndex | None = None
    for name in dict.fromkeys(names):
        rows = np.flatnonzero(names == name)
        _check_name(source, f"line {lines[rows[0]]}, column workload", str(name), workloads)
        own = _contiguous(hours[rows], lines[rows], source, raw["hour"].to_numpy()[rows])
        if index is not None and not own.equals(index):
            raise InputError(
                source,
                f"column workload ({name})",
                f"the same hours as the other workloads ({index[0]} .. {index[-1]}, "
                f"{len(index)} h)",
                got=f"{own[0]} .. {own[-1]}, {len(own)} h",
            )
        index = own
        serving[str(name)] = pd.Series(units[rows], index=own, name=str(name), dtype=float)
    assert index is not None
    return serving, index


def _parse_hours(col: pd.Series, lines: np.ndarray, source: str) -> pd.DatetimeIndex:
    stamps = pd.to_datetime(col.str.strip(), utc=True, errors="coerce", format="ISO8601")
    bad = stamps.isna().to_numpy()
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(
            source,
            f"line {lines[i]}, column hour",
            "an ISO 8601 time (UTC if no offset)",
            got=col.iloc[i],
        )
    out = ~((stamps >= FIRST_HOUR) & (stamps < LAST_HOUR)).to_numpy(dtype=bool)
    if out.any():
        i = int(np.argmax(out))
        raise InputError(
            source,
            f"line {lines[i]}, column hour",
            f"a time from {FIRST_HOUR.year} to {LAST_HOUR.year}",
            got=col.iloc[i],
        )
    index = pd.DatetimeIndex(stamps.dt.as_unit("ns"))
    partial = np.asarray(index != index.floor("h"))
    if partial.any():
        i = int(np.argmax(partial))
        raise InputError(
            source,
            f"line {lines[i]}, column hour",
            "a whole hour (minutes and seconds 0)",
            got=col.iloc[i],
        )
    return index


def _contiguous(
    hours: pd.DatetimeIndex, lines: np.ndarray, source: str, text: np.ndarray
) -> pd.DatetimeIndex:
    """One row per hour, in order, no gaps; returns a clean hourly index."""
    deltas = hours[1:] - hours[:-1]
    wrong = np.asarray(deltas != HOUR)
    if wrong.any():
        i = int(np.argmax(wrong))
        prev, delta = hours[i], deltas[i]
        if delta == pd.Timedelta(0):
            expected = f"a new hour (line {lines[i]} has the same)"
        elif delta < pd.Timedelta(0):
            expected = f"hours in increasing order (after {prev.isoformat()})"
        else:
            missing = int(delta / HOUR) - 1
            expected = f"the next hour {(prev + HOUR).isoformat()} ({missing} hour(s) missing)"
        raise InputError(source, f"line {lines[i + 1]}, column hour", expected, got=text[i + 1])
    return hourly_index(hours[0], len(hours))


def _parse_units(col: pd.Series, lines: np.ndarray, source: str, column: str) -> np.ndarray:
    values = pd.to_numeric(col.str.strip(), errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(values)
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(source, f"line {lines[i]}, column {column}", "a number", got=col.iloc[i])
    outside = (values < 0) | (values > MAX_UNITS)
    if outside.any():
        i = int(np.argmax(outside))
        raise InputError(
            source, f"line {lines[i]}, column {column}", UNITS.expected, got=col.iloc[i]
        )
    return values


def _read_yaml(
    path: Path,
    source: str,
    workloads: WorkloadSet,
    start: datetime | None,
    hours: int | None,
    seed: int,
) -> tuple[dict[str, pd.Series], pd.DatetimeIndex]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(source, None, f"a readable UTF-8 YAML file ({e})") from e
    data = read_yaml(text, source)
    if not isinstance(data, dict) or not isinstance(data.get("workloads"), dict):
        raise InputError(source, "workloads", "a mapping of serving workload name to demand")
    unknown = sorted(set(data) - {"start", "hours", "workloads"})
    if unknown:
        raise InputError(source, unknown[0], "one of start, hours, workloads")
    begin = _yaml_start(data.get("start", start), source)
    # A parsed YAML mapping: PyYAML's values are Any; each is checked below.
    entries: dict[str, Any] = data["workloads"]
    lengths = {len(v) for v in entries.values() if isinstance(v, list)}
    count = data.get("hours", hours)
    if count is None:
        count = max(lengths) if lengths else None
    try:
        count = int(HOURS.check(count))
    except NumberError as e:
        raise InputError(source, "hours", str(e), got=count) from e
    if begin + pd.Timedelta(hours=count) > LAST_HOUR:
        raise InputError(source, "hours", f"hours that end before {LAST_HOUR.year}", got=count)
    index = hourly_index(begin, count)
    serving: dict[str, pd.Series] = {}
    for name, entry in entries.items():
        where = f"workloads.{name}"
        _check_name(source, where, str(name), workloads)
        if isinstance(entry, list):
            serving[name] = _yaml_values(entry, index, source, where).rename(name)
        elif isinstance(entry, dict):
            try:
                shape = DemandShape.model_validate(entry)
            except ValidationError as e:
                raise input_error_from(source, e, prefix=where) from e
            serving[name] = _from_shape(shape, index, name, seed, DEFAULT_NOISE)
        else:
            raise InputError(source, where, "a list of hourly values or a demand shape", got=entry)
    return serving, index


def _yaml_start(value: object, source: str) -> pd.Timestamp:
    if value is None:
        raise InputError(source, "start", "the first hour (an ISO 8601 time)")
    # What pandas takes as a time; anything else fails as pandas would fail it.
    if not isinstance(value, str | int | float | date | np.datetime64):
        raise InputError(source, "start", "an ISO 8601 time", got=value)
    try:
        stamp = pd.Timestamp(value)
    except (TypeError, ValueError, OverflowError) as e:
        raise InputError(source, "start", "an ISO 8601 time", got=value) from e
    stamp = stamp.tz_localize("UTC") if stamp.tz is None else stamp.tz_convert("UTC")
    if not FIRST_HOUR <= stamp < LAST_HOUR:
        raise InputError(
            source, "start", f"a time from {FIRST_HOUR.year} to {LAST_HOUR.year}", got=str(value)
        )
    stamp = stamp.as_unit("ns")
    if stamp != stamp.floor("h"):
        raise InputError(source, "start", "a whole hour", got=str(value))
    return stamp


def _yaml_values(
    entry: list[object], index: pd.DatetimeIndex, source: str, where: str
) -> pd.Series:
    if len(entry) != len(index):
        raise InputError(source, where, f"{len(index)} hourly values", got=f"{len(entry)} values")
    for i, v in enumerate(entry):
        if not isinstance(v, int | float):  # text is not a number here
            raise InputError(source, f"{where}[{i}]", UNITS.expected, got=v)
        try:
            UNITS.check(v)
        except NumberError as e:
            raise InputError(source, f"{where}[{i}]", str(e), got=v) from e
    return pd.Series(np.asarray(entry, dtype=float), index=index, name=where, dtype=float)
