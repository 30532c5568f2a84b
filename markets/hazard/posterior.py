"""The interruption hazard: how often spot is taken back, per pool.

Owns: the per-pool interruption hazard (revocations per hour held on spot) as a
Gamma-Poisson posterior over observed evidence: ``Exposure`` (evidence, adding
across sources), ``estimate_hazard``, ``estimate_from_revocations`` (our own
recorded revocations), ``HazardEstimate`` (-> ``markets.model.Hazard``) and
``gamma_quantile`` behind its credible interval. The prior comes from
``markets.hazard.prior`` (an AWS Spot Instance Advisor bucket, or
``ASSUMED_PRIOR``); evidence from a probe series or a trace from
``markets.hazard.probes``; how revocations bunch in time and across the pools
of a zone is ``markets.hazard.clustering``.

Inputs are plain values: revocations seen over hours held. It must not: read
files (``markets.files.traces`` loads them), call a cloud, or take the spot
placement score as an input. The placement score estimates whether a request
is *fulfilled*, not how long the capacity stays (economics.md section 7), so
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
    "estimate_from_revocations",
    "estimate_hazard",
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
