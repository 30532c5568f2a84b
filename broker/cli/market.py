"""``spotfolio market ...``: record market history, and show a market at a time.

Owns: ``market fetch aws`` (spot price history from the EC2 API into a file
the replay market reads: Parquet for a ``.parquet`` path when pyarrow is
importable, else CSV / CSV.gz) and ``market show`` (one snapshot of a market:
the embedded ``default``, another registered name, or a recorded FILE or DIR
through the replay market). Must not: compute prices or hazards itself (the
markets do). pandas, numpy and the market adapters are imported inside the
commands so that ``spotfolio --help`` stays fast.

JSON output (``--json``), stable schemas named by the ``schema`` key; times are
ISO 8601 UTC; ``null`` = not known.

``spotfolio.market.show/1``: ``source`` (what was opened), ``market`` (its
registry name), ``at``, ``stale``, ``span`` (``start``, ``end``, or null for
a market without a time axis), ``pools_total``, ``pools_shown`` and ``pools``,
a list (sorted as ``--sort``, cut to ``--limit``) of pool objects:

  ``pool_key``, ``provider``, ``region``, ``zone``, ``instance_type``,
  ``units`` (capacity units per instance: GPUs, or vCPUs), ``gpus``,
  ``gpu_model``, ``on_demand_usd_per_hour``, ``spot_usd_per_hour``,
  ``committed_1y_usd_per_hour``, ``committed_3y_usd_per_hour`` (per instance),
  ``on_demand_usd_per_unit_hour``, ``spot_usd_per_unit_hour``,
  ``spot_discount`` (0.65 = 65 % off on-demand), ``placement_score`` (1-10),
  ``hazard`` (``rate_per_hour``, ``source``: observed|advisor|model|assumed,
  ``confidence`` 0-1, ``observed_hours``, ``events``, ``ci_low_per_hour``,
  ``ci_high_per_hour``: the last three null where the market gives no
  posterior), ``available_share`` (share of recent time spot could be held),
  ``spot_available``, ``price`` (the spot price's movement over the trailing
  4 weeks, ``markets.price_analytics``; null where the market does not know it
  or spot comes from a fallback: ``regime_usd_per_hour``, ``regime_since``,
  ``shifts``, ``last_shift`` (relative), ``weekly_volatility`` (of the log
  price), ``margin_usd_per_hour``, ``planning_usd_per_hour`` (what a plan
  prices spot at), ``window_hours``), ``zone_spread`` (spot across the zones of
  the pool's type in its region: ``zones``, ``spread`` (max / min - 1),
  ``cheapest_zone``, ``premium`` (this pool over the cheapest); null with
  fewer than two priced zones), ``clustering`` (the pool's zone: ``zone``,
  ``probability`` that a revocation is followed by another in the zone within
  ``effective_window_s``, ``events``, ``baseline`` (the same under
  independence); null without revocation data), ``observed_at``, and
  ``sources`` (replay only, else null: ``spot``, ``on_demand``, ``committed``
  name the input or fallback that answered; ``origins``: the datasets that
  made the pool; ``traces``: trace ids).

``calibration`` (replay with traces only, else null): the hazard's calibration
on held-back trace periods, ``markets.hazard.holdout.CalibrationJson``
(coverage of the 90 % predictive interval, log-likelihoods against the advisor
prior and a pooled rate, per pool); over every trace whole, whatever ``--at``.

``datasets`` (replay only, else []): per dataset found (``markets.files.datadir``):
``name``, ``files``, ``rows``, ``rows_bad``, ``start``, ``end``, ``regions``,
``zones``, ``instance_types``. ``left_out``: per reason, ``count`` and up to
five ``examples`` of pool candidates the replay market could not type, price
or place. ``skipped_files``, ``load_seconds``.

``spotfolio.market.fetch/1``: ``out``, ``format`` (csv|parquet), ``rows``,
``regions``, ``instance_types``, ``zones``, ``start``, ``end`` (the window
asked), ``first_change``, ``last_change`` (null without rows),
``skipped_rows`` (API rows that did not validate, per reason).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypedDict, runtime_checkable

import click

from broker.cli._numbers import ranged
from broker.cli._output import console, emit_json, err_console
from markets.clock import SystemClock
from markets.errors import InputError
from markets.extras import needs_extra
from markets.numbers import MAX_COUNT
from markets.price_analytics import ZoneSpread, zone_spreads
from markets.protocols import HistorySource, PriceSource
from markets.registry import open_market

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    from numpy.typing import NDArray
    from rich.console import Console

    from markets.files.datadir import DataInventory, DatasetJson
    from markets.hazard.clustering import Clustering
    from markets.hazard.holdout import CalibrationJson
    from markets.model import MarketSnapshot, PoolSnapshot
    from markets.replay import PoolDetail

__all__ = ["group"]

TABLE_ROWS = 30  # --limit default for the table; --json shows every pool unless --limit
TABLE_WIDTH = 240  # columns when stdout is not a terminal
SORTS = ("key", "spot", "discount", "hazard", "share")
MAX_FETCH_DAYS = 90.0  # DescribeSpotPriceHistory keeps 90 days (EC2 API reference)
_TRAILING = timedelta(days=7)  # clustering window for markets without recorded traces


@runtime_checkable
class _WithDetails(Protocol):
    """A market that says where each pool's figures came from (the replay market)."""

    inventory: DataInventory | None
    left_out: dict[str, list[str]]

    def snapshot(self, at: datetime | None = None) -> MarketSnapshot: ...

    def snapshot_with_details(
        self, at: datetime | None = None
    ) -> tuple[MarketSnapshot, list[PoolDetail]]: ...


