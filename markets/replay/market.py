"""The replay market: recorded histories as a ``HistorySource``.

Owns: ``ReplayMarket`` (snapshot, hourly, span, aligned views, per-pool
provenance in ``PoolDetail``) and ``open_replay_market`` (registered as
``replay``). The join rules, fallbacks and time semantics are documented in
the package docstring (``markets.replay``).

Must not: read files itself (``markets.files.datadir.discover`` does), call a cloud,
or use the wall clock (a snapshot at ``at`` depends only on the data and ``at``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from markets.clock import Clock, ensure_utc
from markets.errors import InputError
from markets.files.datadir import DataInventory, discover
from markets.hazard.clustering import Clustering, failure_domains
from markets.hazard.posterior import HazardEstimate, estimate_hazard
from markets.hazard.prior import ASSUMED_PRIOR, HazardPrior
from markets.model import FailureDomain, InstanceType, MarketSnapshot, Pool, PoolSnapshot
from markets.options import parse_names
from markets.price_analytics import price_risk
from markets.replay import resolve as rv
from markets.replay.build import PoolData, build_pools
from markets.replay.coverage import Coverage, coverage
from markets.replay.series import NS, FloatArray, IntArray

__all__ = ["Align", "PoolDetail", "ReplayMarket", "open_replay_market"]

Align = Literal["absolute", "relative"]
HOUR_NS = 3600 * NS
TRAILING_SHARE_HOURS = 168  # available_share: the last 7 days observed (as the default market)
PLACEMENT_WINDOW_HOURS = 24  # derived placement score: last day's share and the instant
# What a pool's hazard estimate depends on: advisor bucket, evidence
# (events, hours) per trace, available share.
_HazardKey = tuple[int | None, tuple[tuple[int, float], ...], float | None]
_HOW_LABEL = {
    rv.FROM_CATALOG: "",  # replaced by the pool's catalog label
    rv.FROM_TYPE: "same-type discount",
    rv.FROM_ADVISOR: "advisor savings",
    rv.FROM_NONE: "none",
}


@dataclass(frozen=True)
class PoolDetail:
    """Provenance and statistics of one pool at one time (``market show``)."""

    pool_key: str
    origins: tuple[str, ...]
    traces: tuple[str, ...]
    spot_source: str
    on_demand_source: str
    committed_source: str
    hazard: HazardEstimate
    share_window: tuple[datetime, datetime] | None  # what available_share covers
    zone_clustering: Clustering | None
    advisor_bucket: int | None


def _dt(ns: int) -> datetime:
    return pd.Timestamp(ns, tz="UTC").to_pydatetime()


def _ns(at: datetime) -> int:
    return int(pd.Timestamp(ensure_utc(at)).value)


class ReplayMarket:
    """Pools joined from recorded histories (see ``markets.replay``)."""

    name = "replay"

    def __init__(
        self,
        pools: Sequence[PoolData],
        *,
        inventory: DataInventory | None = None,
        left_out: dict[str, list[str]] | None = None,
        span_ns: tuple[int, int] | None = None,
        source: str = "replay",
    ) -> None:
        if not pools:
            raise InputError(
                inventory.root if inventory else "replay",
                None,
                "recorded data giving at least one pool (traces, AWS spot prices of catalog "
                "types, or GCP prices of types with known zones)",
                got={k: len(v) for k, v in (left_out or {}).items()} or None,
            )
        self._pools = sorted(pools, key=lambda p: p.key)
        self._by_key = {p.key: p for p in self._pools}
        self.inventory = inventory
        self.left_out: dict[str, list[str]] = dict(left_out or {})
        self.source = source
        self._span_ns = span_ns or self._data_span()
        self._hazards: dict[_HazardKey, HazardEstimate] = {}
        self._domains: dict[int, tuple[FailureDomain, ...]] = {}

    @classmethod
    def from_inventory(cls, inv: DataInventory, *, gpu_only: bool = False) -> ReplayMarket:
        pools, left = build_pools(inv, gpu_only=gpu_only)
        return cls(pools, inventory=inv, left_out=left, source=f"replay({inv.root})")

    def _data_span(self) -> tuple[int, int]:
        starts: list[int] = []
        ends: list[int] = []
        for p in self._pools:
            for s in (p.spot, p.on_demand, p.committed_1y, p.committed_3y):
                if len(s):
                    starts.append(int(s.t_ns[0]))
                    ends.append(int(s.t_ns[-1]))
            for tr in p.traces:
                starts.append(tr.start_ns)
                ends.append(tr.end_ns)
        if not starts:  # only static facts: a one-instant market
            return 0, 0
        return min(starts), max(ends)

    # -- PriceSource / HistorySource ------------------------------------------

    def pools(self) -> list[Pool]:
        return [p.pool for p in self._pools]

    def instance_types(self) -> list[InstanceType]:
        return list({p.instance.name: p.instance for p in self._pools}.values())

    def span(self) -> tuple[datetime, datetime]:
        return _dt(self._span_ns[0]), _dt(self._span_ns[1])

    def coverage(self) -> Coverage:
        """Where recorded prices and traces overlap, and the window a replay
        uses by default (``markets.replay.coverage``)."""
        return coverage(self._pools, self._span_ns)

    def revocation_events(self, pool_key: str, start: datetime, end: datetime) -> pd.DatetimeIndex:
        """Recorded node revocations of the pool's traces in ``[start, end)``
        (UTC; a drop of d nodes gives d equal times), so the simulated cloud
        replays the real losses. Empty for a pool without traces."""
        pool = self._by_key.get(pool_key)
        lo = ensure_utc(start).timestamp()
        hi = ensure_utc(end).timestamp()
        if pool is None or not pool.traces:
            return pd.DatetimeIndex([], tz="UTC")
        until_ns = int(hi * NS)
        times = np.concatenate([tr.revocation_times_s(until_ns) for tr in pool.traces])
        sel = np.sort(times[(times >= lo) & (times < hi)])
        return pd.DatetimeIndex(pd.to_datetime(sel, unit="s", utc=True))

    def trace_ids(self) -> list[str]:
        return sorted(tr.trace_id for p in self._pools for tr in p.traces)

    def _check_at(self, at: datetime | None, field: str) -> int:
        if at is None:
            return self._span_ns[1]
        t = _ns(at)
        lo, hi = self._span_ns
        if not lo <= t <= hi:
            raise InputError(
                field,
                None,
                f"a time within the replay data's span {_dt(lo):%Y-%m-%d %H:%M} "
                f"to {_dt(hi):%Y-%m-%d %H:%M} UTC",
                got=ensure_utc(at).isoformat(),
            )
        return t

    def snapshot(self, at: datetime | None = None) -> MarketSnapshot:
        """Everything in force at ``at`` (default: the end of the span)."""
        return self.snapshot_with_details(at)[0]

    def snapshot_with_details(
        self, at: datetime | None = None
    ) -> tuple[MarketSnapshot, list[PoolDetail]]:
        t = self._check_at(at, "--at")
        grid = np.array([t], dtype=np.int64)
        od = {p.key: rv.on_demand_at(p, grid) for p in self._pools}
        ratios = self._type_ratios(self._pools, grid, {k: v.values for k, v in od.items()})
        clusters = rv.zone_clustering(self._pools, t)
        snaps, details = [], []
        for p in self._pools:
            snap, detail = self._pool_state(p, t, od[p.key], ratios.get(self._group(p)), clusters)
            snaps.append(snap)
            details.append(detail)
        market = MarketSnapshot(
            at=_dt(t), pools=tuple(snaps), source=self.source, failure_domains=self._domains_at(t)
        )
        return market, details

    def _domains_at(self, t: int) -> tuple[FailureDomain, ...]:
        """Zones whose recorded revocations came together by ``t``
        (``markets.hazard.clustering.failure_domains``, at the traces'
        coarsest probe as resolution; one node revocation per time)."""
        if t not in self._domains:
            traced = [p for p in self._pools if p.traces]
            starts = [tr.start_ns for p in traced for tr in p.traces if tr.start_ns <= t]
            events = {
                p.key: np.unique(np.concatenate([tr.revocation_times_s(t) for tr in p.traces]))
                for p in traced
            }
            gap_s = max((tr.gap_ns / NS for p in traced for tr in p.traces), default=0.0)
            span_s = (t - min(starts)) / NS if starts else 0.0
            self._domains[t] = (
                failure_domains(events, span_s=span_s, resolution_s=gap_s) if span_s > 0 else ()
            )
        return self._domains[t]

    def _pool_state(
        self,
        p: PoolData,
        t: int,
        od: rv.Priced,
        ratio: FloatArray | None,
        clusters: dict[str, Clustering],
    ) -> tuple[PoolSnapshot, PoolDetail]:
        grid = np.array([t], dtype=np.int64)
        spot = rv.spot_at(p, grid, od.values, ratio)
        c1, c3 = rv.committed_at(p, grid, 1), rv.committed_at(p, grid, 3)
        spot_usd = float(spot.values[0]) if np.isfinite(spot.values[0]) else None
        observed = [x for x in (spot.observed_ns(0), od.observed_ns(0)) if x is not None]
        share, window = rv.trailing_share(p, t, TRAILING_SHARE_HOURS * HOUR_NS)
        if window is not None:
            observed.append(window[1])
        instant = [
            tr.available[i] / tr.nodes for tr in p.traces if (i := tr.tick_at(t)) is not None
        ]
        score = None
        if instant:
            day, _ = rv.held_share(p, np.array([t - PLACEMENT_WINDOW_HOURS * HOUR_NS, t]))
            recent = float(day[0]) if np.isfinite(day[0]) else instant[0]
            score = 1 + round(9.0 * (0.5 * recent + 0.5 * float(np.mean(instant))))
        est = self._hazard(p, t, share)
        own = spot_usd is not None and int(spot.how[0]) == rv.FROM_OWN
        snap = PoolSnapshot(
            pool=p.pool,
            instance=p.instance,
            on_demand_usd_per_hour=float(od.values[0]),
            spot_usd_per_hour=spot_usd,
            committed_1y_usd_per_hour=_finite(c1.values[0]),
            committed_3y_usd_per_hour=_finite(c3.values[0]),
            placement_score=min(10, max(1, score)) if score is not None else None,
            hazard=est.to_hazard(),
            available_share=share,
            spot_available=any(x > 0 for x in instant) if instant else spot_usd is not None,
            observed_at=_dt(max(observed)) if observed else _dt(t),
            # the price's own movement (regime, volatility), for the plan's price
            spot_risk=price_risk(p.spot.t_ns, p.spot.values, t) if own else None,
        )
        detail = PoolDetail(
            pool_key=p.key,
            origins=p.origins,
            traces=tuple(tr.trace_id for tr in p.traces),
            spot_source=self._label(spot, p),
            on_demand_source=self._label(od, p),
            committed_source=self._label(c1 if np.isfinite(c1.values[0]) else c3, p),
            hazard=est,
            share_window=(_dt(window[0]), _dt(window[1])) if window else None,
            zone_clustering=clusters.get(rv.zone_key(p.pool)),
            advisor_bucket=p.advisor_bucket,
        )
        return snap, detail

    @staticmethod
    def _label(priced: rv.Priced, p: PoolData) -> str:
        how = int(priced.how[0])
        if how in (rv.FROM_OWN, rv.FROM_BACKFILL):
            return priced.label_of(0)
        if how == rv.FROM_CATALOG:
            return p.catalog_label
        if how == rv.FROM_ADVISOR:
            return f"{p.advisor_label} savings"
        return _HOW_LABEL[how]

    def _hazard(self, p: PoolData, t: int, share: float | None) -> HazardEstimate:
        evidence = [tr.exposure_until(t) for tr in p.traces]
        key = (p.advisor_bucket, tuple((e.events, e.hours) for e in evidence), share)
        if key not in self._hazards:  # most pools share a prior and have no evidence
            prior = (
                HazardPrior.from_advisor_bucket(p.advisor_bucket)
                if p.advisor_bucket is not None
                else ASSUMED_PRIOR
            )
            self._hazards[key] = estimate_hazard(evidence, prior=prior, available_share=share)
        return self._hazards[key]

    @staticmethod
    def _group(p: PoolData) -> tuple[str, str, int]:
        return (p.pool.provider.value, p.pool.instance_type, p.offset_ns)

    def _type_ratios(
        self, pools: Iterable[PoolData], grid: IntArray, on_demand: dict[str, FloatArray]
    ) -> dict[tuple[str, str, int], FloatArray]:
        """Per (provider, type, offset): the median own spot / on-demand over
        the market's pools of that type, at each grid time."""
        wanted = {self._group(p) for p in pools}
        members: dict[tuple[str, str, int], list[tuple[FloatArray, FloatArray]]] = defaultdict(list)
        for q in self._pools:
            g = self._group(q)
            if g in wanted and len(q.spot):
                od = on_demand.get(q.key)
                if od is None:
                    od = rv.on_demand_at(q, grid).values
                members[g].append((rv.own_spot_at(q, grid)[0], od))
        return {g: rv.type_discount_at(m)[0] for g, m in members.items()}

    def hourly(
        self,
        start: datetime,
        hours: int,
        *,
        align: Align = "absolute",
        pool_keys: Sequence[str] | None = None,
    ) -> pd.DataFrame:
        """One row per (hour, pool), hour-major, ``start`` floored to the hour;
        columns as ``markets.protocols.HistorySource.hourly``. Where no trace
        covers an hour, ``spot_available`` is NaN and ``revocations`` 0 (none
        observed); ``spot_usd_per_hour`` NaN where no chain link knows it.
        ``align="relative"``: ``self.aligned(start).hourly(start, hours)``."""
        if align == "relative":
            return self.aligned(start).hourly(start, hours, pool_keys=pool_keys)
        if align != "absolute":
            raise InputError("align", None, "absolute or relative", got=align)
        start = ensure_utc(start).replace(minute=0, second=0, microsecond=0)
        t0 = _ns(start)
        lo, hi = self._span_ns
        if not (lo - HOUR_NS < t0 <= hi and hours >= 0 and t0 + (hours - 1) * HOUR_NS <= hi):
            raise InputError(
                "hourly",
                "start, hours",
                f"hours starting within the span {_dt(lo):%Y-%m-%d %H:%M} to "
                f"{_dt(hi):%Y-%m-%d %H:%M} UTC",
                got=f"{start.isoformat()} + {hours} h",
            )
        chosen = self._select(pool_keys)
        grid = t0 + np.arange(hours + 1, dtype=np.int64) * HOUR_NS
        at = grid[:-1]
        od = {p.key: rv.on_demand_at(p, at).values for p in chosen}
        ratios = self._type_ratios(chosen, at, od)
        n = len(chosen)
        spot, avail = np.empty((hours, n)), np.empty((hours, n))
        revs = np.empty((hours, n), dtype=np.int64)
        for j, p in enumerate(chosen):  # a loop over pools, not rows
            spot[:, j] = rv.spot_at(p, at, od[p.key], ratios.get(self._group(p))).values
            avail[:, j] = rv.held_share(p, grid)[0]
            revs[:, j] = rv.loss_counts(p, grid)
        return pd.DataFrame(
            {
                "hour": np.repeat(pd.DatetimeIndex(at.astype("datetime64[ns]"), tz="UTC"), n),
                "pool_key": np.tile(np.array([p.key for p in chosen], dtype=object), hours),
                "spot_usd_per_hour": spot.ravel(),
                "on_demand_usd_per_hour": np.column_stack([od[p.key] for p in chosen]).ravel()
                if n
                else np.zeros(0),
                "spot_available": avail.ravel(),
                "revocations": revs.ravel(),
            }
        )

    def _select(self, pool_keys: Sequence[str] | None) -> list[PoolData]:
        if pool_keys is None:
            return list(self._pools)
        unknown = [k for k in pool_keys if k not in self._by_key]
        if unknown:
            raise InputError("pool_keys", None, "pool keys of this replay market", got=unknown)
        return [self._by_key[k] for k in dict.fromkeys(pool_keys)]

    def restricted(
        self, *, regions: Sequence[str] | None = None, zones: Sequence[str] | None = None
    ) -> ReplayMarket:
        """The same market keeping only pools in ``regions`` and ``zones``
        (``None``: no restriction). A name the data does not hold raises
        ``InputError`` listing the names it does (a typo, or the wrong data)."""
        for option, wanted, have in (
            ("regions", regions, {p.pool.region for p in self._pools}),
            ("zones", zones, {p.pool.zone for p in self._pools}),
        ):
            missing = sorted(set(wanted or ()) - have)
            if missing:
                raise InputError(
                    option,
                    None,
                    f"names in the recorded data: {', '.join(sorted(have))}",
                    got=", ".join(missing),
                )
        kept = [
            p
            for p in self._pools
            if (regions is None or p.pool.region in regions)
            and (zones is None or p.pool.zone in zones)
        ]
        if not kept:
            raise InputError(
                "zones",
                None,
                "at least one pool in the given regions and zones",
                got={"regions": list(regions or ()), "zones": list(zones or ())},
            )
        return ReplayMarket(
            kept,
            inventory=self.inventory,
            left_out=self.left_out,
            span_ns=self._span_ns,
            source=f"{self.source} restricted",
        )

    def aligned(self, origin: datetime, *, traces: Sequence[str] | None = None) -> ReplayMarket:
        """A view where each chosen trace starts at ``origin``: its pool's every
        series (prices too) is shifted by the same offset, so the pool shows
        what was in force while the trace was recorded. Only pools with a chosen
        trace remain, one trace each: by default each pool's longest (ties: the
        latest); ``traces`` names them (``trace_ids()``). Span: ``origin`` to
        the end of the longest chosen trace."""
        by_id = {tr.trace_id: (p, tr) for p in self._pools for tr in p.traces}
        if traces is None:
            picks = [
                (p, max(p.traces, key=lambda tr: (tr.end_ns - tr.start_ns, tr.start_ns)))
                for p in self._pools
                if p.traces
            ]
        else:
            unknown = [i for i in traces if i not in by_id]
            if unknown:
                raise InputError(
                    "traces", None, f"trace ids of this market: {sorted(by_id)}", got=unknown
                )
            picks = [by_id[i] for i in dict.fromkeys(traces)]
            keys = [p.key for p, _ in picks]
            if len(keys) != len(set(keys)):
                dup = sorted({k for k in keys if keys.count(k) > 1})
                raise InputError("traces", None, "at most one trace per pool", got=dup)
        if not picks:
            raise InputError("traces", None, "a market with at least one trace")
        o = _ns(origin)
        pools = [p.shifted(o - tr.start_ns, (tr,)) for p, tr in picks]
        end = o + max(tr.end_ns - tr.start_ns for _, tr in picks)
        return ReplayMarket(
            pools,
            inventory=self.inventory,
            left_out=self.left_out,
            span_ns=(o, end),
            source=f"{self.source} aligned at {ensure_utc(origin).isoformat()}",
        )


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


