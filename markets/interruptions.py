"""The interruption model: how often spot is taken back, and how revocations bunch.

Owns: the per-pool interruption hazard (revocations per hour held on spot) as a
Gamma-Poisson posterior over observed evidence with a prior from the AWS Spot
Instance Advisor bucket (``HazardEstimate`` -> ``markets.model.Hazard``); the
availability regime of a trace (time-available share, up/down spells,
all-or-none share of multi-node traces); clustering in time (chance of another
revocation in the same zone within 5 minutes) and co-revocation of pools in one
zone.

Inputs are plain numpy values: a probe series of node counts every ``gap_s``
seconds (1/0 for one node), or revocation times in seconds on a common axis
plus hours held. It must not: read files (``markets.traces`` loads them), call
a cloud, or take the spot placement score as an input. The placement score
estimates whether a request is *fulfilled*, not how long the capacity stays
(economics.md section 7), so it is a separate signal and never enters the hazard.

The model, for ``k`` revocations seen over ``T`` hours held::

    prior      lambda ~ Gamma(a0, b0)   b0 = pseudo-hours, a0 = rate0 * b0
    evidence   k ~ Poisson(lambda * T)
    posterior  lambda ~ Gamma(a0 + k, b0 + T), mean (a0 + k) / (b0 + T)
             = Z * k/T + (1 - Z) * rate0, with Z = T / (T + b0)

An advisor bucket means a share ``p`` of instances reclaimed over a trailing
month; at a constant hazard an instance held for a month survives with
``exp(-730 lambda)``, so ``rate0 = -ln(1 - p) / 730`` (bucket 4, p = 0.25:
3.9e-4 per hour). That is a floor (most instances live less than a month) and a
region-wide aggregate: on the V100/K80 traces in us-west-2 (all bucket 4 in the
2025 advisor snapshot) the observed rates are 0.08-1.9 per hour held, hundreds
of times the prior. So the prior weighs as one day (24 pseudo-hours) of watching
the pool: it decides while we know nothing and is outvoted within days.

``confidence`` is Z = T / (T + b0): the share of the estimate resting on our own
observation, 0 with no data, 0.5 after ``b0`` hours held, -> 1. (The posterior
coefficient of variation, 1 / sqrt(a0 + k), was rejected: it does not move with
hours while no revocation is seen.) Statistical uncertainty is in the credible
interval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from markets.model import Hazard, HazardSource, Pool

if TYPE_CHECKING:
    from markets.traces import SpotTrace

# Revocation times: seconds on a common axis, datetime64, or aware datetimes.
Times = ArrayLike | Sequence[datetime]

__all__ = [
    "ADVISOR_BUCKET_SHARES",
    "ASSUMED_PRIOR",
    "CLUSTER_WINDOW_S",
    "DEFAULT_LEVEL",
    "DEFAULT_PRIOR_HOURS",
    "HOURS_PER_MONTH",
    "Clustering",
    "CoRevocation",
    "Exposure",
    "HazardEstimate",
    "HazardPrior",
    "RegimeStats",
    "clustering",
    "co_revocation",
    "estimate_from_counts",
    "estimate_from_revocations",
    "estimate_from_trace",
    "estimate_hazard",
    "exposure_from_counts",
    "gamma_quantile",
    "monthly_share_to_rate",
    "regime_stats",
    "revocation_times_s",
    "trace_revocation_times_s",
    "zone_correlations",
]

HOURS_PER_MONTH = 730.0  # 8760 / 12: the month AWS bills and the advisor's window
# Representative reclaimed share per advisor bucket (data/aws-spot-advisor
# "ranges": <5 %, 5-10 %, 10-15 %, 15-20 %, >20 %): bucket midpoints; the top
# bucket is open-ended, 25 % is our assumption for it.
ADVISOR_BUCKET_SHARES = (0.025, 0.075, 0.125, 0.175, 0.25)
DEFAULT_PRIOR_HOURS = 24.0  # prior weight: one day of watching the pool
DEFAULT_LEVEL = 0.9  # equal-tailed credible interval
# SkyServe (EuroSys 2025): 83-97 % of preemptions are followed by another in the
# same zone within 5 minutes (economics.md section 7).
CLUSTER_WINDOW_S = 300.0


def monthly_share_to_rate(share: float, hours_per_month: float = HOURS_PER_MONTH) -> float:
    """Per-hour hazard at which a share ``share`` of instances held for a month
    is reclaimed: ``-ln(1 - share) / hours_per_month``."""
    if not 0.0 <= share < 1.0:
        raise ValueError(f"monthly reclaimed share must be in [0, 1), got {share}")
    return -math.log1p(-share) / hours_per_month


@dataclass(frozen=True)
class HazardPrior:
    """Gamma prior as pseudo-evidence: ``pseudo_hours`` held at ``rate_per_hour``."""

    rate_per_hour: float
    pseudo_hours: float = DEFAULT_PRIOR_HOURS
    source: HazardSource = HazardSource.ADVISOR

    def __post_init__(self) -> None:
        if not (self.rate_per_hour > 0 and self.pseudo_hours > 0):
            raise ValueError("a prior needs a positive rate and positive pseudo-hours")

    @property
    def pseudo_events(self) -> float:
        return self.rate_per_hour * self.pseudo_hours

    @classmethod
    def from_advisor_bucket(
        cls, bucket: int, *, pseudo_hours: float = DEFAULT_PRIOR_HOURS
    ) -> HazardPrior:
        """Prior from an AWS Spot Instance Advisor interruption bucket (0-4)."""
        if bucket not in range(len(ADVISOR_BUCKET_SHARES)):
            raise ValueError(f"advisor bucket must be 0-4, got {bucket!r}")
        rate = monthly_share_to_rate(ADVISOR_BUCKET_SHARES[bucket])
        return cls(rate, pseudo_hours, HazardSource.ADVISOR)


# Nothing known: GPU types are most often in the top advisor bucket
# (economics.md section 7), so assume it, labelled as an assumption.
ASSUMED_PRIOR = HazardPrior(
    monthly_share_to_rate(ADVISOR_BUCKET_SHARES[-1]), DEFAULT_PRIOR_HOURS, HazardSource.ASSUMED
)


@dataclass(frozen=True)
class Exposure:
    """Evidence: ``events`` revocations over ``hours`` held (adds across sources)."""

    events: int
    hours: float

    def __post_init__(self) -> None:
        if self.events < 0 or not (self.hours >= 0 and math.isfinite(self.hours)):
            raise ValueError(f"exposure needs events >= 0 and finite hours >= 0: {self}")
        if self.events > 0 and self.hours == 0:
            raise ValueError("revocations without hours held")

    def __add__(self, other: Exposure) -> Exposure:
        return Exposure(self.events + other.events, self.hours + other.hours)


@dataclass(frozen=True)
class HazardEstimate:
    """Posterior of one pool's hazard. Rates are per hour held on spot."""

    rate_per_hour: float  # posterior mean
    ci_low_per_hour: float
    ci_high_per_hour: float
    level: float
    events: int
    exposure_hours: float
    prior: HazardPrior
    confidence: float
    available_share: float | None = None

    @property
    def posterior_shape(self) -> float:
        return self.prior.pseudo_events + self.events

    @property
    def posterior_hours(self) -> float:
        return self.prior.pseudo_hours + self.exposure_hours

    @property
    def observed_rate_per_hour(self) -> float | None:
        """Maximum-likelihood rate from the evidence alone (``None`` without hours)."""
        return self.events / self.exposure_hours if self.exposure_hours > 0 else None

    @property
    def source(self) -> HazardSource:
        return HazardSource.OBSERVED if self.exposure_hours > 0 else self.prior.source

    def to_hazard(self) -> Hazard:
        return Hazard(
            rate_per_hour=self.rate_per_hour,
            source=self.source,
            confidence=self.confidence,
            observed_hours=self.exposure_hours,
        )