@runtime_checkable
class _WithRevocations(Protocol):
    """A market that exposes its revocation events (the default market)."""

    def revocation_events(
        self, pool_key: str, start: datetime, end: datetime
    ) -> pd.DatetimeIndex: ...


class _HazardJson(TypedDict):
    rate_per_hour: float
    source: str
    confidence: float
    observed_hours: float
    events: int | None
    ci_low_per_hour: float | None
    ci_high_per_hour: float | None


class _ClusteringJson(TypedDict):
    zone: str
    probability: float | None
    events: int
    effective_window_s: float
    baseline: float | None


class _PriceJson(TypedDict):
    regime_usd_per_hour: float
    regime_since: str | None
    shifts: int
    last_shift: float | None
    weekly_volatility: float
    margin_usd_per_hour: float
    planning_usd_per_hour: float
    window_hours: float


class _SpreadJson(TypedDict):
    zones: int
    spread: float
    cheapest_zone: str
    premium: float | None


class _SourcesJson(TypedDict):
    spot: str
    on_demand: str
    committed: str
    origins: list[str]
    traces: list[str]


class _PoolJson(TypedDict):
    pool_key: str
    provider: str
    region: str
    zone: str
    instance_type: str
    units: int
    gpus: int
    gpu_model: str | None
    on_demand_usd_per_hour: float
    spot_usd_per_hour: float | None
    committed_1y_usd_per_hour: float | None
    committed_3y_usd_per_hour: float | None
    on_demand_usd_per_unit_hour: float
    spot_usd_per_unit_hour: float | None
    spot_discount: float | None
    placement_score: int | None
    hazard: _HazardJson
    available_share: float | None
    spot_available: bool
    price: _PriceJson | None
    zone_spread: _SpreadJson | None
    clustering: _ClusteringJson | None
    observed_at: str | None
    sources: _SourcesJson | None


class _SpanJson(TypedDict):
    start: str
    end: str


class _LeftOutJson(TypedDict):
    count: int
    examples: list[str]


class _ShowJson(TypedDict):
    """``spotfolio.market.show/1`` (the module docstring)."""

    schema: str
    source: str
    market: str
    at: str | None
    stale: bool
    span: _SpanJson | None
    pools_total: int
    pools_shown: int
    pools: list[_PoolJson]
    calibration: CalibrationJson | None
    datasets: list[DatasetJson]
    left_out: dict[str, _LeftOutJson]
    skipped_files: list[str]
    load_seconds: float | None


@click.group(name="market", help="Record market history; show a market's pools at a time.")
def group() -> None:
    pass


# -- fetch ----------------------------------------------------------------------------


def _names(values: tuple[str, ...]) -> list[str]:
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


