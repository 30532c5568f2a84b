"""Google Cloud list prices as change points, and machine-type attributes.

Owns: ``load_gcp_prices`` (the Cyclenerd/google-cloud-pricing-cost-calculator
export: ``snapshot_date,generated,machine_type,region,hour,hour_spot,month,
month_1y,month_3y,month_spot``) and ``load_gcp_machine_types``
(``machine_type_attributes.csv``). Re-exported by ``markets.files.prices``;
``markets.files.prices.as_of`` gives the row in force at a time.

Must not: call Google APIs (``markets.gcp`` does) or pick prices for a pool.

``load_gcp_prices`` schema (``GCP_PRICE_COLUMNS``), sorted by (region,
machine_type, valid_from); a row holds until the next row of its key:

=========================  ===================  =================================
column                     dtype                meaning
=========================  ===================  =================================
valid_from                 datetime64[ns, UTC]  from when the row's prices hold
provider                   str                  ``"gcp"``
region                     str                  ``us-central1``
machine_type               str                  ``a2-highgpu-1g``
on_demand_usd_per_hour     float64              list price, $ per instance-hour
spot_usd_per_hour          float64              NaN before spot data (2023-05)
committed_1y_usd_per_hour  float64              1-year CUD monthly / 730 h
committed_3y_usd_per_hour  float64              3-year CUD monthly / 730 h
snapshot_date              datetime64[ns, UTC]  the export's date (00:00 UTC)
=========================  ===================  =================================

``load_gcp_machine_types`` schema: ``machine_type`` (str), ``family`` (str),
``vcpus`` (float64), ``memory_gib`` (float64), ``gpu_model`` (str or NaN),
``gpus`` (int64).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from markets.files.parsing import (
    DEFAULT_POLICY,
    BadRowPolicy,
    check_report,
    read_csv_rows,
    report_from_mask,
    require_columns,
    with_report,
)

__all__ = ["GCP_PRICE_COLUMNS", "HOURS_PER_MONTH", "load_gcp_machine_types", "load_gcp_prices"]

GCP_PRICE_COLUMNS = (
    "valid_from",
    "provider",
    "region",
    "machine_type",
    "on_demand_usd_per_hour",
    "spot_usd_per_hour",
    "committed_1y_usd_per_hour",
    "committed_3y_usd_per_hour",
    "snapshot_date",
)
_GCP_REQUIRED = ("snapshot_date", "machine_type", "region", "hour", "month_1y", "month_3y")
# Hours per month: 730 = 365 * 24 / 12, the convention of Google's Compute
# Engine price pages and pricing calculator (monthly = hourly * 730). This data
# follows it: month_spot / hour_spot == 730 in every row that has both, and
# month / hour == 730 wherever no sustained-use discount is folded into month.
HOURS_PER_MONTH = 730.0
_GCP_NUMERIC = ("hour", "hour_spot", "month", "month_1y", "month_3y", "month_spot")


def load_gcp_prices(path: str | Path, *, policy: BadRowPolicy = DEFAULT_POLICY) -> pd.DataFrame:
    """Load Google Cloud list-price change points into ``GCP_PRICE_COLUMNS``.

    ``valid_from`` is the row's ``generated`` time when present (two snapshots
    on one day then keep their order), else ``snapshot_date`` 00:00 UTC.
    Committed prices are the monthly commitment / ``HOURS_PER_MONTH``; spot is
    ``hour_spot`` (NaN before Google published it, 2023-05). A price of 0 for a
    committed or spot tier means "not offered" in this data (a snapshot that a
    same-day one corrected): it becomes NaN and is noted. Sorted by (region,
    machine_type, valid_from); a price holds until the next row of its key
    (``as_of``)."""
    path = Path(path)
    rows = read_csv_rows(path)
    require_columns(path, rows.header, _GCP_REQUIRED)
    raw = rows.frame
    n = len(raw)
    snap = pd.to_datetime(raw["snapshot_date"], utc=True, errors="coerce", format="ISO8601")
    gen = (
        pd.to_datetime(raw["generated"], utc=True, errors="coerce", format="ISO8601")
        if "generated" in raw.columns
        else pd.Series(pd.NaT, index=raw.index, dtype="datetime64[ns, UTC]")
    )
    bad_gen = (
        gen.isna() & (raw["generated"] != "") if "generated" in raw.columns else gen.isna() & False
    )
    nums = {}
    bad_num = np.zeros(n, dtype=bool)
    for col in _GCP_NUMERIC:
        text = raw[col] if col in raw.columns else pd.Series("", index=raw.index, dtype=str)
        val = pd.to_numeric(text, errors="coerce")
        bad_num |= (val.isna() & (text != "")).to_numpy() | (val < 0).to_numpy()
        nums[col] = val.astype(np.float64)
    machine = raw["machine_type"].str.strip()
    region = raw["region"].str.strip()
    reasons = np.select(
        [
            snap.isna().to_numpy(),
            bad_gen.to_numpy(dtype=bool),
            (machine == "").to_numpy(),
            (region == "").to_numpy(),
            bad_num,
        ],
        [
            "snapshot_date is not a date",
            "generated is not an ISO 8601 time",
            "machine_type is empty",
            "region is empty",
            "a price is not a number >= 0",
        ],
        default="",
    )
    bad = reasons != ""
    report = report_from_mask(rows.report, bad, rows.where, reasons, rows.text_of)
    keep = ~bad
    zero = 0
    tiers = {}
    for out_col, col, scale in (
        ("spot_usd_per_hour", "hour_spot", 1.0),
        ("committed_1y_usd_per_hour", "month_1y", HOURS_PER_MONTH),
        ("committed_3y_usd_per_hour", "month_3y", HOURS_PER_MONTH),
    ):
        v = nums[col][keep]
        zero += int((v == 0).sum())
        tiers[out_col] = v.where(v > 0) / scale
    if zero:
        report = report.note(f"{zero} zero spot/committed prices read as 'not offered' (NaN)")
    df = pd.DataFrame(
        {
            "valid_from": gen[keep].fillna(snap[keep]).dt.as_unit("ns"),
            "provider": pd.Series("gcp", index=raw.index[keep], dtype=str),
            "region": region[keep].astype(str),
            "machine_type": machine[keep].astype(str),
            "on_demand_usd_per_hour": nums["hour"][keep],
            **tiers,
            "snapshot_date": snap[keep].dt.as_unit("ns"),
        }
    )
    df = df.sort_values(["region", "machine_type", "valid_from"], kind="stable")
    check_report(report, policy)
    return with_report(df.reset_index(drop=True), report)


def load_gcp_machine_types(path: str | Path) -> pd.DataFrame:
    """``machine_type_attributes.csv`` -> one row per machine type:
    ``machine_type``, ``family``, ``vcpus`` (float: shared-core e2-micro has
    0.25), ``memory_gib`` (float),
    ``gpu_model`` (str or NaN), ``gpus`` (int, 0 without GPUs).

    Every column not known to be a CPU/memory/disk/network attribute is taken
    as a GPU model column (``a100``, ``l4``, ``h100-80gb`` ...), so a newer file
    with more GPU columns still reads; a type with two GPU columns is an error."""
    path = Path(path)
    rows = read_csv_rows(path)
    require_columns(path, rows.header, ("machine_type", "cpu", "ram"))
    raw = rows.frame
    known = {"machine_type", "cpu", "ram", "type", "bandwidth", "local", "local-ssd", "tier1"}
    gpu_cols = [c for c in raw.columns if c not in known]
    cpu = pd.to_numeric(raw["cpu"], errors="coerce")
    ram = pd.to_numeric(raw["ram"], errors="coerce")
    # Longest name first: where two GPU columns carry the same count the more
    # specific one wins (a2-ultragpu sets both "a100" and "a100-80gb").
    gpu_cols.sort(key=len, reverse=True)
    gpus = pd.DataFrame(
        {c: pd.to_numeric(raw[c], errors="coerce").fillna(0) for c in gpu_cols}, index=raw.index
    )
    top = gpus.max(axis=1) if gpu_cols else pd.Series(0.0, index=raw.index)
    conflict = (gpus.gt(0) & gpus.ne(top, axis=0)).any(axis=1).to_numpy()
    reasons = np.select(
        [
            (raw["machine_type"].str.strip() == "").to_numpy(),
            ~(cpu > 0).to_numpy(dtype=bool),
            ~(ram > 0).to_numpy(dtype=bool),
            conflict,
        ],
        [
            "machine_type is empty",
            "cpu is not a count > 0",
            "ram is not GiB > 0",
            "GPU columns disagree on the count",
        ],
        default="",
    )
    bad = reasons != ""
    report = report_from_mask(rows.report, bad, rows.where, reasons, rows.text_of)
    check_report(report)
    keep = ~bad
    if gpu_cols:
        model = gpus[keep].idxmax(axis=1).where(top[keep] > 0)
    else:
        model = pd.Series(np.nan, index=raw.index[keep], dtype=object)
    count = top[keep].astype(np.int64)
    family = raw["type"] if "type" in raw.columns else raw["machine_type"].str.split("-").str[0]
    df = pd.DataFrame(
        {
            "machine_type": raw["machine_type"][keep].str.strip(),
            "family": family[keep]
            .replace("", np.nan)
            .fillna(raw["machine_type"][keep].str.split("-").str[0]),
            "vcpus": cpu[keep].astype(np.float64),
            "memory_gib": ram[keep].astype(np.float64),
            "gpu_model": model.astype(object),
            "gpus": count,
        }
    )
    return with_report(df.sort_values("machine_type").reset_index(drop=True), report)
