"""Revocations in time: how they bunch in a zone and across the pools of a zone.

Owns: ``clustering`` (the chance that a revocation is followed by another
within ``CLUSTER_WINDOW_S``, SkyServe's 5 minutes), ``co_revocation`` and
``zone_correlations`` (how the pools of one zone revoke together), their
results ``Clustering`` and ``CoRevocation``, ``failure_domains`` (zones whose
revocations come together, as ``markets.model.FailureDomain`` values: what the
planner's diversification caps and the lifecycle's replacements read), and
``Times``, the revocation times they accept: seconds on a common axis,
datetime64, or aware datetimes.

Must not: estimate hazards (``markets.hazard.posterior``), read files
(``markets.files.traces`` loads them), or call a cloud. Inputs are plain numpy
values or datetimes; turning a probe series into revocation times is
``markets.hazard.probes``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from numpy.typing import ArrayLike, NDArray

from markets.keys import PoolKey
from markets.model import FailureDomain, Pool

# Revocation times: seconds on a common axis, datetime64, or aware datetimes.
Times = ArrayLike | Sequence[datetime]

__all__ = [
    "CLUSTER_WINDOW_S",
    "Clustering",
    "CoRevocation",
    "Times",
    "clustering",
    "co_revocation",
    "failure_domains",
    "zone_correlations",
]

# SkyServe (EuroSys 2025): 83-97 % of preemptions are followed by another in the
# same zone within 5 minutes (docs/concepts/market.md).
CLUSTER_WINDOW_S = 300.0

# When two zones (or one zone with itself) count as one failure domain: at
# least 15 % of their revocations come within the window of the other's, and
# at least twice as often as independent zones at the same rates would (so two
# busy zones are not joined by chance alone), on at least
# ``DOMAIN_MIN_EVENTS`` revocations each (fewer is an anecdote). Our
# thresholds, not a published figure. On the public us-west-2 traces
# (skypilot-org/spot-traces, 10-minute probes) linked pairs show 17-37 % against 2-13 %
# by chance; the pairs left apart show 17-32 % against 11-22 %.
DOMAIN_MIN_SHARE = 0.15
DOMAIN_MIN_LIFT = 2.0
DOMAIN_MIN_EVENTS = 3


def _seconds(times: Times) -> NDArray[np.float64]:
    """Sorted float seconds from numbers, datetime64 or aware datetimes
    (``datetime``, ``pd.Timestamp``: one call per event, not per probe)."""
    t = np.asarray(times)
    if t.dtype.kind == "M":
        t = t.astype("datetime64[ns]").astype(np.int64) / 1e9
    elif t.dtype.kind == "O":
        t = np.array([v.timestamp() if isinstance(v, datetime) else v for v in t.ravel()])
    return np.sort(t.astype(np.float64).ravel())


@dataclass(frozen=True)
class Clustering:
    """Share of revocations followed by another within the window.

    ``effective_window_s`` is ``max(window_s, resolution_s)``: events located
    only to a probe interval cannot be told apart below it. ``baseline`` is
    the share expected if the same number of events fell independently
    (Poisson) over the span, ``None`` without a span; it is approximate (it
    ignores that a node cannot be revoked again before it comes back).
    """

    events: int
    followed: int
    window_s: float
    effective_window_s: float
    baseline: float | None

    @property
    def probability(self) -> float | None:
        return self.followed / self.events if self.events else None


def clustering(
    event_times: Times,
    *,
    window_s: float = CLUSTER_WINDOW_S,
    resolution_s: float = 0.0,
    span_s: float | None = None,
    distinct: bool = False,
) -> Clustering:
    """Chance that a revocation is followed by another (same zone: pass every
    pool of the zone merged) at most ``effective_window_s`` later. Ties count:
    a 16 -> 0 drop is 16 revocations, each with others at the same time;
    ``distinct=True`` counts each revocation time once instead (episodes).

    For one single-node pool two revocations are at least two probes apart
    (it must come back first): pass ``resolution_s=2 * gap_s`` to say so.
    """
    t = _seconds(event_times)
    if distinct:
        t = np.unique(t)
    w = max(float(window_s), float(resolution_s))
    # others in [t_i, t_i + w], excluding the event itself
    others = np.searchsorted(t, t + w, side="right") - np.searchsorted(t, t, side="left") - 1
    baseline = None
    if span_s and t.size > 1:
        baseline = float(1.0 - math.exp(-(t.size - 1) / span_s * (w + resolution_s)))
    return Clustering(int(t.size), int((others > 0).sum()), float(window_s), w, baseline)


@dataclass(frozen=True)
class CoRevocation:
    """How pools of one group (a zone) revoke together.

    ``share``: revocations with another pool's revocation within
    ``effective_window_s`` either side; ``baseline``: the same if the pools
    revoked independently at their observed rates (both ``None`` for fewer
    than two pools or no events); ``mean_pairwise_corr``:
    mean Pearson correlation over pool pairs of "revoked in this ``bin_s``
    bin" indicators (``None`` if no pair has events in both).
    """

    pools: int
    events: int
    share: float | None
    baseline: float | None
    effective_window_s: float
    mean_pairwise_corr: float | None
    bin_s: float


def co_revocation(
    event_times: Sequence[Times],
    *,
    span_s: float,
    start_s: float = 0.0,
    window_s: float = CLUSTER_WINDOW_S,
    resolution_s: float = 0.0,
    bin_s: float = 3600.0,
) -> CoRevocation:
    """Co-revocation of several pools' event series on a common time axis
    observed over ``[start_s, start_s + span_s)``."""
    if span_s <= 0:
        raise ValueError("span_s must be positive")
    series = [_seconds(e) for e in event_times]
    w = max(float(window_s), float(resolution_s))
    n = np.array([s.size for s in series], dtype=np.float64)
    with_other = 0
    expected = 0.0
    for i, own in enumerate(series):
        near = np.zeros(own.size, dtype=bool)
        for j, other in enumerate(series):
            if j != i and other.size:
                lo = np.searchsorted(other, own - w, side="left")
                near |= np.searchsorted(other, own + w, side="right") > lo
        with_other += int(near.sum())
        others_rate = (n.sum() - n[i]) / span_s
        expected += own.size * (1.0 - math.exp(-others_rate * (2 * w + resolution_s)))
    total = int(n.sum())
    bins = math.ceil(span_s / bin_s)
    hit = np.zeros((len(series), bins), dtype=bool)
    for i, s in enumerate(series):
        hit[i, np.clip(((s - start_s) // bin_s).astype(np.int64), 0, bins - 1)] = True
    corr = None
    varying = hit[hit.any(axis=1) & ~hit.all(axis=1)]
    if varying.shape[0] >= 2:
        c = np.atleast_2d(np.corrcoef(varying.astype(np.float64)))
        corr = float(c[np.triu_indices_from(c, k=1)].mean())
    return CoRevocation(
        pools=len(series),
        events=total,
        share=with_other / total if total and len(series) > 1 else None,
        baseline=expected / total if total and len(series) > 1 else None,
        effective_window_s=w,
        mean_pairwise_corr=corr,
        bin_s=float(bin_s),
    )


def zone_correlations(
    events_by_pool: Mapping[str, Times],
    *,
    span_s: float,
    start_s: float = 0.0,
    window_s: float = CLUSTER_WINDOW_S,
    resolution_s: float = 0.0,
    bin_s: float = 3600.0,
) -> dict[str, CoRevocation]:
    """``co_revocation`` per zone, pools keyed by ``Pool.key``."""
    by_zone: dict[str, list[Times]] = {}
    for key, times in events_by_pool.items():
        by_zone.setdefault(Pool.from_key(key).zone, []).append(times)
    return {
        zone: co_revocation(
            series,
            span_s=span_s,
            start_s=start_s,
            window_s=window_s,
            resolution_s=resolution_s,
            bin_s=bin_s,
        )
        for zone, series in sorted(by_zone.items())
    }


def _near(own: NDArray[np.float64], other: NDArray[np.float64], w: float) -> int:
    """Events of ``own`` with one of ``other`` within ``w`` either side."""
    if not own.size or not other.size:
        return 0
    lo = np.searchsorted(other, own - w, side="left")
    return int((np.searchsorted(other, own + w, side="right") > lo).sum())


def failure_domains(
    events_by_pool: Mapping[str, Times],
    *,
    span_s: float,
    window_s: float = CLUSTER_WINDOW_S,
    resolution_s: float = 0.0,
    min_share: float = DOMAIN_MIN_SHARE,
    min_lift: float = DOMAIN_MIN_LIFT,
    min_events: int = DOMAIN_MIN_EVENTS,
    source: str = "traces",
) -> tuple[FailureDomain, ...]:
    """Zones whose revocations come together, over ``span_s`` of record.

    The pools of a zone are merged (a zone shares its racks and power). Two
    zones are linked when the share of their revocations with one of the
    other's within the window (either side) is at least ``min_share`` and
    ``min_lift`` times what independent zones at their rates would give;
    linked zones join (transitively) into one domain. A zone linked to none
    is a domain of its own only if its own revocations bunch the same way
    (``clustering`` against its Poisson baseline, distinct times). Domains
    come sorted by name (the first zone key); zones of neither kind are left
    out: on their own, as without domains.
    """
    if span_s <= 0:
        raise ValueError("span_s must be positive")
    merged: dict[str, list[NDArray[np.float64]]] = {}
    for key, times in events_by_pool.items():
        merged.setdefault(PoolKey.parse(key).zone_key, []).append(_seconds(times))
    zones = sorted(merged)
    series = {z: np.sort(np.concatenate(merged[z])) for z in zones}
    w = max(float(window_s), float(resolution_s))
    parent = {z: z for z in zones}

    def root(z: str) -> str:
        while parent[z] != z:
            parent[z] = parent[parent[z]]
            z = parent[z]
        return z

    linked: set[str] = set()
    for i, a in enumerate(zones):
        sa = series[a]
        if sa.size < min_events:
            continue
        for b in zones[i + 1 :]:
            sb = series[b]
            if sb.size < min_events:
                continue
            share = (_near(sa, sb, w) + _near(sb, sa, w)) / (sa.size + sb.size)
            base = _pair_baseline(sa.size, sb.size, span_s, w + resolution_s / 2)
            if share >= min_share and share >= min_lift * base:
                parent[root(b)] = root(a)
                linked.update((a, b))
    groups: dict[str, list[str]] = {}
    for z in zones:
        if z in linked:
            groups.setdefault(root(z), []).append(z)
    out: list[FailureDomain] = []
    for members in groups.values():
        out.append(_domain(members, series, span_s, w, resolution_s, source))
    for z in zones:
        if z in linked or series[z].size < min_events:
            continue
        c = clustering(
            series[z], window_s=w, resolution_s=resolution_s, span_s=span_s, distinct=True
        )
        p = c.probability
        if (
            p is not None
            and c.baseline is not None
            and p >= min_share
            and p >= min_lift * c.baseline
        ):
            out.append(
                FailureDomain(
                    name=z,
                    zones=(z,),
                    co_share=p,
                    baseline=c.baseline,
                    events=c.events,
                    window_s=w,
                    source=source,
                )
            )
    return tuple(sorted(out, key=lambda d: d.name))


def _pair_baseline(n_a: int, n_b: int, span_s: float, half_width_s: float) -> float:
    """Share of two independent Poisson series' events with one of the
    other's within ``half_width_s`` either side."""
    near_a = 1.0 - math.exp(-n_b / span_s * 2 * half_width_s)
    near_b = 1.0 - math.exp(-n_a / span_s * 2 * half_width_s)
    return (n_a * near_a + n_b * near_b) / (n_a + n_b)


def _domain(
    members: list[str],
    series: Mapping[str, NDArray[np.float64]],
    span_s: float,
    w: float,
    resolution_s: float,
    source: str,
) -> FailureDomain:
    """One domain's evidence: each member's events near another member's."""
    near = 0
    expected = 0.0
    total = 0
    for z in members:
        own = series[z]
        others = np.sort(np.concatenate([series[o] for o in members if o != z]))
        near += _near(own, others, w)
        expected += own.size * (1.0 - math.exp(-others.size / span_s * (2 * w + resolution_s)))
        total += own.size
    return FailureDomain(
        name=members[0],
        zones=tuple(members),
        co_share=near / total if total else 0.0,
        baseline=min(1.0, expected / total) if total else 0.0,
        events=total,
        window_s=w,
        source=source,
    )
