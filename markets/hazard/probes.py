"""What a probe series says: revocations, hours held and the availability regime.

Owns: reading a probe series of node counts taken every ``gap_s`` seconds
(1/0 for one node), or a loaded trace's ``available`` column:
``exposure_from_counts`` (revocations and node-hours held, the evidence of
``markets.hazard.posterior``), ``estimate_from_counts`` / ``estimate_from_trace``
(that evidence with a prior), ``revocation_times_s`` /
``trace_revocation_times_s`` (when each revocation was seen, for
``markets.hazard.clustering``), and ``regime_stats`` (time-available share, up/down
spells, all-or-none share of multi-node traces).

Must not: read files (``markets.files.traces`` loads them), call a cloud, or hold
the hazard model itself (``markets.hazard.posterior``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from markets.hazard.posterior import DEFAULT_LEVEL, Exposure, HazardEstimate, estimate_hazard

if TYPE_CHECKING:
    from markets.files.traces import SpotTrace
    from markets.hazard.prior import HazardPrior

__all__ = [
    "RegimeStats",
    "estimate_from_counts",
    "estimate_from_trace",
    "exposure_from_counts",
    "regime_stats",
    "revocation_times_s",
    "trace_revocation_times_s",
]


def _counts(counts: ArrayLike, nodes: int) -> NDArray[np.int64]:
    x = np.asarray(counts)
    if x.ndim != 1 or x.size == 0:
        raise ValueError("a probe series must be a non-empty 1-D array")
    if not np.all(np.isfinite(x)) or np.any(x < 0) or np.any(x != np.round(x)):
        raise ValueError("probe values must be whole node counts >= 0")
    if nodes < 1 or x.max() > nodes:
        raise ValueError(f"probe counts exceed nodes={nodes} (max {x.max()})")
    return x.astype(np.int64)


def exposure_from_counts(counts: ArrayLike, gap_s: float, *, nodes: int = 1) -> Exposure:
    """Revocations and node-hours held in a probe series.

    Every drop in the count between two probes is that many revocations (a
    1 -> 0 while held, for one node); each interval counts the nodes held at its
    start. At most one revocation per node per interval is visible, so the rate
    reads low by about ``rate * gap / 2`` (under 1 % while rate * gap < 0.02).
    """
    x = _counts(counts, nodes)
    drops = np.maximum(x[:-1] - x[1:], 0)
    return Exposure(int(drops.sum()), float(x[:-1].sum()) * gap_s / 3600.0)


def revocation_times_s(counts: ArrayLike, gap_s: float, *, nodes: int = 1) -> NDArray[np.float64]:
    """Seconds from the first probe at which each revocation was seen (a drop of
    ``d`` nodes gives ``d`` equal times)."""
    x = _counts(counts, nodes)
    drops = np.maximum(x[:-1] - x[1:], 0)
    seen_at = (np.arange(1, x.size) * float(gap_s)).astype(np.float64)
    return np.repeat(seen_at, drops)


def estimate_from_counts(
    counts: ArrayLike,
    gap_s: float,
    *,
    nodes: int = 1,
    prior: HazardPrior | None = None,
    level: float = DEFAULT_LEVEL,
) -> HazardEstimate:
    """Hazard and time-available share of one pool from a probe series."""
    x = _counts(counts, nodes)
    share = float(x.mean() / nodes)
    return estimate_hazard(
        exposure_from_counts(x, gap_s, nodes=nodes),
        prior=prior,
        level=level,
        available_share=share,
    )


def estimate_from_trace(
    trace: SpotTrace, *, prior: HazardPrior | None = None, level: float = DEFAULT_LEVEL
) -> HazardEstimate:
    """``estimate_from_counts`` over a loaded trace's ``available`` column
    (nodes that could be held per tick; ``markets.files.traces`` fixes its meaning)."""
    available = trace.frame["available"].to_numpy()
    return estimate_from_counts(
        available, trace.gap_seconds, nodes=trace.nodes, prior=prior, level=level
    )


def trace_revocation_times_s(trace: SpotTrace) -> NDArray[np.float64]:
    """Revocation times of a loaded trace in Unix seconds, so that traces of
    one zone recorded together share a time axis."""
    available = trace.frame["available"].to_numpy()
    offsets = revocation_times_s(available, trace.gap_seconds, nodes=trace.nodes)
    return trace.start.timestamp() + offsets


@dataclass(frozen=True)
class RegimeStats:
    """Availability regime of one probe series. Spells cut by the trace's start
    or end are counted as they were seen (truncated)."""

    probes: int
    gap_s: float
    nodes: int
    available_share: float  # mean share of the wanted nodes that could be held
    any_share: float  # share of probes with at least one node
    mean_up_hours: float | None  # spells with >= 1 node
    mean_down_hours: float | None  # spells with none
    up_spells: int
    down_spells: int
    all_share: float
    none_share: float

    @property
    def all_or_none_share(self) -> float:
        return self.all_share + self.none_share


def regime_stats(counts: ArrayLike, gap_s: float, *, nodes: int = 1) -> RegimeStats:
    """Share of time available, up/down spell lengths, all-or-none share."""
    x = _counts(counts, nodes)
    up = x > 0
    starts = np.flatnonzero(np.r_[True, up[1:] != up[:-1]])
    lengths_h = np.diff(np.r_[starts, x.size]) * gap_s / 3600.0
    is_up = up[starts]

    def mean(v: NDArray[np.float64]) -> float | None:
        return float(v.mean()) if v.size else None

    return RegimeStats(
        probes=int(x.size),
        gap_s=float(gap_s),
        nodes=nodes,
        available_share=float(x.mean() / nodes),
        any_share=float(up.mean()),
        mean_up_hours=mean(lengths_h[is_up]),
        mean_down_hours=mean(lengths_h[~is_up]),
        up_spells=int(is_up.sum()),
        down_spells=int((~is_up).sum()),
        all_share=float((x == nodes).mean()),
        none_share=float((x == 0).mean()),
    )