@group.command(name="fetch", help="Fetch spot price history into a file `market show` reads.")
@click.argument("provider", type=click.Choice(["aws"]))
@click.option("--regions", multiple=True, required=True, help="Regions (repeat or comma-separate).")
@click.option("--instance-types", multiple=True, required=True, help="Instance types.")
@click.option(
    "--days", type=ranged(gt=0, le=366), default=7.0, show_default=True, help="History to fetch."
)
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Output: .csv, .csv.gz, or .parquet (needs pyarrow).",
)
@click.option("--endpoint-url", default=None, help="EC2 endpoint (a VPC endpoint, a test server).")
@click.option("--profile", default=None, help="AWS credentials profile.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
def fetch(
    provider: str,
    regions: tuple[str, ...],
    instance_types: tuple[str, ...],
    days: float,
    out: Path,
    endpoint_url: str | None,
    profile: str | None,
    as_json: bool,
) -> None:
    # lazy: botocore and pandas, for this command only (``spotfolio --help``,
    # ``whatif`` and ``market show`` must not import an SDK)
    import pandas as pd

    with needs_extra("provider", got=provider):
        from markets.aws.inventory import fetch_zones
        from markets.aws.market import AwsMarket
        from markets.aws.spot import fetch_spot_history
    from markets.files.prices import PRICE_COLUMNS, parquet_available, write_price_history

    if not (math.isfinite(days) and 0 < days <= MAX_FETCH_DAYS):
        raise InputError("--days", None, f"days > 0 and <= {MAX_FETCH_DAYS:g}", got=days)
    if not out.parent.is_dir():
        raise InputError("--out", None, "a file in an existing directory", got=str(out))
    if out.suffix == ".parquet" and not parquet_available():
        raise InputError("--out", None, "a .csv path (Parquet needs pyarrow, not installed)")
    market = open_market(
        provider,
        regions=_names(regions),
        instance_types=_names(instance_types),
        endpoint_url=endpoint_url,
        profile=profile,
    )
    if not isinstance(market, AwsMarket):
        raise TypeError(f"market {provider!r} is not the AWS market: {type(market).__name__}")
    end = SystemClock().now()
    start = end - timedelta(days=days)
    rows: list[dict[str, object]] = []
    zones: list[str] = []
    times: list[datetime] = []
    for region in market.regions:
        client = market.ec2_clients[region]
        names = [z.name for z in fetch_zones(client, region, market.skipped)]
        zones += names
        for p in fetch_spot_history(
            client, region, market.requested_types, names, start, end, market.skipped
        ):
            rows.append(
                {
                    "timestamp": p.at,
                    "provider": "aws",
                    "region": region,
                    "zone": p.zone,
                    "instance_type": p.instance_type,
                    "spot_usd_per_hour": p.usd_per_hour,
                }
            )
            times.append(p.at)
    frame = pd.DataFrame(rows, columns=list(PRICE_COLUMNS))
    write_price_history(frame, out)
    if not rows:
        err_console.print(f"[yellow]no spot price rows for {market.requested_types}[/]")
    summary = {
        "schema": "spotfolio.market.fetch/1",
        "out": str(out),
        "format": "parquet" if out.suffix == ".parquet" else "csv",
        "rows": len(rows),
        "regions": list(market.regions),
        "instance_types": list(market.requested_types),
        "zones": sorted(zones),
        "start": start.isoformat(),
        "end": end.isoformat(),
        "first_change": min(times).isoformat() if times else None,
        "last_change": max(times).isoformat() if times else None,
        "skipped_rows": market.skipped.by_reason(),
    }
    if as_json:
        emit_json(summary)
        return
    console.print(
        f"wrote {len(rows)} spot price changes ({len(market.requested_types)} types, "
        f"{len(zones)} zones, {days:g} days) to {out}"
    )


# -- show -----------------------------------------------------------------------------


def _parse_at(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InputError(
            "--at", None, "an ISO 8601 time such as 2023-03-01T12:00Z", got=text
        ) from None
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def _open(source: str, gpu_only: bool) -> PriceSource:
    return open_market(source, "--source", gpu_only=gpu_only)


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at is not None else None


def _clustering_json(zone: str, c: Clustering | None) -> _ClusteringJson | None:
    if c is None:
        return None
    return {
        "zone": zone,
        "probability": c.probability,
        "events": c.events,
        "effective_window_s": c.effective_window_s,
        "baseline": c.baseline,
    }


def _model_clustering(market: PriceSource, snap: MarketSnapshot) -> dict[str, Clustering]:
    """Zone clustering over the trailing week of a market that exposes its
    revocation events (the default market)."""
    # lazy: numpy; ``spotfolio --help`` imports this module
    import numpy as np

    from markets.hazard.clustering import clustering

    if not isinstance(market, _WithRevocations):
        return {}
    start = snap.at - _TRAILING
    by_zone: dict[str, list[NDArray[np.float64]]] = {}
    for p in snap.pools:
        ev = market.revocation_events(p.pool.key, start, snap.at)
        by_zone.setdefault(f"{p.pool.provider.value}/{p.pool.zone}", []).append(ev.asi8 / 1e9)
    return {
        z: clustering(np.concatenate(parts), span_s=_TRAILING.total_seconds())
        for z, parts in by_zone.items()
    }


def _calibration(
    inv: DataInventory | None, details: list[PoolDetail | None]
) -> CalibrationJson | None:
    """The hazard calibration over the replay market's traces (null without)."""
    # lazy: scipy; ``spotfolio --help`` imports this module
    from markets.hazard.holdout import CalibrationTrace, calibrate

    if inv is None or not inv.spot_traces:
        return None
    priors = {d.pool_key: d.hazard.prior for d in details if d is not None}
    return calibrate(CalibrationTrace.from_spot_traces(inv.spot_traces, priors)).to_json()


def _price_json(p: PoolSnapshot) -> _PriceJson | None:
    r = p.spot_risk
    if r is None:
        return None
    return {
        "regime_usd_per_hour": r.regime_usd_per_hour,
        "regime_since": _iso(r.regime_since),
        "shifts": r.shifts,
        "last_shift": r.last_shift,
        "weekly_volatility": r.weekly_volatility,
        "margin_usd_per_hour": r.margin_usd_per_hour,
        "planning_usd_per_hour": r.planning_usd_per_hour,
        "window_hours": r.window_hours,
    }


def _spread_json(
    p: PoolSnapshot, spreads: dict[tuple[str, str, str], ZoneSpread]
) -> _SpreadJson | None:
    s = spreads.get((p.pool.provider.value, p.pool.region, p.pool.instance_type))
    if s is None:
        return None
    return {
        "zones": s.zones,
        "spread": s.spread,
        "cheapest_zone": s.cheapest_zone,
        "premium": None if p.spot_usd_per_hour is None else s.premium(p.spot_usd_per_hour),
    }


def _pool_json(
    p: PoolSnapshot,
    detail: PoolDetail | None,
    clusters: dict[str, Clustering],
    spreads: dict[tuple[str, str, str], ZoneSpread],
) -> _PoolJson:
    zone = f"{p.pool.provider.value}/{p.pool.zone}"
    est = detail.hazard if detail else None
    c = detail.zone_clustering if detail else clusters.get(zone)
    return {
        "pool_key": p.pool.key,
        "provider": p.pool.provider.value,
        "region": p.pool.region,
        "zone": p.pool.zone,
        "instance_type": p.pool.instance_type,
        "units": p.instance.units,
        "gpus": p.instance.gpus,
        "gpu_model": p.instance.gpu_model,
        "on_demand_usd_per_hour": p.on_demand_usd_per_hour,
        "spot_usd_per_hour": p.spot_usd_per_hour,
        "committed_1y_usd_per_hour": p.committed_1y_usd_per_hour,
        "committed_3y_usd_per_hour": p.committed_3y_usd_per_hour,
        "on_demand_usd_per_unit_hour": p.on_demand_usd_per_hour / p.instance.units,
        "spot_usd_per_unit_hour": None
        if p.spot_usd_per_hour is None
        else p.spot_usd_per_hour / p.instance.units,
        "spot_discount": p.spot_discount,
        "placement_score": p.placement_score,
        "hazard": {
            "rate_per_hour": p.hazard.rate_per_hour,
            "source": p.hazard.source.value,
            "confidence": p.hazard.confidence,
            "observed_hours": p.hazard.observed_hours,
            "events": est.events if est else None,
            "ci_low_per_hour": est.ci_low_per_hour if est else None,
            "ci_high_per_hour": est.ci_high_per_hour if est else None,
        },
        "available_share": p.available_share,
        "spot_available": p.spot_available,
        "price": _price_json(p),
        "zone_spread": _spread_json(p, spreads),
        "clustering": _clustering_json(zone, c),
        "observed_at": _iso(p.observed_at),
        "sources": None
        if detail is None
        else {
            "spot": detail.spot_source,
            "on_demand": detail.on_demand_source,
            "committed": detail.committed_source,
            "origins": list(detail.origins),
            "traces": list(detail.traces),
        },
    }


def _sort_key(sort: str) -> Callable[[_PoolJson], tuple[bool, float, str]]:
    def key(row: _PoolJson) -> tuple[bool, float, str]:
        value = {
            "key": 0.0,
            "spot": row["spot_usd_per_unit_hour"],
            "discount": None if row["spot_discount"] is None else -row["spot_discount"],
            "hazard": row["hazard"]["rate_per_hour"],
            "share": None if row["available_share"] is None else -row["available_share"],
        }[sort]
        return (value is None, value or 0.0, row["pool_key"])  # unknowns last

    return key


@group.command(name="show", help="Pools of a market at a time: prices, risk, data coverage.")
@click.option(
    "--source",
    default="default",
    show_default=True,
    help="default (embedded market), another market name, or a recorded FILE or DIR.",
)
@click.option(
    "--at",
    "at_text",
    default=None,
    help="ISO 8601 time (UTC if no offset); default: the market's latest.",
)
@click.option(
    "--limit",
    type=ranged(ge=1, le=MAX_COUNT, integer=True),
    default=None,
    help=f"Pools to list (default {TABLE_ROWS} in the table, all with --json).",
)
@click.option(
    "--sort",
    type=click.Choice(SORTS),
    default="key",
    show_default=True,
    help="Order: pool key, spot $/unit-hour, discount, hazard, available share.",
)
@click.option("--match", default=None, help="Only pools whose key contains this text.")
@click.option("--gpu-only", is_flag=True, help="Replay: GPU pools only (no CPU trace pools).")
@click.option(
    "--json", "as_json", is_flag=True, help="Print JSON (schema spotfolio.market.show/1)."
)
def show(
    source: str,
    at_text: str | None,
    limit: int | None,
    sort: str,
    match: str | None,
    gpu_only: bool,
    as_json: bool,
) -> None:
    at = _parse_at(at_text)
    market = _open(source, gpu_only)
    details: list[PoolDetail | None]
    inv: DataInventory | None = None
    left: dict[str, list[str]] = {}
    if isinstance(market, _WithDetails):
        snap, with_details = market.snapshot_with_details(at)
        details = list(with_details)
        clusters: dict[str, Clustering] = {}
        inv, left = market.inventory, market.left_out
    else:
        snap = market.snapshot(at)
        details = [None] * len(snap.pools)
        clusters = _model_clustering(market, snap)
    spreads = zone_spreads(snap.pools)
    rows = [
        _pool_json(p, d, clusters, spreads)
        for p, d in zip(snap.pools, details, strict=True)
        if match is None or match in p.pool.key
    ]
    rows.sort(key=_sort_key(sort))
    shown = rows[: limit or (len(rows) if as_json else TABLE_ROWS)]
    span = market.span() if isinstance(market, HistorySource) else None
    out: _ShowJson = {
        "schema": "spotfolio.market.show/1",
        "source": snap.source,
        "market": market.name,
        "at": _iso(snap.at),
        "stale": snap.stale,
        "span": {"start": span[0].isoformat(), "end": span[1].isoformat()} if span else None,
        "pools_total": len(rows),
        "pools_shown": len(shown),
        "pools": shown,
        "calibration": _calibration(inv, details),
        "datasets": [d.to_dict() for d in inv.datasets] if inv else [],
        "left_out": {k: {"count": len(v), "examples": v[:5]} for k, v in left.items()},
        "skipped_files": list(inv.skipped) if inv else [],
        "load_seconds": round(inv.load_seconds, 3) if inv else None,
    }
    if as_json:
        emit_json(out)
        return
    _render(out)


def _fmt(x: float | None, fmt: str = ".3f", prefix: str = "") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{prefix}{x:{fmt}}"


def _render(out: _ShowJson) -> None:
    from rich.console import Console
    from rich.table import Table

    # A pipe or a file is not a narrow terminal: do not wrap the tables in 80 columns.
    con = console if console.is_terminal else Console(width=TABLE_WIDTH)
    span = out["span"]
    con.print(
        f"[bold]{out['source']}[/] at {out['at']}"
        + (f"  (data {span['start'][:10]} .. {span['end'][:10]})" if span else "")
        + ("  [red]STALE[/]" if out["stale"] else "")
    )
    if out["datasets"]:
        ds = Table(title="datasets", title_justify="left")
        for col in ("dataset", "files", "rows", "bad", "start", "end", "zones", "types"):
            ds.add_column(col, justify="left" if col in ("dataset", "start", "end") else "right")
        for d in out["datasets"]:
            ds.add_row(
                d["name"],
                str(len(d["files"])),
                f"{d['rows']:,}",
                str(d["rows_bad"]),
                (d["start"] or "-")[:16],
                (d["end"] or "-")[:16],
                str(len(d["zones"])),
                str(len(d["instance_types"])),
            )
        con.print(ds)
    table = Table(
        title=f"pools ({out['pools_shown']} of {out['pools_total']})", title_justify="left"
    )
    for col in (
        "pool",
        "units",
        "od $/h",
        "1y $/h",
        "3y $/h",
        "spot $/h",
        "disc",
        "score",
        "vol/wk",
        "plan $/h",
        "spread",
        "hazard/h",
        "90% interval",
        "hazard src",
        "avail",
        "clust",
        "observed",
    ):
        left = col in ("pool", "hazard src", "observed")
        table.add_column(col, justify="left" if left else "right", no_wrap=col == "pool")
    for r in out["pools"]:
        hz = r["hazard"]
        clust = r["clustering"]["probability"] if r["clustering"] else None
        table.add_row(
            r["pool_key"],
            str(r["units"]),
            _fmt(r["on_demand_usd_per_hour"], ".4g"),
            _fmt(r["committed_1y_usd_per_hour"], ".4g"),
            _fmt(r["committed_3y_usd_per_hour"], ".4g"),
            _fmt(r["spot_usd_per_hour"], ".4g"),
            _fmt(r["spot_discount"], ".0%"),
            _fmt(r["placement_score"], "d"),
            _fmt(r["price"]["weekly_volatility"] if r["price"] else None, ".1%"),
            _fmt(r["price"]["planning_usd_per_hour"] if r["price"] else None, ".4g"),
            _fmt(r["zone_spread"]["spread"] if r["zone_spread"] else None, ".0%"),
            _fmt(hz["rate_per_hour"], ".2g"),
            _interval(hz["ci_low_per_hour"], hz["ci_high_per_hour"]),
            f"{hz['source']} {hz['confidence']:.2f}",
            _fmt(r["available_share"], ".2f"),
            _fmt(clust, ".2f"),
            (r["observed_at"] or "-")[:16],
        )
    con.print(table)
    if out["pools_shown"] < out["pools_total"]:
        con.print(f"{out['pools_total'] - out['pools_shown']} more pools: raise --limit")
    for reason, info in out["left_out"].items():
        con.print(f"left out: {info['count']} ({reason}), e.g. {', '.join(info['examples'])}")
    if out["calibration"] is not None:
        _render_calibration(con, out["calibration"])


def _interval(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return "-"
    # a prior's lower bound can be 1e-108: zero at any precision a reader uses
    return f"{low if low >= 1e-6 else 0:.2g}-{high:.2g}"


def _render_calibration(con: Console, c: CalibrationJson) -> None:
    if c["coverage"] is None:
        con.print(
            f"hazard calibration: not measured ({c['traces']} traces, "
            f"{c['test_periods']} held-back periods of {c['period_hours']:g} h)"
        )
        return
    cov, plain = c["coverage"], c["coverage_plain"]
    lo, hi = c["coverage_target"]
    met = {True: "[green]met[/]", False: "[red]NOT met[/]", None: "-"}[c["coverage_target_met"]]
    con.print(
        f"hazard calibration: fit on the first {c['train_share']:.0%} of {c['traces']} traces, "
        f"{c['test_periods']} held-back pool-periods of {c['period_hours']:g} h: "
        f"{c['level']:.0%} intervals cover {_fmt(cov, '.1%')} (target {lo:.0%}-{hi:.0%}: {met}; "
        f"without over-dispersion {_fmt(plain, '.1%')}, fitted NB size "
        f"{_fmt(c['dispersion_size'], '.3g')})"
    )
    ll = c["log_likelihood_per_period"]
    con.print(
        "  log-likelihood per held-back period: "
        + ", ".join(f"{k.replace('_', ' ')} {v:.2f}" for k, v in ll.items())
    )
