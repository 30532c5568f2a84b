"""Read billing exports (FOCUS 1.x, CUR 2.0; CSV or Parquet) into ``HourlyUsage``.

Owns: ``read_usage(path, rules)``: finds the export files (a file, or every
``.csv``, ``.csv.gz`` and ``.parquet`` under a directory), recognises each
one's format by its columns (``formats.detect``), validates every line and
aggregates in DuckDB, so a month of a large account (gigabytes, millions of
lines) never becomes a pandas frame: only the aggregate does (charge periods
x workloads x types x tiers, a few thousand rows).

How: one scan per file groups the lines by (check failed, kind, workload,
instance type, region, tier, commitment, charge period), summing
instance-hours and cost; a bad line puts a check number in its group, and the
first such line is then located (``locate``) and reported as an
``InputError`` naming the file, the line (CSV) or row group (Parquet), the
column and the expectation: nothing is returned half-read. The groups of all
files are then spread over the hours their charge periods cover (by overlap)
in a second query over the small grouped table.

Must not: know the planner's units or workloads (``broker.cli._usage``
converts), or decide anything.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd

from markets.errors import InputError
from markets.usage.commitments import HOURLY_SQL, bill_commitments, meta_select
from markets.usage.formats import Columns, Format, columns_for, detect
from markets.usage.locate import locate_bad_row
from markets.usage.model import FRAME_COLUMNS, HourlyUsage, LeftOver, UsageFile
from markets.usage.rules import TEAM_TAG, MappingRules, rules_sql, tag_sql, workload_name
from markets.usage.scan import is_parquet, literal, scan_sql

__all__ = ["SUFFIXES", "export_files", "read_usage"]

SUFFIXES = (".csv", ".csv.gz", ".parquet")
MAX_FILES = 10_000
# A line spanning more than a year is not an hourly usage line of any export
# we know (and would be spread over 8,760+ hours).
MAX_LINE_HOURS = 366 * 24


def export_files(path: Path) -> list[Path]:
    """The export files at ``path`` (one file, or a directory's, sorted)."""
    if not path.exists():
        raise InputError(str(path), None, "an existing export file or directory")
    if path.is_file():
        return [path]
    files = sorted(
        p
        for p in path.rglob("*")
        if p.is_file()
        and p.name.lower().endswith(SUFFIXES)
        and not any(part.startswith(".") for part in p.relative_to(path).parts)
    )
    if not files:
        raise InputError(str(path), None, "a directory holding .csv, .csv.gz or .parquet exports")
    if len(files) > MAX_FILES:
        raise InputError(str(path), None, f"at most {MAX_FILES:,} export files", got=len(files))
    return files


def _connect() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(":memory:")
    con.execute("SET TimeZone = 'UTC'")
    # DuckDB draws a progress bar on stdout for queries over 2 s: it would be
    # mixed into `whatif --json` (progress is the CLI's to show).
    con.execute("SET enable_progress_bar = false")
    return con


def _columns(con: duckdb.DuckDBPyConnection, path: Path) -> tuple[Format, Columns, dict[str, str]]:
    try:
        described = con.execute(f"DESCRIBE SELECT * FROM {scan_sql(path)}").fetchall()
    except duckdb.Error as e:
        kind = "Parquet" if is_parquet(path) else "CSV"
        raise InputError(str(path), None, f"a readable {kind} export", got=_first_line(e)) from e
    types = {str(r[0]): str(r[1]) for r in described}
    fmt, missing = detect(list(types))
    if fmt is None:
        where = "columns" if is_parquet(path) else "line 1"
        raise InputError(
            str(path),
            where,
            "the columns of a FOCUS 1.x export (ChargePeriodStart, ChargePeriodEnd, "
            "ConsumedQuantity, ConsumedUnit) or of CUR 2.0 (line_item_usage_start_date, "
            "line_item_usage_end_date, line_item_usage_amount, line_item_line_item_type)",
            got=f"missing {', '.join(missing)}",
        )
    return fmt, columns_for(fmt, types), types


def _first_line(e: Exception) -> str:
    return str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__


def _group_sql(path: Path, cols: Columns, rules: MappingRules | None) -> tuple[str, list[object]]:
    params: list[object] = []
    workload = rules_sql(rules, cols.roles(), params)
    team = tag_sql(cols.roles()["tags"], TEAM_TAG, params)
    bad = " ".join(f"WHEN {c.bad_sql} THEN {i}" for i, c in enumerate(cols.checks))
    sql = f"""
        WITH l AS (
            SELECT
                CASE {bad} END AS bad,
                {cols.kind} AS kind,
                {cols.start} AS ts,
                {cols.end} AS te,
                {cols.quantity} * ({cols.hours_per_unit}) AS ih,
                {cols.instance_type} AS instance_type,
                {cols.region} AS region,
                {cols.tier} AS tier,
                {cols.commitment} AS commitment,
                {cols.commitment_id} AS cid,
                {workload} AS workload,
                nullif({team}, '') AS team,
                coalesce({cols.cost}, 0.0) AS cost,
                coalesce({cols.billed}, {cols.cost}, 0.0) AS billed
            FROM {scan_sql(path)}
        )
        SELECT bad, kind, ts, te, instance_type, region, tier, commitment, cid, workload, team,
               ih IS NOT NULL AS timed,
               sum(coalesce(ih, 0.0)) AS ih, sum(cost) AS cost, sum(billed) AS billed,
               count(*) AS n
        FROM l
        GROUP BY ALL
    """
    return sql, params


def _read_file(
    con: duckdb.DuckDBPyConnection, path: Path, rules: MappingRules | None, first: bool
) -> UsageFile:
    fmt, cols, types = _columns(con, path)
    sql, params = _group_sql(path, cols, rules)
    verb = "CREATE TEMP TABLE g AS" if first else "INSERT INTO g"
    try:
        con.execute(f"{verb} SELECT {literal(str(path))} AS file, * FROM ({sql})", params)
        bad = con.execute(
            "SELECT min(bad) FROM g WHERE file = ? AND bad IS NOT NULL", [str(path)]
        ).fetchone()
    except duckdb.Error as e:
        raise InputError(str(path), None, f"a readable {fmt} export", got=_first_line(e)) from e
    if bad is not None and bad[0] is not None:
        check = cols.checks[int(bad[0])]
        where, got = locate_bad_row(con, path, check)
        raise InputError(str(path), where, check.expected, got=got)
    long = con.execute(
        "SELECT min(ts) FROM g WHERE file = ? AND kind = 'usage' AND timed "
        "AND epoch(te) - epoch(ts) > ?",
        [str(path), MAX_LINE_HOURS * 3600],
    ).fetchone()
    if long is not None and long[0] is not None:
        c = cols.checks[2]  # the end-after-start check names the end column
        raise InputError(
            str(path),
            f"column {c.column}",
            f"usage lines of at most {MAX_LINE_HOURS:,} hours",
            got=f"a line from {long[0].isoformat()}",
        )
    counts = con.execute(
        "SELECT sum(n), sum(n) FILTER (kind = 'usage' AND timed AND instance_type IS NOT NULL) "
        "FROM g WHERE file = ?",
        [str(path)],
    ).fetchone()
    lines, usage = (int(counts[0] or 0), int(counts[1] or 0)) if counts else (0, 0)
    meta = meta_select(fmt, types, cols, scan_sql(path))
    if meta is not None:
        try:
            con.execute(f"INSERT INTO cm {meta}")
        except duckdb.Error as e:
            raise InputError(str(path), None, f"a readable {fmt} export", got=_first_line(e)) from e
    return UsageFile(str(path), str(fmt), lines, usage)


_TEAMS_SQL = """
    SELECT workload, team, sum(ih) FROM g
    WHERE kind = 'usage' AND timed AND instance_type IS NOT NULL AND team IS NOT NULL
    GROUP BY 1, 2 ORDER BY 1, 2
"""

_SPREAD_SQL = """
    WITH u AS (
        SELECT workload, instance_type, region, tier, commitment, ts, te,
               sum(ih) AS ih, sum(cost) AS cost, sum(billed) AS billed
        FROM g
        WHERE kind = 'usage' AND timed AND instance_type IS NOT NULL
        GROUP BY ALL
    ), h AS (
        SELECT *, unnest(range(date_trunc('hour', ts), te, INTERVAL 1 HOUR)) AS hour FROM u
    )
    SELECT hour, workload, instance_type, region, tier, commitment,
           sum(ih * w) AS instance_hours, sum(cost * w) AS cost_usd,
           sum(billed * w) AS billed_usd
    FROM (
        SELECT *, (epoch(least(hour + INTERVAL 1 HOUR, te)) - epoch(greatest(hour, ts)))
                  / (epoch(te) - epoch(ts)) AS w
        FROM h
    )
    GROUP BY ALL
    ORDER BY hour, workload, instance_type, region, tier
"""

_CM_TABLE = """
    CREATE TEMP TABLE cm (
        cid VARCHAR, instance_type VARCHAR, region VARCHAR, ctype VARCHAR, category VARCHAR,
        cname VARCHAR, provider VARCHAR, cstart VARCHAR, cend VARCHAR, term VARCHAR,
        payment VARCHAR, family VARCHAR, scope_region VARCHAR, rate DOUBLE, count DOUBLE,
        used_ih DOUBLE, used_cost DOUBLE, unused_ih DOUBLE, unused_cost DOUBLE,
        fee_cost DOUBLE, fee_hours DOUBLE, first_seen TIMESTAMPTZ, last_seen TIMESTAMPTZ
    )
"""

_LEFT_OVER_SQL = """
    SELECT CASE
             WHEN kind = 'unused' THEN 'unused commitment'
             WHEN kind = 'usage' AND timed THEN 'hourly usage with no instance type'
             WHEN kind = 'usage' THEN 'usage not counted in time (storage, requests, ...)'
             ELSE 'not usage (fees, purchases, credits, taxes, corrections)'
           END AS what,
           sum(n) AS lines, sum(ih) AS hours, sum(cost) AS cost
    FROM g
    WHERE NOT (kind = 'usage' AND timed AND instance_type IS NOT NULL)
    GROUP BY 1 ORDER BY 1
"""


def read_usage(path: str | Path, rules: MappingRules | None = None) -> HourlyUsage:
    """Hourly usage per workload from the export(s) at ``path`` (see the module
    docstring); ``rules`` maps lines to workloads (``None``: the default
    mapping). Any bad line raises one ``InputError``."""
    root = Path(path)
    files = export_files(root)
    con = _connect()
    try:
        con.execute(_CM_TABLE)
        read = tuple(_read_file(con, f, rules, i == 0) for i, f in enumerate(files))
        frame = con.execute(_SPREAD_SQL).df()
        left = [
            LeftOver(str(w), int(n), float(h or 0.0), float(c or 0.0))
            for w, n, h, c in con.execute(_LEFT_OVER_SQL).fetchall()
        ]
        unused = dict(
            con.execute(
                "SELECT coalesce(commitment, 'commitment'), sum(ih) FROM g "
                "WHERE kind = 'unused' GROUP BY 1 ORDER BY 1"
            ).fetchall()
        )
        cur = con.execute("SELECT * FROM cm")
        fields = [d[0] for d in cur.description]
        meta_rows = [dict(zip(fields, r, strict=True)) for r in cur.fetchall()]
        teams = con.execute(_TEAMS_SQL).fetchall()
        peaks = {str(k): float(v or 0.0) for k, v in con.execute(HOURLY_SQL).fetchall()}
    finally:
        con.close()
    if frame.empty:
        raise InputError(
            str(root),
            None,
            "usage lines in hours with an instance type (FOCUS ChargeCategory Usage, CUR "
            "Usage / SavingsPlanCoveredUsage / DiscountedUsage)",
            got=f"{sum(f.lines for f in read):,} lines, none of them instance usage",
        )
    frame = _named(frame[list(FRAME_COLUMNS)])
    names = {
        workload_name(str(raw)): str(raw)
        for raw in frame.attrs.pop("raw_names")
        if workload_name(str(raw)) != raw
    }
    start = frame["hour"].min()
    hours = int((frame["hour"].max() - start) // pd.Timedelta(hours=1)) + 1
    return HourlyUsage(
        source=str(root),
        mapped_by="the workload tag, else the instance type" if rules is None else "mapping rules",
        files=read,
        start=start.to_pydatetime(),
        hours=hours,
        frame=frame,
        unmatched=None if rules is None else rules.unmatched,
        left_over=tuple(left),
        unused_commitment_hours={str(k): float(v) for k, v in unused.items()},
        names=names,
        commitments=bill_commitments(meta_rows, peaks),
        teams=_teams(teams),
    )


def _teams(rows: list[tuple[object, object, object]]) -> dict[str, str]:
    """Each workload's team tag: the one on most of its instance-hours."""
    best: dict[str, tuple[float, str]] = {}
    for w, team, ih in rows:
        name, hours = workload_name(str(w)), float(ih or 0.0)  # type: ignore[arg-type]
        if name not in best or hours > best[name][0]:
            best[name] = (hours, str(team))
    return {k: v[1] for k, v in best.items()}


def _named(frame: pd.DataFrame) -> pd.DataFrame:
    """Workload names made valid (``p3.2xlarge`` -> ``p3-2xlarge``), times UTC."""
    out = frame.copy()
    raw = pd.unique(out["workload"])
    out["workload"] = out["workload"].map({r: workload_name(str(r)) for r in raw})
    out["hour"] = pd.to_datetime(out["hour"], utc=True)
    out.attrs["raw_names"] = list(raw)
    return out
