"""Interruption hazard for live AWS pools that have no history of their own.

Owns: ``assumed_hazard`` (nothing known: a conservative configured default)
and ``advisor_hazard`` (a prior from the Spot Instance Advisor bucket). The
estimator from observed history is ``markets.interruptions``; this module is
the fallback the live adapter uses before any history exists.

Must not: estimate from data, or read the placement score (a fulfilment
signal, not an interruption one).
"""

from __future__ import annotations

import math

from markets.model import Hazard, HazardSource

__all__ = [
    "ADVISOR_BUCKET_MONTHLY_SHARE",
    "HOURS_PER_MONTH",
    "advisor_hazard",
    "assumed_hazard",
    "rate_from_monthly_share",
]

# Spot Instance Advisor buckets: share of instances reclaimed over the trailing
# month: <5 %, 5-10 %, 10-15 %, 15-20 %, >20 % (shared/data/README.md, economics
# section 7). We take each bucket's midpoint; the open top bucket is taken as
# 25 %, an assumption (GPU types often sit there).
ADVISOR_BUCKET_MONTHLY_SHARE: tuple[float, ...] = (0.025, 0.075, 0.125, 0.175, 0.25)

HOURS_PER_MONTH = 365 * 24 / 12  # 730

# How much a single advisor bucket says about one pool: a region-wide,
# month-averaged figure, so little.
_ADVISOR_CONFIDENCE = 0.2
_ASSUMED_CONFIDENCE = 0.05
_ASSUMED_BUCKET = 4  # assume the worst bucket when nothing is known


def rate_from_monthly_share(share: float) -> float:
    """Hourly hazard of a Poisson process that reclaims ``share`` of the
    instances held for a month: ``1 - exp(-rate * 730) = share``."""
    if not 0.0 <= share < 1.0:
        raise ValueError(f"monthly share must be in [0, 1), got {share}")
    return -math.log1p(-share) / HOURS_PER_MONTH


def advisor_hazard(bucket: int) -> Hazard:
    """A prior from a Spot Instance Advisor bucket index (0-4)."""
    if not 0 <= bucket < len(ADVISOR_BUCKET_MONTHLY_SHARE):
        raise ValueError(f"advisor bucket must be 0-4, got {bucket}")
    return Hazard(
        rate_per_hour=rate_from_monthly_share(ADVISOR_BUCKET_MONTHLY_SHARE[bucket]),
        source=HazardSource.ADVISOR,
        confidence=_ADVISOR_CONFIDENCE,
    )


def assumed_hazard() -> Hazard:
    """Nothing known: the top advisor bucket's rate, flagged ``assumed``."""
    return Hazard(
        rate_per_hour=rate_from_monthly_share(ADVISOR_BUCKET_MONTHLY_SHARE[_ASSUMED_BUCKET]),
        source=HazardSource.ASSUMED,
        confidence=_ASSUMED_CONFIDENCE,
    )
