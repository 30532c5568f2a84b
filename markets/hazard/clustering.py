"""Revocations in time: how they bunch in a zone and across the pools of a zone.

Owns: ``clustering`` (the chance that a revocation is followed by another
within ``CLUSTER_WINDOW_S``, SkyServe's 5 minutes), ``co_revocation`` and
``zone_correlations`` (how the pools of one zone revoke together), their
results ``Clustering`` and ``CoRevocation``, and ``Times``, the revocation
times they accept: seconds on a common axis, datetime64, or aware datetimes.

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

from markets.model import Pool

# Revocation times: seconds on a common axis, datetime64, or aware datetimes.
Times = ArrayLike | Sequence[datetime]

__all__ = [
    "CLUSTER_WINDOW_S",
    "Clustering",
    "CoRevocation",
    "Times",
    "clustering",
    "co_revocation",
    "zone_correlations",
]

# SkyServe (EuroSys 2025): 83-97 % of preemptions are followed by another in the
# same zone within 5 minutes (economics.md section 7).
CLUSTER_WINDOW_S = 300.0


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
