"""The sweep's table: one row per scenario, written as one Parquet file by DuckDB.

Owns: ``COLUMNS`` (name, DuckDB type), ``scenario_row`` (a scenario's axis
values and its ``spotfolio whatif --json`` object -> a row) and
``write_parquet``. Every row has every column (a failed scenario: ``error``
set, the figures null), so the file's schema does not depend on the grid.
``result_json`` keeps the whole whatif object (less its ``seconds``, the
only part that changes from run to run): a row is the scenario's result, run
alone, not a summary of it.

Must not: run scenarios (``broker.cli.sweep``) or import pyarrow (DuckDB
writes the Parquet; it is in the ``usage`` extra and imported here lazily).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from broker.atomic import atomic_output
from broker.scale.grid import Scenario

__all__ = ["COLUMNS", "WHATIF_SCENARIOS", "scenario_row", "write_parquet"]

# the whatif's scenarios, each with these figures as columns ``<name>_<figure>``
WHATIF_SCENARIOS = ("on_demand", "committed_quantile", "static_mix", "spotfolio")
_FIGURES = ("total_cost_usd", "unmet_unit_hours", "savings_vs_on_demand")

COLUMNS: tuple[tuple[str, str], ...] = (
    ("scenario", "INTEGER"),
    ("market", "VARCHAR"),
    ("market_options", "VARCHAR"),
    ("demand", "VARCHAR"),
    ("policies", "VARCHAR"),
    ("committed", "VARCHAR"),
    ("interruption_multiplier", "DOUBLE"),
    ("availability_multiplier", "DOUBLE"),
    ("argv", "VARCHAR"),
    ("error", "VARCHAR"),
    ("warnings", "VARCHAR"),
    ("start", "VARCHAR"),
    ("hours", "INTEGER"),
    *((f"{s}_{f}", "DOUBLE") for s in WHATIF_SCENARIOS for f in _FIGURES),
    ("seconds", "DOUBLE"),
    ("result_json", "VARCHAR"),
)


def scenario_row(s: Scenario, outcome: Mapping[str, object]) -> dict[str, object]:
    """``outcome``: ``{"result": whatif JSON | None, "error": str | None,
    "warnings": str, "seconds": float}`` (``broker.cli.sweep.run_scenario``)."""
    result = outcome.get("result")
    doc = dict(result) if isinstance(result, Mapping) else None
    row: dict[str, object] = {
        "scenario": s.index,
        "market": s.market,
        "market_options": ",".join(s.market_options) or None,
        "demand": s.demand,
        "policies": s.policies,
        "committed": s.committed,
        "interruption_multiplier": s.interruption_multiplier,
        "availability_multiplier": s.availability_multiplier,
        "argv": json.dumps(list(s.argv)),
        "error": outcome.get("error"),
        "warnings": outcome.get("warnings") or None,
        "start": None if doc is None else doc.get("start"),
        "hours": None if doc is None else doc.get("hours"),
        "seconds": outcome.get("seconds"),
        "result_json": None,
    }
    by_name: dict[str, Mapping[str, object]] = {}
    if doc is not None:
        doc.pop("seconds", None)
        row["result_json"] = json.dumps(doc, sort_keys=True)
        scen = doc.get("scenarios")
        for r in scen if isinstance(scen, list) else []:
            if isinstance(r, Mapping):
                by_name[str(r.get("name"))] = r
    for name in WHATIF_SCENARIOS:
        for f in _FIGURES:
            v = by_name.get(name, {}).get(f)
            row[f"{name}_{f}"] = float(v) if isinstance(v, int | float) else None
    return row


def write_parquet(rows: Sequence[Mapping[str, object]], path: Path) -> Path:
    """All ``rows`` as one Parquet file at ``path``, written whole or not at all."""
    import duckdb  # lazy: the usage extra (broker.cli.sweep checks it first)

    con = duckdb.connect()
    try:
        con.execute("CREATE TABLE sweep (" + ", ".join(f"{n} {t}" for n, t in COLUMNS) + ")")
        names = [n for n, _ in COLUMNS]
        if rows:
            con.executemany(
                f"INSERT INTO sweep VALUES ({', '.join('?' for _ in names)})",
                [[r.get(n) for n in names] for r in rows],
            )
        with atomic_output(path) as tmp:
            quoted = str(tmp).replace("'", "''")  # COPY takes a literal, not a parameter
            con.execute(
                f"COPY (SELECT * FROM sweep ORDER BY scenario) TO '{quoted}' (FORMAT parquet)"
            )
    finally:
        con.close()
    return path