# AWS (us-west-2, us-west-2a) and GCP (us-central1, us-central1-a) names.
REGION_PATTERN = re.compile(r"^[a-z]+(-[a-z]+)*-[a-z]*\d+$")
ZONE_PATTERN = re.compile(r"^[a-z]+(-[a-z]+)*-[a-z]*\d+-?[a-z]$")


def open_replay_market(
    *,
    path: str | Path,
    gpu_only: bool = False,
    strict: bool = True,
    clock: Clock | None = None,
    regions: object = None,
    zones: object = None,
    **_: object,
) -> ReplayMarket:
    """The registry's factory: a directory of public datasets (``markets.files.datadir``; any
    subset) or one recorded file (``market fetch`` output). ``regions`` /
    ``zones`` (sequences or comma-separated strings) keep only the pools there,
    as the live markets' ``regions`` option does: a fleet replayed where its
    launch templates, data or quotas are. Options meant for other markets are
    ignored."""
    inv = discover(path, strict=strict, clock=clock)
    market = ReplayMarket.from_inventory(inv, gpu_only=gpu_only)
    if regions is None and zones is None:
        return market
    return market.restricted(
        regions=None
        if regions is None
        else parse_names(regions, "regions", REGION_PATTERN, "region names like us-west-2"),
        zones=None
        if zones is None
        else parse_names(zones, "zones", ZONE_PATTERN, "zone names like us-west-2a"),
    )
