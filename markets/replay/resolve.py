"""What is in force for one replay pool at given times: prices per tier, with the
fallback chain, and trace-derived availability. Vectorised over a time grid
(one element for a snapshot, one per hour for ``hourly``).

Owns: ``Priced`` (values plus where each came from), ``on_demand_at``,
``committed_at``, ``own_spot_at``, ``type_discount_at``, ``spot_at``,
``held_share``, ``loss_counts``, ``trailing_share`` and ``zone_clustering``.
The order of each chain is documented in ``markets.replay`` (join rules); the
codes below say which link answered.

Must not: build pools (``build``) or make snapshots (``market``).
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from markets.hazard.clustering import Clustering, clustering
from markets.model import Pool
from markets.replay.build import PoolData
from markets.replay.series import NS, FloatArray, IntArray, StepSeries, TraceSeries

__all__ = [
    "FROM_ADVISOR",
    "FROM_BACKFILL",
    "FROM_CATALOG",
    "FROM_NONE",
    "FROM_OWN",
    "FROM_TYPE",
    "Priced",
    "committed_at",
    "held_share",
    "loss_counts",
    "on_demand_at",
    "own_spot_at",
    "spot_at",
    "trailing_share",
    "type_discount_at",
    "zone_clustering",
    "zone_key",
]

# Which link of a chain answered (``Priced.how``).
FROM_OWN = 0  # the pool's own series (label: Priced.label_of)
FROM_BACKFILL = 1  # the series' earliest value, for a time before it (list prices only)
FROM_CATALOG = 2  # the embedded catalog's dated list price
FROM_TYPE = 3  # the same type's discount in other pools, times this pool's on-demand
FROM_ADVISOR = 4  # on-demand x (1 - the advisor's savings)
FROM_NONE = 5  # nothing known (or a spot price above on-demand, dropped)


@dataclass(frozen=True, eq=False)
class Priced:
    """Values at each time, how each was found, the series point used (-1 if
    none) and, for ``FROM_TYPE``, how many pools the median came from."""

    values: FloatArray
    how: IntArray
    idx: IntArray
    series: StepSeries

    def label_of(self, i: int, own_label: str = "") -> str:
        how = int(self.how[i])
        if how in (FROM_OWN, FROM_BACKFILL):
            label = self.series.label(int(self.idx[i]))
            return label if how == FROM_OWN else f"{label} (earliest, backfilled)"
        return own_label

    def observed_ns(self, i: int) -> int | None:
        """Time of the point used, if it is an observation at or before the query."""
        if int(self.how[i]) != FROM_OWN or self.idx[i] < 0:
            return None
        return int(self.series.t_ns[int(self.idx[i])])


def _list_price(series: StepSeries, t_ns: IntArray, fallback: float | None) -> Priced:
    vals, idx = series.at(t_ns)
    how = np.where(np.isfinite(vals), FROM_OWN, FROM_NONE).astype(np.int64)
    first = series.first_value()
    if first is not None:  # list prices move rarely: backfill before the first row
        before = t_ns < series.t_ns[first[1]]
        vals = np.where(before, first[0], vals)
        idx = np.where(before, first[1], idx)
        how = np.where(before, FROM_BACKFILL, how)
    if fallback is not None:
        missing = ~np.isfinite(vals)
        vals = np.where(missing, fallback, vals)
        how = np.where(missing, FROM_CATALOG, how)
    return Priced(vals, how, idx, series)


def on_demand_at(p: PoolData, t_ns: IntArray) -> Priced:
    """Price list as of t (GCP), its earliest row before it starts, else the catalog."""
    return _list_price(p.on_demand, t_ns, p.catalog_on_demand)


def committed_at(p: PoolData, t_ns: IntArray, term_years: int) -> Priced:
    series = p.committed_1y if term_years == 1 else p.committed_3y
    return _list_price(series, t_ns, p.catalog_committed[0 if term_years == 1 else 1])


def own_spot_at(p: PoolData, t_ns: IntArray) -> tuple[FloatArray, IntArray]:
    return p.spot.at(t_ns)


def type_discount_at(
    members: Sequence[tuple[FloatArray, FloatArray]],
) -> tuple[FloatArray, IntArray]:
    """Median over pools of own spot / on-demand at each time, and how many
    pools had one. ``members``: (own spot, on-demand) per pool on one grid."""
    if not members:
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    ratios = np.vstack([s / od for s, od in members])
    with warnings.catch_warnings():  # an all-NaN column is "no pool knows": NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        med = np.nanmedian(ratios, axis=0)
    return med.astype(np.float64), np.isfinite(ratios).sum(axis=0).astype(np.int64)


def spot_at(
    p: PoolData,
    t_ns: IntArray,
    on_demand: FloatArray,
    type_ratio: FloatArray | None,
) -> Priced:
    """Own series, else the same type's median discount elsewhere, else the
    advisor's savings; a result above on-demand is dropped (AWS caps spot at
    on-demand; a higher figure is a bad row or a stale proxy)."""
    vals, idx = own_spot_at(p, t_ns)
    how = np.where(np.isfinite(vals), FROM_OWN, FROM_NONE).astype(np.int64)
    if type_ratio is not None:
        use = (how == FROM_NONE) & np.isfinite(type_ratio)
        vals = np.where(use, on_demand * type_ratio, vals)
        how = np.where(use, FROM_TYPE, how)
    if p.advisor_savings is not None:
        use = how == FROM_NONE
        vals = np.where(use, on_demand * (1.0 - p.advisor_savings), vals)
        how = np.where(use, FROM_ADVISOR, how)
    above = np.isfinite(vals) & (vals > on_demand)
    vals = np.where(above, np.nan, vals)
    how = np.where(above | ~np.isfinite(vals), FROM_NONE, how)
    return Priced(vals, how, idx, p.spot)


def held_share(p: PoolData, t_ns: IntArray) -> tuple[FloatArray, FloatArray]:
    """Per interval between consecutive times: share of it spot could be held
    (NaN where no trace covers it) and the seconds covered. Overlapping traces
    of one pool are averaged by coverage."""
    held = np.zeros(len(t_ns) - 1)
    cover = np.zeros(len(t_ns) - 1)
    for tr in p.traces:
        h, c = tr.held_seconds(t_ns)
        held += np.diff(h)
        cover += np.diff(c)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(cover > 0, held / cover, np.nan)
    return np.clip(share, 0.0, 1.0), cover


def loss_counts(p: PoolData, t_ns: IntArray) -> IntArray:
    """Loss ticks per interval between consecutive times (a drop of any size
    counts once: what one instance, or a gang, held there saw)."""
    out = np.zeros(len(t_ns) - 1, dtype=np.int64)
    for tr in p.traces:
        out += np.diff(tr.losses_between(t_ns))
    return out


def trailing_share(
    p: PoolData, t_ns: int, window_ns: int
) -> tuple[float | None, tuple[int, int] | None]:
    """Share held over the last ``window_ns`` observed by ``t_ns`` and the
    interval it covers (after a trace ends: its last window, with its own,
    older, times); ``None`` without a trace started by then."""
    seen = [tr for tr in p.traces if tr.start_ns <= t_ns]
    if not seen:
        return None, None
    end = min(t_ns, max(tr.end_ns for tr in seen))
    begin = end - window_ns
    share, cover = held_share(p, np.array([begin, end], dtype=np.int64))
    if not cover[0] > 0:
        return None, None
    return float(share[0]), (max(begin, min(tr.start_ns for tr in seen)), end)


def zone_key(pool: Pool) -> str:
    return f"{pool.provider.value}/{pool.zone}"


def zone_clustering(pools: Sequence[PoolData], t_ns: int) -> dict[str, Clustering]:
    """Per zone with traces: the revocations of all its pools seen by ``t_ns``,
    merged, as ``markets.hazard.clustering.clustering`` (SkyServe: "another in the
    same zone within 5 minutes"). Resolution: the coarsest probe gap, doubled
    when every trace of the zone is single-node (an instance must come back
    before it can be taken again); ``effective_window_s`` reports it."""
    by_zone: dict[str, list[TraceSeries]] = defaultdict(list)
    for p in pools:
        by_zone[zone_key(p.pool)] += [tr for tr in p.traces if tr.start_ns <= t_ns]
    out = {}
    for zone, traces in by_zone.items():
        if not traces:
            continue
        times = np.concatenate([tr.revocation_times_s(t_ns) for tr in traces])
        spans = sorted((tr.start_ns, min(tr.end_ns, t_ns)) for tr in traces)
        covered, reach = 0, spans[0][0]
        for a, b in spans:  # length of the union of the observed intervals
            covered += max(0, b - max(a, reach))
            reach = max(reach, b)
        gap_s = max(tr.gap_s for tr in traces)
        single = all(tr.nodes == 1 for tr in traces)
        out[zone] = clustering(
            times,
            resolution_s=2 * gap_s if single else gap_s,
            span_s=covered / NS if covered else None,
        )
    return out
