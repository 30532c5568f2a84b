"""Is the hazard calibrated? Fit on the first part of each trace, score the rest.

Owns: ``CalibrationTrace`` (one probe trace with its pool's prior, built from
loaded ``SpotTrace`` values),
``period_counts`` (a trace cut into periods: revocations and node-hours held),
``fit_overdispersion`` (the negative binomial size of period counts, by maximum
likelihood), ``calibrate`` and its ``CalibrationReport``.

Not to be confused with ``markets.default.calibration``, which states the
figures the *default market's generator* is tuned to; this module measures
whether the *posterior* (``markets.hazard.posterior``) predicts revocations it
has not seen.

The measurement, per trace (``train_share`` of its ticks, 0.7, to fit; the rest
held back):

1. Cut both parts into periods of ``period_hours`` (24: a pool-day, the
   horizon a plan prices); a period counts the node revocations seen in it and
   the node-hours held. Held-back periods with no hour held (spot could not be
   had all day) predict nothing and are not scored; a period shorter than half
   ``period_hours`` (a part's ragged end) is dropped.
2. Fit on the training periods: each pool's rate (training events / hours) and
   one over-dispersion size ``r`` for all pools (``fit_overdispersion``).
3. Each pool's posterior: its prior (the advisor bucket's, else the assumed
   one) with its training evidence, discounted for over-dispersion
   (``estimate_hazard(dispersion=...)``).
4. Score every held-back pool-period ``(k revocations, T hours held)`` under:
   ``posterior`` (the predictive: a negative binomial of size ``r`` and mean
   ``lambda T``, mixed over the posterior of ``lambda``), ``posterior_plain``
   (the Poisson model without over-dispersion: a Gamma-Poisson predictive),
   ``advisor_prior`` (the prior alone, what we would believe with no trace),
   ``pooled_rate`` (one rate for every pool, from all training periods, with the
   same ``r``). Coverage: the share of periods whose ``k`` lies in the central
   ``level`` (0.9) predictive interval ``[F^-1(0.05), F^-1(0.95)]`` (counts are
   whole, so a calibrated interval covers at least ``level``); log-likelihood:
   the sum of ``log p(k)``. Traces too short for one training period give a
   report that measured nothing (no periods, ``None`` figures).

Must not: read files (the caller passes loaded traces), call a cloud, or
change a prior or a posterior used elsewhere (it reports; the callers decide).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, stats

from markets.hazard.posterior import Exposure, Overdispersion, estimate_hazard
from markets.hazard.prior import ASSUMED_PRIOR, HazardPrior

if TYPE_CHECKING:
    from markets.files.traces import SpotTrace

__all__ = [
    "DEFAULT_PERIOD_HOURS",
    "DEFAULT_TRAIN_SHARE",
    "CalibrationJson",
    "CalibrationReport",
    "CalibrationTrace",
    "PoolCalibration",
    "calibrate",
    "fit_overdispersion",
    "period_counts",
]

DEFAULT_PERIOD_HOURS = 24.0  # a pool-day: what one plan prices
DEFAULT_TRAIN_SHARE = 0.7
MIXTURE_NODES = 41  # equal-probability nodes of the rate posterior in the predictive
# bounds on log r searched by the fit: r from 0.0025 (wild bursts) to 22,000 (Poisson)
_LOG_SIZE_BOUNDS = (-6.0, 10.0)


@dataclass(frozen=True)
class CalibrationTrace:
    """One trace: ``counts[i]`` nodes held during tick ``i`` of ``gap_s``
    seconds, in pool ``pool_key`` whose prior is ``prior``."""

    pool_key: str
    trace_id: str
    counts: NDArray[np.int64] = field(repr=False)
    gap_s: float
    prior: HazardPrior

    @classmethod
    def from_spot_trace(cls, trace: SpotTrace, prior: HazardPrior) -> CalibrationTrace:
        counts = trace.frame["available"].to_numpy().astype(np.int64)
        return cls(trace.pool_key, trace.path, counts, trace.gap_seconds, prior)

    @classmethod
    def from_spot_traces(
        cls, traces: Sequence[SpotTrace], priors: Mapping[str, HazardPrior]
    ) -> list[CalibrationTrace]:
        """Loaded traces, each with its pool's prior (``ASSUMED_PRIOR`` for a
        pool ``priors`` does not name)."""
        return [cls.from_spot_trace(tr, priors.get(tr.pool_key, ASSUMED_PRIOR)) for tr in traces]


class PoolCalibrationJson(TypedDict):
    pool_key: str
    train_events: int
    train_hours: float
    rate_per_hour: float
    ci_low_per_hour: float
    ci_high_per_hour: float
    test_periods: int
    covered: int


class CalibrationJson(TypedDict):
    """``CalibrationReport.to_json``: what ``spotfolio bench`` reports as
    ``markets.calibration`` and ``market show --json`` as ``calibration``."""

    period_hours: float
    train_share: float
    level: float
    traces: int
    train_periods: int
    test_periods: int
    coverage: float | None
    coverage_plain: float | None
    coverage_target: list[float]
    coverage_target_met: bool | None
    dispersion_size: float | None
    pooled_rate_per_hour: float | None
    log_likelihood: dict[str, float]
    log_likelihood_per_period: dict[str, float]
    pools: list[PoolCalibrationJson]


@dataclass(frozen=True)
class PoolCalibration:
    """One pool's fit and how its held-back periods scored."""

    pool_key: str
    train_events: int
    train_hours: float
    rate_per_hour: float  # the fitted posterior's mean
    ci_low_per_hour: float
    ci_high_per_hour: float
    test_periods: int
    covered: int


