"""Spot GPU fleet membership traces: ``ms,add|remove,nodeN`` lines.

Owns: ``load_fleet_trace`` and the views derived from one trace:
``node_lifetimes``, ``node_count_series`` and ``revocation_times``. The format
is the Bamboo (NSDI 2023) trace of a p3 / g4dn spot fleet over ~11 hours:
no header, one event per line, milliseconds since the trace start.

Must not: estimate hazards (``markets.hazard.posterior`` does) or assume a
calendar date (the traces carry only offsets).

``load_fleet_trace(path)`` schema, in file order (stable-sorted by ``t_ms``):

=======  ================  ============================================
column   dtype             meaning
=======  ================  ============================================
t_ms     int64             milliseconds since the trace start
t        timedelta64[ns]   the same offset as a timedelta
event    str               ``add`` (node joined) | ``remove`` (revoked)
node     str               node id, e.g. ``node17``
line     int64             line in the file (for error messages)
=======  ================  ============================================

A row that does not parse, a ``remove`` of a node that is not in the fleet,
or an ``add`` of a node already in it, is a bad row (counted, reported with
its line, left out; an error past the policy).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from markets.files.parsing import (
    DEFAULT_POLICY,
    BadRow,
    BadRowPolicy,
    check_report,
    read_csv_rows,
    report_from_mask,
    with_report,
)

__all__ = [
    "FLEET_COLUMNS",
    "load_fleet_trace",
    "node_count_series",
    "node_lifetimes",
    "revocation_times",
]

FLEET_COLUMNS = ("t_ms", "t", "event", "node", "line")
_NODE_RE = r"^[A-Za-z0-9_.:-]+$"


def load_fleet_trace(path: str | Path, *, policy: BadRowPolicy = DEFAULT_POLICY) -> pd.DataFrame:
    """Load one fleet trace; the ``ParseReport`` is in ``df.attrs["parse_report"]``."""
    path = Path(path)
    rows = read_csv_rows(path, header=("t_ms", "event", "node"))
    raw = rows.frame
    t_ms = pd.to_numeric(raw["t_ms"].str.strip(), errors="coerce")
    event = raw["event"].str.strip().str.lower()
    node = raw["node"].str.strip()
    reasons = np.select(
        [
            ~((t_ms >= 0) & (t_ms == np.floor(t_ms))).to_numpy(dtype=bool),
            ~event.isin(["add", "remove"]).to_numpy(),
            ~node.str.match(_NODE_RE).to_numpy(dtype=bool),
        ],
        [
            "time is not a whole number of milliseconds >= 0",
            "event is not add or remove",
            "node is not a node id",
        ],
        default="",
    )
    bad = reasons != ""
    report = report_from_mask(rows.report, bad, rows.where, reasons, rows.text_of)
    keep = ~bad
    df = pd.DataFrame(
        {
            "t_ms": t_ms[keep].astype(np.int64),
            "event": event[keep].astype(str),
            "node": node[keep].astype(str),
            "line": rows.lines[keep],
        }
    ).sort_values("t_ms", kind="stable")
    df, seq_bad = _membership_errors(df)
    if seq_bad:
        report = report.add(seq_bad)
    df.insert(1, "t", pd.to_timedelta(df["t_ms"], unit="ms").astype("timedelta64[ns]"))
    check_report(report, policy)
    return with_report(df.reset_index(drop=True), report)


def _membership_errors(df: pd.DataFrame) -> tuple[pd.DataFrame, list[BadRow]]:
    """Events that contradict membership: a remove of an absent node, an add
    of a present one. One pass over the events (fleet traces hold hundreds of
    lines, and the answer depends on order, so a plain loop is the clear way)."""
    present: set[str] = set()
    wrong: list[int] = []
    bad: list[BadRow] = []
    for idx, t_ms, event, node, line in zip(
        df.index, df["t_ms"], df["event"], df["node"], df["line"], strict=True
    ):
        if (event == "add") == (node in present):
            wrong.append(idx)
            why = (
                "add of a node already in the fleet"
                if event == "add"
                else ("remove of a node not in the fleet")
            )
            bad.append(BadRow(f"line {line}", why, f"{t_ms},{event},{node}"))
        elif event == "add":
            present.add(node)
        else:
            present.discard(node)
    return df.drop(index=wrong), bad


def node_lifetimes(df: pd.DataFrame) -> pd.DataFrame:
    """One row per node stay: ``node``, ``added`` / ``removed`` (timedelta;
    ``removed`` NaT while still in the fleet at the end), ``lifetime_s``
    (to the last event when not removed) and ``censored`` (not removed)."""
    adds = df[df["event"] == "add"].assign(k=lambda d: d.groupby("node").cumcount())
    rems = df[df["event"] == "remove"].assign(k=lambda d: d.groupby("node").cumcount())
    out = adds[["node", "k", "t"]].merge(
        rems[["node", "k", "t"]], on=["node", "k"], how="left", suffixes=("_add", "_rem")
    )
    end = df["t"].max() if len(df) else pd.Timedelta(0)
    stop = out["t_rem"].fillna(end)
    return pd.DataFrame(
        {
            "node": out["node"],
            "added": out["t_add"],
            "removed": out["t_rem"],
            "lifetime_s": (stop - out["t_add"]).dt.total_seconds(),
            "censored": out["t_rem"].isna(),
        }
    )


def node_count_series(df: pd.DataFrame) -> pd.DataFrame:
    """Fleet size after all events at each distinct time: ``t``, ``nodes``."""
    delta = np.where(df["event"].to_numpy() == "add", 1, -1)
    per_t = pd.Series(delta, index=df["t"]).groupby(level=0).sum()
    return pd.DataFrame({"t": per_t.index, "nodes": per_t.cumsum().to_numpy(np.int64)})


def revocation_times(df: pd.DataFrame) -> pd.Series[pd.Timedelta]:
    """Times of the ``remove`` events (revocations), sorted."""
    return df.loc[df["event"] == "remove", "t"].sort_values().reset_index(drop=True)
