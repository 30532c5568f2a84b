"""Where a bad line of an export is: its CSV line, or its Parquet row group.

Owns: ``locate_bad_row(con, path, check)`` -> (where, the value as written).
Only the error path comes here, after the fast scan found a bad line.

CSV: DuckDB gives the bad line's values; the file is then read again with
Python's ``csv`` module, which counts physical lines (a quoted field may span
several), up to the first line holding those values: that is the line named.
Parquet: ``file_row_number`` gives the row; ``parquet_metadata`` the row
groups' sizes, hence the row group (0-based, as Parquet tools number them).

Must not: decide whether a value is bad (``formats.Check`` does, in SQL).
"""

from __future__ import annotations

import csv
import gzip
import io
from collections.abc import Iterator
from pathlib import Path

import duckdb

from markets.usage.formats import Check
from markets.usage.scan import is_parquet, literal, scan_sql

__all__ = ["locate_bad_row"]


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def locate_bad_row(con: duckdb.DuckDBPyConnection, path: Path, check: Check) -> tuple[str, object]:
    """``("line 17, column X" | "row group 2 (row 40,001), column X", value)``."""
    col = f"column {check.column}"
    if is_parquet(path):
        row = con.execute(
            f"SELECT file_row_number, CAST({_q(check.column)} AS VARCHAR) "
            f"FROM {scan_sql(path, row_numbers=True)} WHERE {check.bad_sql} "
            "ORDER BY file_row_number LIMIT 1"
        ).fetchone()
        if row is None:
            return col, None
        number = int(row[0])
        lit = literal(str(path))
        sizes = con.execute(
            f"SELECT row_group_id, max(row_group_num_rows) FROM parquet_metadata({lit}) "
            "GROUP BY 1 ORDER BY 1"
        ).fetchall()
        group, seen = 0, 0
        for gid, n in sizes:
            if number < seen + int(n):
                group = int(gid)
                break
            seen += int(n)
        return f"row group {group} (row {number + 1:,}), {col}", row[1]
    described = con.execute(f"DESCRIBE SELECT * FROM {scan_sql(path)}").fetchall()
    names = [str(r[0]) for r in described]
    row = con.execute(f"SELECT * FROM {scan_sql(path)} WHERE {check.bad_sql} LIMIT 1").fetchone()
    if row is None:
        return col, None
    wanted = [None if v is None else str(v).strip() or None for v in row]
    got = wanted[names.index(check.column)]
    for line, cells in _csv_lines(path):
        if len(cells) != len(names):
            continue
        if [c.strip() or None for c in cells] == wanted:
            return f"line {line}, {col}", got
    return col, got


def _csv_lines(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(physical line number, cells) of every row after the header."""
    gz = path.name.lower().endswith(".gz")
    with (
        gzip.open(path, "rb") if gz else path.open("rb") as raw,
        io.TextIOWrapper(raw, encoding="utf-8-sig", errors="replace", newline="") as fh,
    ):
        reader = csv.reader(fh)
        next(reader, None)
        for cells in reader:
            yield reader.line_num, cells
