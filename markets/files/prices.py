"""Recorded spot price histories: AWS ``DescribeSpotPriceHistory`` rows and
Spotfolio's own price-history file (what ``market fetch`` writes).

Owns: ``load_aws_spot_prices`` (CSV/CSV.gz with ``Timestamp,AvailabilityZone,
InstanceType,SpotPrice[,ProductDescription]``, or the API's raw JSON: one page
``{"SpotPriceHistory": [...], "NextToken": ...}``, a list of pages, or JSON lines
of pages or of single records), ``write_price_history`` / ``read_price_history``
(round-trip CSV, and Parquet when pyarrow is importable) and ``as_of`` (the
row in force at a time, per key, for any change-point table). GCP list prices
are read in ``markets.files.gcp_prices`` and re-exported here.

Must not: call AWS (``markets.aws`` fetches), or join prices with traces.

Price-history schema (``PRICE_COLUMNS``), sorted by (zone, instance_type, timestamp):

=================  ===================  ==========================================
column             dtype                meaning
=================  ===================  ==========================================
timestamp          datetime64[ns, UTC]  when this spot price took effect
provider           str                  ``"aws"``
region             str                  ``us-east-1`` (the zone minus its suffix)
zone               str                  ``us-east-1a``
instance_type      str                  ``p3.2xlarge``
spot_usd_per_hour  float64              spot price, US $ per instance-hour (> 0)
=================  ===================  ==========================================

A price holds from its ``timestamp`` until the next row of the same (zone,
instance_type): AWS records change points, not ticks. Rows whose product is not
Linux/UNIX are left out and counted in a report note (AWS prices each OS apart).
Exact duplicate rows (pages overlapping) are dropped and noted. Rows that do not
parse are reported with their line (``markets.files.parsing``) and raise past the
policy.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np
import pandas as pd

from markets.errors import InputError

# GCP list prices are read in markets.files.gcp_prices; re-exported here so that
# every recorded-price loader is importable from one place.
from markets.files.gcp_prices import (
    GCP_PRICE_COLUMNS,
    HOURS_PER_MONTH,
    load_gcp_machine_types,
    load_gcp_prices,
)
from markets.files.parsing import (
    DEFAULT_POLICY,
    BadRowPolicy,
    ParseReport,
    check_report,
    open_text,
    read_csv_rows,
    read_text,
    report_from_mask,
    require_columns,
    with_report,
)
from markets.numbers import MAX_USD_PER_HOUR
from markets.validation import json_loads

__all__ = [
    "AWS_CSV_COLUMNS",
    "GCP_PRICE_COLUMNS",
    "HOURS_PER_MONTH",
    "PRICE_COLUMNS",
    "as_of",
    "load_aws_spot_prices",
    "load_gcp_machine_types",
    "load_gcp_prices",
    "parquet_available",
    "read_price_history",
    "write_price_history",
]

S = TypeVar("S", str, bool)  # what a mapped pandas Series holds

PRICE_COLUMNS = ("timestamp", "provider", "region", "zone", "instance_type", "spot_usd_per_hour")
AWS_CSV_COLUMNS = ("Timestamp", "AvailabilityZone", "InstanceType", "SpotPrice")
# Spot prices exist since 2009; pandas' nanosecond times end in 2262.
_FIRST_TIME = pd.Timestamp("2000-01-01", tz="UTC")
_LAST_TIME = pd.Timestamp("2200-01-01", tz="UTC")
_LINUX = "Linux/UNIX"
# A zone name is its region plus a letter, or a local-zone suffix (us-west-2-lax-1a).
_ZONE_RE = r"^(?P<region>[a-z]{2}(?:-[a-z]+)+-\d+)(?:-[a-z0-9]+)*[a-z]$"
_ITYPE_RE = r"^[a-z0-9-]+\.[a-z0-9-]+$"


def parquet_available() -> bool:
    return importlib.util.find_spec("pyarrow") is not None


def load_aws_spot_prices(
    path: str | Path, *, policy: BadRowPolicy = DEFAULT_POLICY
) -> pd.DataFrame:
    """Load AWS spot price rows from CSV(.gz) or API JSON into ``PRICE_COLUMNS``.

    The ``ParseReport`` is attached as ``df.attrs["parse_report"]``
    (``markets.files.parsing.get_report``)."""
    path = Path(path)
    text_head = _head(path)
    if text_head.lstrip().startswith(("{", "[")):
        raw, where, text_of, report = _json_rows(path)
    else:
        rows = read_csv_rows(path)
        require_columns(path, rows.header, AWS_CSV_COLUMNS)
        raw = rows.frame.rename(
            columns={
                "Timestamp": "timestamp",
                "AvailabilityZone": "zone",
                "InstanceType": "instance_type",
                "SpotPrice": "price",
                "ProductDescription": "product",
            }
        )
        where, text_of, report = rows.where, rows.text_of, rows.report
    df, report = _normalise(raw, where, text_of, report)
    check_report(report, policy)
    return with_report(df, report)


def _head(path: Path) -> str:
    try:
        with open_text(path) as fh:
            return fh.read(64)
    except (UnicodeDecodeError, OSError, EOFError) as e:
        raise InputError(str(path), None, "UTF-8 text (optionally gzip)", got=str(e)) from e


def _json_rows(
    path: Path,
) -> tuple[pd.DataFrame, Callable[[int], str], Callable[[int], str], ParseReport]:
    """Flatten API pages into string columns with a location per record."""
    text = read_text(path)
    records: list[tuple[str, object]] = []
    try:
        docs: list[tuple[str, object]] = [("", json_loads(text, str(path)))]
    except json.JSONDecodeError as first_error:
        docs = []
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                docs.append((f"line {n}: ", json_loads(line, str(path))))
            except json.JSONDecodeError as e:
                if n == 1:
                    raise InputError(
                        str(path), f"line {first_error.lineno}", "valid JSON", got=first_error.msg
                    ) from first_error
                raise InputError(
                    str(path), f"line {n}", "one JSON document per line", got=e.msg
                ) from e
    for prefix, d in docs:
        pages = list(enumerate(d)) if isinstance(d, list) else [(None, d)]
        for i, page in pages:
            loc = prefix + (f"[{i}]." if i is not None else "")
            if isinstance(page, dict) and "SpotPriceHistory" in page:
                items = page["SpotPriceHistory"]
                if not isinstance(items, list):
                    raise InputError(str(path), loc + "SpotPriceHistory", "a list of price records")
                records += [(f"{loc}SpotPriceHistory[{j}]", it) for j, it in enumerate(items)]
            elif isinstance(page, dict) and "SpotPrice" in page:
                records.append((prefix.rstrip(": ") or loc.rstrip("."), page))
            else:
                raise InputError(
                    str(path),
                    loc.rstrip(".") or "(top level)",
                    "a DescribeSpotPriceHistory page ({'SpotPriceHistory': [...]}) or a record",
                    got=type(page).__name__,
                )

    def field(item: object, key: str) -> str:
        v = item.get(key) if isinstance(item, dict) else None
        return "" if v is None else str(v)

    keys = {
        "timestamp": "Timestamp",
        "zone": "AvailabilityZone",
        "instance_type": "InstanceType",
        "price": "SpotPrice",
        "product": "ProductDescription",
    }
    frame = pd.DataFrame(
        {col: [field(it, k) for _, it in records] for col, k in keys.items()}, dtype=str
    )

    def where(i: int) -> str:
        return records[i][0]

    def text_of(i: int) -> str:
        return json.dumps(records[i][1], default=str)

    return frame, where, text_of, ParseReport(str(path), rows_read=len(records))


def _by_unique(
    values: pd.Series[str], fn: Callable[[pd.Series[str]], pd.Series[S]]
) -> pd.Series[S]:
    """Apply a string function once per distinct value (zones, types and
    products repeat thousands of times; string ops are per-element Python)."""
    codes, uniques = pd.factorize(values, use_na_sentinel=False)
    mapped = fn(pd.Series(uniques, dtype=str))
    return pd.Series(mapped.to_numpy()[codes], index=values.index)


def _normalise(
    raw: pd.DataFrame,
    where: Callable[[int], str],
    text_of: Callable[[int], str],
    report: ParseReport,
) -> tuple[pd.DataFrame, ParseReport]:
    """Vectorised validation of string columns -> the price-history schema."""
    n = len(raw)
    ts = pd.to_datetime(raw["timestamp"], utc=True, errors="coerce", format="ISO8601")
    # pandas parses year 9999 (microseconds reach it), but the schema is in
    # nanoseconds, which end in 2262: a time outside TIME_RANGE is a bad row.
    in_range = ((ts >= _FIRST_TIME) & (ts < _LAST_TIME)).to_numpy(dtype=bool)
    price = pd.to_numeric(raw["price"], errors="coerce")
    zone = _by_unique(raw["zone"], lambda u: u.str.strip())
    region = _by_unique(zone, lambda u: u.str.extract(_ZONE_RE, expand=True)["region"])
    itype = _by_unique(raw["instance_type"], lambda u: u.str.strip())
    ok_itype = _by_unique(itype, lambda u: u.str.match(_ITYPE_RE)).astype(bool)
    other_provider = (
        _by_unique(raw["provider"], lambda u: u.str.strip() != "aws").astype(bool).to_numpy()
        if "provider" in raw.columns
        else np.zeros(n, dtype=bool)
    )
    reasons = np.select(
        [
            other_provider,
            ts.isna().to_numpy(),
            ~in_range,
            region.isna().to_numpy(),
            ~ok_itype.to_numpy(),
            ~((price > 0) & (price <= MAX_USD_PER_HOUR)).to_numpy(dtype=bool),
        ],
        [
            "provider is not 'aws' (only AWS histories today)",
            "Timestamp is not an ISO 8601 time",
            f"Timestamp is not between {_FIRST_TIME.year} and {_LAST_TIME.year}",
            "AvailabilityZone is not a zone name (e.g. us-east-1a)",
            "InstanceType is not a type name (e.g. p3.2xlarge)",
            f"SpotPrice is not a price > 0 and <= {MAX_USD_PER_HOUR:,.0f}",
        ],
        default="",
    )
    bad = reasons != ""
    report = report_from_mask(report, bad, where, reasons, text_of)
    keep = ~bad
    if "product" in raw.columns:
        product = _by_unique(raw["product"], lambda u: u.str.strip())
        other_os = keep & (product != "").to_numpy() & (product != _LINUX).to_numpy()
        if other_os.any():
            report = report.note(
                f"{int(other_os.sum())} rows for other products than {_LINUX} left out"
            )
            keep &= ~other_os
    df = pd.DataFrame(
        {
            "timestamp": ts[keep].dt.as_unit("ns"),
            "provider": pd.Series("aws", index=raw.index[keep], dtype=str),
            "region": region[keep].astype(str),
            "zone": zone[keep].astype(str),
            "instance_type": itype[keep].astype(str),
            "spot_usd_per_hour": price[keep].astype(np.float64),
        }
    )
    df, report = _dedupe_sort(df, report)
    return df, report


def _dedupe_sort(df: pd.DataFrame, report: ParseReport) -> tuple[pd.DataFrame, ParseReport]:
    dup = df.duplicated()
    if dup.any():
        report = report.note(f"{int(dup.sum())} exact duplicate rows dropped")
        df = df[~dup]
    df = df.sort_values(["zone", "instance_type", "timestamp"], kind="stable").reset_index(
        drop=True
    )
    return df, report


def write_price_history(df: pd.DataFrame, path: str | Path) -> Path:
    """Write a price history (``PRICE_COLUMNS``) to ``.csv``, ``.csv.gz`` or
    ``.parquet`` (the latter needs pyarrow). Written to a temporary file and
    renamed, so a failure leaves nothing half-written."""
    path = Path(path)
    missing = [c for c in PRICE_COLUMNS if c not in df.columns]
    if missing:
        raise InputError(
            str(path), "columns", f"a frame with {', '.join(PRICE_COLUMNS)}", got=missing
        )
    out = df.loc[:, list(PRICE_COLUMNS)].copy()
    out["timestamp"] = pd.to_datetime(out["timestamp"], utc=True)
    tmp = path.with_name(path.name + ".tmp")
    if path.suffix == ".parquet":
        if not parquet_available():
            raise InputError(str(path), None, "a .csv path (Parquet needs pyarrow, not installed)")
        out.to_parquet(tmp, index=False)
    else:
        out = out.assign(timestamp=out["timestamp"].dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
        out.to_csv(
            tmp,
            index=False,
            float_format="%.10g",
            compression="gzip" if path.name.endswith(".gz") else None,
        )
    tmp.replace(path)
    return path


def read_price_history(path: str | Path, *, policy: BadRowPolicy = DEFAULT_POLICY) -> pd.DataFrame:
    """Read what ``write_price_history`` wrote (CSV, CSV.gz or Parquet), with
    the same validation and sort as ``load_aws_spot_prices``."""
    path = Path(path)
    if path.suffix == ".parquet":
        if not parquet_available():
            raise InputError(str(path), None, "pyarrow installed to read Parquet")
        df = pd.read_parquet(path)
        require_columns(path, tuple(df.columns), PRICE_COLUMNS)
        raw = df.loc[:, list(PRICE_COLUMNS)].astype(str)

        def where(i: int) -> str:
            return f"row {i}"

        def text_of(i: int) -> str:
            return ",".join(raw.iloc[i].astype(str))

        report = ParseReport(str(path), rows_read=len(raw))
    else:
        rows = read_csv_rows(path)
        require_columns(path, rows.header, PRICE_COLUMNS)
        raw = rows.frame
        where, text_of, report = rows.where, rows.text_of, rows.report
    raw = raw.rename(columns={"spot_usd_per_hour": "price"})
    df, report = _normalise(raw, where, text_of, report)
    check_report(report, policy)
    return with_report(df, report)


def as_of(
    df: pd.DataFrame,
    at: object,
    *,
    by: Sequence[str],
    time_col: str,
) -> pd.DataFrame:
    """The row in force at ``at`` for every key ``by`` (the last row with
    ``time_col <= at``; a price holds until the next change point).

    ``at`` a single time: one row per key that has started by then.
    ``at`` a sequence of times: a long frame with an ``at`` column, one row per
    (time, key) in force, via ``pandas.merge_asof`` (vectorised)."""
    keys = list(by)
    times = pd.to_datetime(pd.Series(np.atleast_1d(np.asarray(at, dtype=object))), utc=True)
    data = df.sort_values(time_col, kind="stable")
    if np.ndim(np.asarray(at, dtype=object)) == 0:
        cut = data[data[time_col] <= times.iloc[0]]
        return (
            cut.groupby(keys, sort=True, observed=True)
            .tail(1)
            .sort_values(keys)
            .reset_index(drop=True)
        )
    grid = (
        data[keys]
        .drop_duplicates()
        .merge(pd.DataFrame({"at": times.dt.as_unit("ns")}), how="cross")
    )
    grid = grid.sort_values("at", kind="stable")
    out = pd.merge_asof(
        grid,
        data.assign(**{time_col: data[time_col].dt.as_unit("ns")}),
        left_on="at",
        right_on=time_col,
        by=keys,
        direction="backward",
    )
    out = out[out[time_col].notna()].loc[:, ["at", *df.columns]]
    return out.sort_values(["at", *keys], kind="stable").reset_index(drop=True)
