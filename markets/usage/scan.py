"""The DuckDB table expression that reads one export file.

Owns: ``scan_sql`` and ``literal`` (a path as an SQL string literal). CSV is
read as text (``all_varchar``), so a bad value is ours to report with its line,
not the CSV sniffer's guess; Parquet keeps its types.

Must not: run queries (``reader``, ``locate`` do).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["is_parquet", "literal", "scan_sql"]


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def is_parquet(path: Path) -> bool:
    return path.name.lower().endswith(".parquet")


def scan_sql(path: Path, *, row_numbers: bool = False) -> str:
    lit = literal(str(path))
    if is_parquet(path):
        return f"read_parquet({lit}{', file_row_number = true' if row_numbers else ''})"
    return f"read_csv({lit}, header = true, all_varchar = true, auto_detect = true)"