def estimate_hazard(
    evidence: Exposure | Sequence[Exposure] = (),
    *,
    prior: HazardPrior | None = None,
    level: float = DEFAULT_LEVEL,
    available_share: float | None = None,
) -> HazardEstimate:
    """Combine evidence (traces, our own revocations) with the prior."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"credible level must be in (0, 1), got {level}")
    prior = prior or ASSUMED_PRIOR
    total = evidence if isinstance(evidence, Exposure) else sum(evidence, Exposure(0, 0.0))
    shape = prior.pseudo_events + total.events
    hours = prior.pseudo_hours + total.hours
    tail = (1.0 - level) / 2.0
    return HazardEstimate(
        rate_per_hour=shape / hours,
        ci_low_per_hour=gamma_quantile(tail, shape) / hours,
        ci_high_per_hour=gamma_quantile(1.0 - tail, shape) / hours,
        level=level,
        events=total.events,
        exposure_hours=total.hours,
        prior=prior,
        confidence=total.hours / hours,
        available_share=available_share,
    )


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


def estimate_from_revocations(
    event_times: Times,
    held_hours: float,
    *,
    prior: HazardPrior | None = None,
    level: float = DEFAULT_LEVEL,
) -> HazardEstimate:
    """Hazard from our own recorded revocations (timestamps) over ``held_hours``."""
    return estimate_hazard(
        Exposure(int(np.asarray(event_times).size), float(held_hours)), prior=prior, level=level
    )


def estimate_from_trace(
    trace: SpotTrace, *, prior: HazardPrior | None = None, level: float = DEFAULT_LEVEL
) -> HazardEstimate:
    """``estimate_from_counts`` over a loaded trace's ``available`` column
    (nodes that could be held per tick; ``markets.traces`` fixes its meaning)."""
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


def _seconds(times: Times) -> NDArray[np.float64]:
    """Sorted float seconds from numbers, datetime64 or aware datetimes
    (``datetime``, ``pd.Timestamp``: one call per event, not per probe)."""
    t = np.asarray(times)
    if t.dtype.kind == "M":
        t = t.astype("datetime64[ns]").astype(np.int64) / 1e9
    elif t.dtype.kind == "O":
        t = np.array([v.timestamp() if hasattr(v, "timestamp") else v for v in t.ravel()])
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


def _log_gamma_prefactor(a: float, x: float) -> float:
    return -x + a * math.log(x) - math.lgamma(a)


def _gamma_p(a: float, x: float) -> float:
    """Regularised lower incomplete gamma P(a, x): a series below a + 1, a
    continued fraction (modified Lentz) above (Numerical Recipes, section 6.2)."""
    if x <= 0:
        return 0.0
    if x < a + 1:
        term = total = 1.0 / a
        k = a
        while abs(term) > abs(total) * 1e-15:
            k += 1
            term *= x / k
            total += term
        return min(1.0, total * math.exp(_log_gamma_prefactor(a, x)))
    tiny = 1e-300
    b = x + 1 - a
    c = 1 / tiny
    d = 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return max(0.0, 1.0 - math.exp(_log_gamma_prefactor(a, x)) * h)


def gamma_quantile(q: float, shape: float) -> float:
    """Quantile of Gamma(shape, scale=1), by bisection on log x (scalars only:
    one call per pool, never per probe)."""
    if not (0 < q < 1 and shape > 0):
        raise ValueError("need 0 < q < 1 and shape > 0")
    lo, hi = -745.0, math.log(shape + 20 * math.sqrt(shape) + 50)
    for _ in range(200):
        mid = (lo + hi) / 2
        if _gamma_p(shape, math.exp(mid)) < q:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return math.exp((lo + hi) / 2)
