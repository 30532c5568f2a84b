"""The hazard prior: what an AWS Spot Instance Advisor bucket says before we watch.

Owns: ``monthly_share_to_rate``, the advisor bucket shares
(``ADVISOR_BUCKET_SHARES``), the prior's weight (``DEFAULT_PRIOR_HOURS``),
``HazardPrior`` (a Gamma prior written as pseudo-evidence) and
``ASSUMED_PRIOR`` (nothing known). ``markets.hazard.posterior`` combines a prior
with observed evidence.

An advisor bucket means a share ``p`` of instances reclaimed over a trailing
month; at a constant hazard an instance held for a month survives with
``exp(-730 lambda)``, so ``rate0 = -ln(1 - p) / 730`` (bucket 4, p = 0.25:
3.9e-4 per hour). That is a floor (most instances live less than a month) and a
region-wide aggregate: on the V100/K80 traces in us-west-2 (all bucket 4 in the
2025 advisor snapshot) the observed rates are 0.08-1.9 per hour held, hundreds
of times the prior. So the prior weighs as one day (24 pseudo-hours) of watching
the pool: it decides while we know nothing and is outvoted within days.

Must not: look at observations (``markets.hazard.posterior`` does), read files,
call a cloud, or take the spot placement score as an input.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from markets.model import DEFAULT_PRIOR_HOURS, HazardSource

__all__ = [
    "ADVISOR_BUCKET_SHARES",
    "ASSUMED_PRIOR",
    "DEFAULT_PRIOR_HOURS",
    "HOURS_PER_MONTH",
    "HazardPrior",
    "monthly_share_to_rate",
]

HOURS_PER_MONTH = 730.0  # 8760 / 12: the month AWS bills and the advisor's window
# Representative reclaimed share per advisor bucket (data/aws-spot-advisor
# "ranges": <5 %, 5-10 %, 10-15 %, 15-20 %, >20 %): bucket midpoints; the top
# bucket is open-ended, 25 % is our assumption for it.
ADVISOR_BUCKET_SHARES = (0.025, 0.075, 0.125, 0.175, 0.25)


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
# (docs/concepts/market.md), so assume it, labelled as an assumption.
ASSUMED_PRIOR = HazardPrior(
    monthly_share_to_rate(ADVISOR_BUCKET_SHARES[-1]), DEFAULT_PRIOR_HOURS, HazardSource.ASSUMED
)
