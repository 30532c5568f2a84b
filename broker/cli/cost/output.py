"""Output of ``spotfolio cost ...``: rounding of JSON fields and the tables.

Owns: ``round_field`` (``*_usd`` to cents, ``*_usd_per_unit_hour`` to 4 dp,
everything else to 6 dp), ``with_exact`` (a versioned JSON object with the
rounded fields and the full-precision ``exact`` copy), ``print_table`` (a
two-column rich table) and the number formats (``fmt_usd``, ``fmt_num``:
``unbounded`` for none/infinite).

Must not: compute any cost or read options. rich is imported inside
``print_table`` so that ``spotfolio --help`` stays fast.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from broker.cli._output import console

__all__ = ["fmt_num", "fmt_usd", "print_table", "round_field", "with_exact"]


def round_field(key: str, value: object) -> object:
    if isinstance(value, bool) or not isinstance(value, float) or not math.isfinite(value):
        return value
    if key.endswith("_usd"):
        return round(value, 2)
    if key.endswith("_usd_per_unit_hour"):
        return round(value, 4)
    return round(value, 6)


def with_exact(
    schema: str, fields: Mapping[str, object], extra: Mapping[str, object] | None = None
) -> dict[str, object]:
    out: dict[str, object] = {"schema": schema}
    out.update({k: round_field(k, v) for k, v in fields.items()})
    out.update(extra or {})
    out["exact"] = {
        k: v for k, v in fields.items() if isinstance(v, float) and not isinstance(v, bool)
    }
    return out


def print_table(title: str, rows: list[tuple[str, str]]) -> None:
    from rich.table import Table

    table = Table(title=title, show_header=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    for label, value in rows:
        table.add_row(label, value)
    console.print(table)


def fmt_usd(x: float) -> str:
    return f"-${-x:,.2f}" if x < 0 else f"${x:,.2f}"


def fmt_num(x: float | None, unit: str = "", fmt: str = ",.4g") -> str:
    if x is None or math.isinf(x):
        return "unbounded"
    return f"{x:{fmt}}{unit}"