@dataclass(frozen=True)
class CalibrationReport:
    """The measurement (module docstring); log-likelihoods are sums over the
    held-back periods, natural log."""

    period_hours: float
    train_share: float
    level: float
    traces: int
    train_periods: int
    test_periods: int
    dispersion_size: float | None
    pooled_rate_per_hour: float | None
    coverage: float | None
    coverage_plain: float | None
    log_likelihood: dict[str, float]
    pools: tuple[PoolCalibration, ...]

    @property
    def coverage_target_met(self) -> bool | None:
        """Coverage within ``level`` +- 0.05 (the bench's target: 85-95 % for 90 %)."""
        if self.coverage is None:
            return None
        return self.level - 0.05 <= self.coverage <= self.level + 0.05

    def to_json(self) -> CalibrationJson:
        n = max(self.test_periods, 1)
        return {
            "period_hours": self.period_hours,
            "train_share": self.train_share,
            "level": self.level,
            "traces": self.traces,
            "train_periods": self.train_periods,
            "test_periods": self.test_periods,
            "coverage": _round(self.coverage, 4),
            "coverage_plain": _round(self.coverage_plain, 4),
            "coverage_target": [round(self.level - 0.05, 4), round(self.level + 0.05, 4)],
            "coverage_target_met": self.coverage_target_met,
            "dispersion_size": _round(self.dispersion_size, 4),
            "pooled_rate_per_hour": _round(self.pooled_rate_per_hour, 6),
            "log_likelihood": {k: round(v, 2) for k, v in self.log_likelihood.items()},
            "log_likelihood_per_period": {
                k: round(v / n, 4) for k, v in self.log_likelihood.items()
            },
            "pools": [
                {
                    "pool_key": p.pool_key,
                    "train_events": p.train_events,
                    "train_hours": round(p.train_hours, 2),
                    "rate_per_hour": p.rate_per_hour,
                    "ci_low_per_hour": p.ci_low_per_hour,
                    "ci_high_per_hour": p.ci_high_per_hour,
                    "test_periods": p.test_periods,
                    "covered": p.covered,
                }
                for p in self.pools
            ],
        }


def _round(x: float | None, digits: int) -> float | None:
    return None if x is None else round(x, digits)


