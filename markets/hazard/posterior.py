"""The interruption hazard: how often spot is taken back, per pool.

Owns: the per-pool interruption hazard (revocations per hour held on spot) as a
Gamma-Poisson posterior over observed evidence: ``Exposure`` (evidence, adding
across sources), ``estimate_hazard``, ``estimate_from_revocations`` (our own
recorded revocations), ``HazardEstimate`` (-> ``markets.model.Hazard``),
``Overdispersion`` (how much revocations bunch between periods, which discounts
the evidence) and the Gamma helpers behind the credible interval
(``gamma_quantile``, ``gamma_cdf``, ``gamma_log_hdi``). The prior comes from
``markets.hazard.prior`` (an AWS Spot Instance Advisor bucket, or
``ASSUMED_PRIOR``); evidence from a probe series or a trace from
``markets.hazard.probes``; how revocations bunch in time and across the pools
of a zone is ``markets.hazard.clustering``.

Inputs are plain values: revocations seen over hours held. It must not: read
files (``markets.files.traces`` loads them), call a cloud, or take the spot
placement score as an input. The placement score estimates whether a request
is *fulfilled*, not how long the capacity stays (docs/concepts/market.md), so
it is a separate signal and never enters the hazard.

The model, for ``k`` revocations seen over ``T`` hours held::

    prior      lambda ~ Gamma(a0, b0)   b0 = pseudo-hours, a0 = rate0 * b0
    evidence   k ~ Poisson(lambda * T)
    posterior  lambda ~ Gamma(a0 + k, b0 + T), mean (a0 + k) / (b0 + T)
             = Z * k/T + (1 - Z) * rate0, with Z = T / (T + b0)

``rate0`` and ``b0`` (one day of watching) are ``markets.hazard.prior``'s.

``confidence`` is Z = T / (T + b0): the share of the estimate resting on our own
observation, 0 with no data, 0.5 after ``b0`` hours held, -> 1. (The posterior
coefficient of variation, 1 / sqrt(a0 + k), was rejected: it does not move with
hours while no revocation is seen.) Statistical uncertainty is in the credible
interval.

The credible interval is the highest-density interval of ``log lambda`` (a rate
is a scale parameter; its natural axis is the log). The density of ``u = log
lambda`` is ``exp(a u - b e^u)``, which peaks at ``e^u = a / b``: the posterior
mean. So the interval always contains the estimate it is reported with. The
equal-tailed interval (the 5 % and 95 % quantiles) did not: an advisor prior is
``a0 = 0.0094`` pseudo-events (bucket 4, one day), so skewed that its mean lies
at its 95.7 % quantile, and 160 of 170 replayed pools showed an estimate above
their own interval.

Over-dispersion. Revocations bunch (83-97 % of preemptions are followed by
another in the same zone within 5 minutes, SkyServe, EuroSys 2025), so the
counts of a period are far more variable than Poisson. With ``Overdispersion``
(size ``r`` of a negative binomial per period of ``period_hours``: variance
``mu + mu^2 / r``, the Gamma-Poisson mixture of Greenwood & Yule 1920; Cameron &
Trivedi, *Regression Analysis of Count Data*, 2nd ed., section 3.3), the
evidence is discounted by the variance inflation of one period's count,
``phi = 1 + rate * period_hours / r`` (the NB likelihood's information on the
rate is the Poisson one over ``phi``). The prior is pseudo-evidence in the same
currency (hours of watching), so prior and evidence both divide by ``phi``: the
mean is the Poisson posterior's, only the interval widens. ``markets.hazard.holdout``
fits ``r`` on the first part of the traces and scores the rest.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from markets.hazard.prior import ASSUMED_PRIOR, HazardPrior
from markets.model import Hazard, HazardSource

if TYPE_CHECKING:
    from markets.hazard.clustering import Times

__all__ = [
    "DEFAULT_LEVEL",
    "Exposure",
    "HazardEstimate",
    "Overdispersion",
    "estimate_from_revocations",
    "estimate_hazard",
    "gamma_cdf",
    "gamma_log_hdi",
    "gamma_quantile",
]

DEFAULT_LEVEL = 0.9  # equal-tailed credible interval


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
class Overdispersion:
    """Period counts are negative binomial: mean ``rate * hours``, size ``size``
    (variance ``mu + mu^2 / size``), one period being ``period_hours``."""

    size: float
    period_hours: float

    def __post_init__(self) -> None:
        if not (self.size > 0 and math.isfinite(self.size) and self.period_hours > 0):
            raise ValueError(f"over-dispersion needs size > 0 and period_hours > 0: {self}")

    def inflation(self, rate_per_hour: float) -> float:
        """Variance of one period's count over its mean: ``1 + mu / size``."""
        return 1.0 + rate_per_hour * self.period_hours / self.size


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
    # divisor of the posterior's evidence from over-dispersion (1: counts taken as Poisson)
    evidence_divisor: float = 1.0

    @property
    def posterior_shape(self) -> float:
        return (self.prior.pseudo_events + self.events) / self.evidence_divisor

    @property
    def posterior_hours(self) -> float:
        return (self.prior.pseudo_hours + self.exposure_hours) / self.evidence_divisor

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
    dispersion: Overdispersion | None = None,
) -> HazardEstimate:
    """Combine evidence (traces, our own revocations) with the prior; with
    ``dispersion``, the evidence is discounted for bunching (module docstring)."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"credible level must be in (0, 1), got {level}")
    prior = prior or ASSUMED_PRIOR
    total = evidence if isinstance(evidence, Exposure) else sum(evidence, Exposure(0, 0.0))
    divisor = 1.0
    if dispersion is not None:
        plain = (prior.pseudo_events + total.events) / (prior.pseudo_hours + total.hours)
        divisor = dispersion.inflation(plain)
    # the prior is pseudo-evidence in the same currency (hours of watching):
    # both are discounted, so the mean is the Poisson one and only the width grows
    shape = (prior.pseudo_events + total.events) / divisor
    hours = (prior.pseudo_hours + total.hours) / divisor
    lo, hi = gamma_log_hdi(shape, level)
    return HazardEstimate(
        rate_per_hour=shape / hours,
        ci_low_per_hour=lo / hours,
        ci_high_per_hour=hi / hours,
        level=level,
        events=total.events,
        exposure_hours=total.hours,
        prior=prior,
        confidence=total.hours / (prior.pseudo_hours + total.hours),
        available_share=available_share,
        evidence_divisor=divisor,
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


def gamma_cdf(x: float, shape: float) -> float:
    """P(X <= x) for X ~ Gamma(shape, scale=1)."""
    if shape <= 0:
        raise ValueError("need shape > 0")
    return _gamma_p(shape, x)


def _lower_mass(a: float, v: float) -> float:
    """P(Y < e^v), Y ~ Gamma(a, 1); far left (e^v below the smallest float)
    by the series' leading term ``e^(a v) / Gamma(a + 1)``."""
    if v < -700.0:
        return math.exp(a * v - math.lgamma(a + 1.0))
    return _gamma_p(a, math.exp(v))


