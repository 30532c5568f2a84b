"""Interruption hazard for live AWS pools that have no history of their own.

Owns: ``assumed_hazard`` (nothing known: a conservative configured default)
and ``advisor_hazard`` (a prior from the Spot Instance Advisor bucket), as
``Hazard`` values with the live adapter's confidence. The bucket shares and the
monthly-share -> hourly-rate conversion are ``markets.hazard.prior``'s; the
estimator from observed history is ``markets.hazard.posterior``; this module is
the fallback the live adapter uses before any history exists.

Must not: estimate from data, keep its own copy of the bucket maths, or read
the placement score (a fulfilment signal, not an interruption one).
"""

from __future__ import annotations

from markets.hazard.prior import ASSUMED_PRIOR, HazardPrior
from markets.model import Hazard, HazardSource

__all__ = ["advisor_hazard", "assumed_hazard"]

# How much a single advisor bucket says about one pool: a region-wide,
# month-averaged figure, so little.
_ADVISOR_CONFIDENCE = 0.2
_ASSUMED_CONFIDENCE = 0.05


def advisor_hazard(bucket: int) -> Hazard:
    """A prior from a Spot Instance Advisor bucket index (0-4)."""
    return Hazard(
        rate_per_hour=HazardPrior.from_advisor_bucket(bucket).rate_per_hour,
        source=HazardSource.ADVISOR,
        confidence=_ADVISOR_CONFIDENCE,
    )


def assumed_hazard() -> Hazard:
    """Nothing known: the top advisor bucket's rate (``ASSUMED_PRIOR``), flagged
    ``assumed``."""
    return Hazard(
        rate_per_hour=ASSUMED_PRIOR.rate_per_hour,
        source=HazardSource.ASSUMED,
        confidence=_ASSUMED_CONFIDENCE,
    )