def period_counts(
    counts: NDArray[np.int64], gap_s: float, lo: int, hi: int, period_hours: float
) -> list[Exposure]:
    """Ticks ``[lo, hi)`` cut into periods of ``period_hours``: per period the
    node drops seen at its ticks and the node-hours held over them (a period
    shorter than half ``period_hours`` is dropped)."""
    per = max(1, round(period_hours * 3600.0 / gap_s))
    out: list[Exposure] = []
    for start in range(lo, hi, per):
        end = min(hi, start + per)
        if (end - start) * gap_s < 0.5 * period_hours * 3600.0:
            continue
        first = max(start, 1)
        drops = np.maximum(counts[first - 1 : end - 1] - counts[first:end], 0)
        held = float(counts[start:end].sum()) * gap_s / 3600.0
        out.append(Exposure(int(drops.sum()), held) if held > 0 else Exposure(0, 0.0))
    return out


def _nb_logpmf(k: NDArray[np.int64], size: float, mean: NDArray[np.float64]) -> NDArray[np.float64]:
    m = np.maximum(mean, 1e-300)
    return np.asarray(stats.nbinom.logpmf(k, size, size / (size + m)), dtype=np.float64)


def fit_overdispersion(rows: Sequence[tuple[int, float]], period_hours: float) -> Overdispersion:
    """Maximum-likelihood size ``r`` of ``k ~ NB(mean, r)`` over ``(k, mean)``
    rows (each period's count and its expected count at its pool's rate)."""
    if not rows:
        raise ValueError("no training periods to fit over-dispersion on")
    k = np.array([r[0] for r in rows], dtype=np.int64)
    mean = np.array([r[1] for r in rows], dtype=np.float64)

    def nll(log_size: float) -> float:
        return -float(_nb_logpmf(k, math.exp(log_size), mean).sum())

    res = optimize.minimize_scalar(nll, bounds=_LOG_SIZE_BOUNDS, method="bounded")
    return Overdispersion(size=math.exp(float(res.x)), period_hours=period_hours)


@dataclass(frozen=True)
class _Predictive:
    """A count distribution as its pmf over 0..len-1 (the rest of the mass is
    in the last bin's tail, never needed: the grid reaches far past k)."""

    pmf: NDArray[np.float64]

    def logpmf(self, k: int) -> float:
        p = float(self.pmf[k]) if k < len(self.pmf) else 0.0
        return math.log(p) if p > 0 else -math.inf

    def covers(self, k: int, level: float) -> bool:
        tail = (1.0 - level) / 2.0
        cdf = np.cumsum(self.pmf)
        low = int(np.searchsorted(cdf, tail - 1e-12))
        high = int(np.searchsorted(cdf, 1.0 - tail - 1e-12))
        return low <= k <= high


def _grid(k: int, mean: float) -> NDArray[np.int64]:
    return np.arange(int(max(k, mean) * 20 + 200), dtype=np.int64)


def _gamma_poisson(shape: float, rate_hours: float, hours: float, k: int) -> _Predictive:
    """Predictive count over ``hours`` for ``lambda ~ Gamma(shape, rate_hours)``."""
    ks = _grid(k, shape / rate_hours * hours)
    pmf = stats.nbinom.pmf(ks, shape, rate_hours / (rate_hours + hours))
    return _Predictive(np.asarray(pmf, dtype=np.float64))


def _mixed_nb(shape: float, rate_hours: float, hours: float, size: float, k: int) -> _Predictive:
    """Predictive count: NB(size, mean lambda * hours) mixed over lambda ~
    Gamma(shape, rate_hours), on equal-probability nodes of the Gamma."""
    q = (np.arange(MIXTURE_NODES) + 0.5) / MIXTURE_NODES
    lam = np.asarray(stats.gamma.ppf(q, shape, scale=1.0 / rate_hours), dtype=np.float64)
    ks = _grid(k, float(lam.max()) * hours)
    mean = np.maximum(lam * hours, 1e-300)
    pmf = stats.nbinom.pmf(ks[:, None], size, size / (size + mean[None, :])).mean(axis=1)
    return _Predictive(np.asarray(pmf, dtype=np.float64))


def _nb(size: float, mean: float, k: int) -> _Predictive:
    ks = _grid(k, mean)
    m = max(mean, 1e-300)
    return _Predictive(np.asarray(stats.nbinom.pmf(ks, size, size / (size + m)), dtype=np.float64))