def _log_density(a: float, v: float) -> float:
    """log density of V = log Y, Y ~ Gamma(a, 1), up to its constant."""
    return a * v - math.exp(v) if v < 700.0 else -math.inf


def _side(a: float, c: float, mode: float, step: float) -> float:
    """The v on one side of ``mode`` (``step`` < 0: left) where the log
    density falls to ``c`` (it is concave and peaks at ``mode``)."""
    near, far = mode, mode + step
    while _log_density(a, far) > c:
        near, far = far, mode + 2.0 * (far - mode)
    for _ in range(100):
        mid = (near + far) / 2.0
        if _log_density(a, mid) > c:
            near = mid
        else:
            far = mid
        if abs(far - near) < 1e-10 * max(1.0, abs(mid)):
            break
    return (near + far) / 2.0


def gamma_log_hdi(shape: float, level: float) -> tuple[float, float]:
    """Highest-density interval of ``log Y`` for Y ~ Gamma(shape, scale=1),
    as bounds on Y. It contains the mean ``shape`` (where the density of
    ``log Y`` peaks). A bound below the smallest float is returned as 0."""
    if not (shape > 0 and 0 < level < 1):
        raise ValueError("need shape > 0 and 0 < level < 1")
    mode = math.log(shape)
    top = _log_density(shape, mode)

    def bounds(drop: float) -> tuple[float, float, float]:
        lo = _side(shape, top - drop, mode, -1.0 / shape - 1.0)
        hi = _side(shape, top - drop, mode, 1.0)
        return lo, hi, _lower_mass(shape, hi) - _lower_mass(shape, lo)

    small, big = 0.0, 1.0
    while bounds(big)[2] < level:
        small, big = big, 2.0 * big
    for _ in range(60):
        mid = (small + big) / 2.0
        if bounds(mid)[2] < level:
            small = mid
        else:
            big = mid
        if big - small < 1e-9:
            break
    lo, hi, _ = bounds(big)
    return (math.exp(lo) if lo > -745.0 else 0.0), math.exp(hi)


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
