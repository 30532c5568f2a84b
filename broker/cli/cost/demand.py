"""The hourly demand and commitment levels ``spotfolio cost reserve`` reads.

Owns: ``read_demand`` (``--demand`` as a comma list of numbers, or a CSV
file: one column, a column named ``demand``, or ``--column NAME``; a header
row when any cell of the first row is not a number) and ``parse_levels``
(``--levels`` as whole units or percentages of peak, rounded half up). Bad
input is an ``InputError`` naming the option, or the file and its line.

Must not: compute any cost.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from markets.errors import InputError
from markets.numbers import MAX_HOURS, MAX_UNITS, Bounded, NumberError

__all__ = ["is_number", "parse_levels", "parse_number", "read_demand"]


# Units of demand in one hour (markets.numbers.MAX_UNITS): beyond it the
# commitment sweep's integer steps overflow int64 (1e308 became negative).
DEMAND_UNITS = Bounded(ge=0, le=MAX_UNITS)


def parse_number(text: str, source: str, field: str) -> float:
    try:
        return float(DEMAND_UNITS.check(text))
    except NumberError as e:
        raise InputError(source, field, str(e), got=text) from None


def _at_most_hours(values: list[float], source: str) -> list[float]:
    if len(values) > MAX_HOURS:
        raise InputError(source, None, f"at most {MAX_HOURS:,} hours of demand", got=len(values))
    return values


def _read_demand_csv(path: Path, column: str | None) -> list[float]:
    src = str(path)
    with path.open(newline="") as fh:
        rows = [(n, row) for n, row in enumerate(csv.reader(fh), 1) if any(c.strip() for c in row)]
    if not rows:
        raise InputError(src, None, "at least one hour of demand")
    first = rows[0][1]
    has_header = any(not is_number(c) for c in first)
    names = [c.strip() for c in first] if has_header else []
    if column is not None:
        if column not in names:
            raise InputError("--column", None, f"one of the CSV columns {names}", got=column)
        idx = names.index(column)
    elif len(first) == 1:
        idx = 0
    elif "demand" in [n.lower() for n in names]:
        idx = [n.lower() for n in names].index("demand")
    else:
        raise InputError(src, "line 1", "one column, a column named 'demand', or --column NAME")
    body = rows[1:] if has_header else rows
    if not body:
        raise InputError(src, None, "at least one hour of demand")
    out = []
    for n, row in body:
        if idx >= len(row):
            raise InputError(src, f"line {n}", f"a value in column {idx + 1}", got=",".join(row))
        out.append(parse_number(row[idx].strip(), src, f"line {n}"))
    return out


def is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_demand(spec: str, column: str | None) -> list[float]:
    items = [s.strip() for s in spec.split(",")]
    if all(is_number(s) for s in items):
        if column is not None:
            raise InputError("--column", None, "a CSV file given to --demand")
        numbers = [parse_number(s, "--demand", f"item {i}") for i, s in enumerate(items, 1)]
        return _at_most_hours(numbers, "--demand")
    try:
        return _at_most_hours(_read_demand_csv(Path(spec), column), spec)
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(
            "--demand", None, "a readable CSV file or a comma list of numbers", got=spec
        ) from e


def parse_levels(spec: str | None, peak: int) -> list[int]:
    if spec is None:
        return []
    out = []
    for i, item in enumerate(s.strip() for s in spec.split(",")):
        pct = item.endswith("%")
        text = item[:-1] if pct else item
        value = parse_number(text, "--levels", f"item {i + 1}") if is_number(text) else -1.0
        if value < 0 or (not pct and value != int(value)):
            raise InputError(
                "--levels", f"item {i + 1}", "whole units or a percentage of peak (40%)", got=item
            )
        if pct and value > 100:
            raise InputError(
                "--levels", f"item {i + 1}", "a percentage of peak up to 100%", got=item
            )
        if not pct and value > MAX_UNITS:
            raise InputError(
                "--levels", f"item {i + 1}", f"at most {MAX_UNITS:,.0f} units", got=item
            )
        # percentages of peak round half up to whole units
        out.append(math.floor(value / 100.0 * peak + 0.5) if pct else int(value))
    return out