def calibrate(
    traces: Sequence[CalibrationTrace],
    *,
    period_hours: float = DEFAULT_PERIOD_HOURS,
    train_share: float = DEFAULT_TRAIN_SHARE,
    level: float = 0.9,
) -> CalibrationReport:
    """Fit on the first ``train_share`` of every trace, score the rest
    (module docstring)."""
    if not traces:
        raise ValueError("calibration needs at least one trace")
    if not (0 < train_share < 1 and period_hours > 0 and 0 < level < 1):
        raise ValueError("need 0 < train_share < 1, period_hours > 0, 0 < level < 1")
    train: dict[str, list[Exposure]] = defaultdict(list)
    test: dict[str, list[Exposure]] = defaultdict(list)
    priors: dict[str, HazardPrior] = {}
    for tr in traces:
        n = len(tr.counts)
        cut = int(n * train_share)
        train[tr.pool_key] += period_counts(tr.counts, tr.gap_s, 0, cut, period_hours)
        test[tr.pool_key] += [
            e for e in period_counts(tr.counts, tr.gap_s, cut, n, period_hours) if e.hours > 0
        ]
        priors.setdefault(tr.pool_key, tr.prior)
    totals = {p: sum(v, Exposure(0, 0.0)) for p, v in train.items()}
    own = {p: t.events / t.hours if t.hours > 0 else None for p, t in totals.items()}
    rows = [
        (e.events, rate * e.hours)
        for p, periods in train.items()
        if (rate := own[p]) is not None
        for e in periods
        if e.hours > 0
    ]
    if not rows:  # traces too short for one training period: nothing measured
        return CalibrationReport(
            period_hours, train_share, level, len(traces), 0, 0, None, None, None, None, {}, ()
        )
    dispersion = fit_overdispersion(rows, period_hours)
    everything = sum(totals.values(), Exposure(0, 0.0))
    pooled = everything.events / everything.hours if everything.hours > 0 else 0.0
    ll = dict.fromkeys(("posterior", "posterior_plain", "advisor_prior", "pooled_rate"), 0.0)
    covered = covered_plain = scored = 0
    pools: list[PoolCalibration] = []
    for pool in sorted(test):
        prior = priors[pool]
        est = estimate_hazard(totals[pool], prior=prior, level=level, dispersion=dispersion)
        plain = estimate_hazard(totals[pool], prior=prior, level=level)
        hits = 0
        for e in test[pool]:
            fitted = _mixed_nb(
                est.posterior_shape, est.posterior_hours, e.hours, dispersion.size, e.events
            )
            poisson = _gamma_poisson(
                plain.posterior_shape, plain.posterior_hours, e.hours, e.events
            )
            alone = _gamma_poisson(prior.pseudo_events, prior.pseudo_hours, e.hours, e.events)
            ll["posterior"] += fitted.logpmf(e.events)
            ll["posterior_plain"] += poisson.logpmf(e.events)
            ll["advisor_prior"] += alone.logpmf(e.events)
            ll["pooled_rate"] += _nb(dispersion.size, pooled * e.hours, e.events).logpmf(e.events)
            hit = fitted.covers(e.events, level)
            hits += hit
            covered_plain += poisson.covers(e.events, level)
        covered += hits
        scored += len(test[pool])
        pools.append(
            PoolCalibration(
                pool_key=pool,
                train_events=totals[pool].events,
                train_hours=totals[pool].hours,
                rate_per_hour=est.rate_per_hour,
                ci_low_per_hour=est.ci_low_per_hour,
                ci_high_per_hour=est.ci_high_per_hour,
                test_periods=len(test[pool]),
                covered=hits,
            )
        )
    return CalibrationReport(
        period_hours=period_hours,
        train_share=train_share,
        level=level,
        traces=len(traces),
        train_periods=sum(len(v) for v in train.values()),
        test_periods=scored,
        dispersion_size=dispersion.size,
        pooled_rate_per_hour=pooled,
        coverage=covered / scored if scored else None,
        coverage_plain=covered_plain / scored if scored else None,
        log_likelihood=ll,
        pools=tuple(pools),
    )
