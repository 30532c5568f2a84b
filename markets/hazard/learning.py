"""Learning from the account: the daemon's own revocations and hours held
update each pool's hazard.

Owns ``snapshot_prior`` (a snapshot's hazard read back as the Gamma prior it
is the mean of), ``learned_hazard`` (that prior updated with the account's
``Exposure``: the Gamma-Poisson of ``markets.hazard.posterior``) and
``with_experience`` (a snapshot whose pools carry the learned hazards) and
``LearnedMarket`` (any price source whose snapshots do, the experience read
from a callable the composition root hands in). The
daemon's store keeps the experience (``pool_experience``), so a restart does
not forget it; the plan prices spot with the learned hazard, and the
lifecycle, which reads the same snapshot, ranks replacements by it.

A snapshot's ``Hazard`` carries its mean and the share of it resting on
observation (``confidence`` = T / (T + b0)): its Gamma has ``T + b0`` hours
behind it, ``T / confidence`` (``b0``, one day, when nothing was observed).
The account's ``k`` revocations over ``T_a`` hours held then give the mean
``(rate * H + k) / (H + T_a)``: the market's view is outvoted by the
account's own within as many hours held as stand behind it.

Must not: read the store or files (the daemon hands the experience in), call
a cloud, or take the placement score as an input (``markets.hazard.posterior``
says why).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

import pandas as pd

from markets.hazard.posterior import Exposure
from markets.hazard.prior import DEFAULT_PRIOR_HOURS, HazardPrior
from markets.model import FailureDomain, Hazard, HazardSource, InstanceType, MarketSnapshot, Pool
from markets.protocols import HistorySource, PriceSource

__all__ = [
    "LearnedHistory",
    "LearnedMarket",
    "learned_hazard",
    "snapshot_prior",
    "with_experience",
]

_MIN_RATE = 1e-9  # a Gamma prior needs a positive rate: "never seen" is not "never"


def snapshot_prior(hazard: Hazard) -> HazardPrior:
    """The Gamma prior whose mean a snapshot's hazard is (module docstring)."""
    hours = hazard.observed_gamma_hours or DEFAULT_PRIOR_HOURS
    return HazardPrior(max(hazard.rate_per_hour, _MIN_RATE), hours, hazard.source)


def learned_hazard(hazard: Hazard, experience: Exposure) -> Hazard:
    """``hazard`` updated with the account's ``experience``."""
    if experience.hours <= 0:
        return hazard
    prior = snapshot_prior(hazard)
    hours = prior.pseudo_hours + experience.hours
    observed = hazard.observed_hours + experience.hours
    return Hazard(
        rate_per_hour=(prior.pseudo_events + experience.events) / hours,
        source=HazardSource.OBSERVED,
        confidence=min(1.0, observed / hours),
        observed_hours=observed,
    )


def with_experience(snapshot: MarketSnapshot, experience: Mapping[str, Exposure]) -> MarketSnapshot:
    """``snapshot`` with every pool that has experience at its learned hazard
    (the same object when no pool has any)."""
    pools = []
    changed = False
    for p in snapshot.pools:
        exp = experience.get(p.pool.key)
        if exp is None or exp.hours <= 0:
            pools.append(p)
            continue
        pools.append(p.model_copy(update={"hazard": learned_hazard(p.hazard, exp)}))
        changed = True
    if not changed:
        return snapshot
    return snapshot.model_copy(update={"pools": tuple(pools)})


class LearnedMarket:
    """``base``'s snapshots at the hazards learned from ``experience()``
    (read at every snapshot: pool key -> the account's ``Exposure``), and
    with the failure domains ``domains()`` finds in the account's record
    (``markets.hazard.clustering.failure_domains``) in place of ``base``'s
    for the zones they cover (the account's own record is the nearer
    evidence; ``base``'s stand for the zones it does not cover)."""

    def __init__(
        self,
        base: PriceSource,
        experience: Callable[[], Mapping[str, Exposure]],
        domains: Callable[[], tuple[FailureDomain, ...]] | None = None,
    ) -> None:
        self.base = base
        self.name = base.name
        self._experience = experience
        self._domains = domains

    def pools(self) -> Sequence[Pool]:
        return self.base.pools()

    def instance_types(self) -> Sequence[InstanceType]:
        return self.base.instance_types()

    def snapshot(self, at: datetime | None = None) -> MarketSnapshot:
        snap = with_experience(self.base.snapshot(at), self._experience())
        own = self._domains() if self._domains is not None else ()
        if not own:
            return snap
        mine = {z for d in own for z in d.zones}
        kept = tuple(d for d in snap.failure_domains if not mine & set(d.zones))
        merged = tuple(sorted((*kept, *own), key=lambda d: d.name))
        return snap.model_copy(update={"failure_domains": merged})


class LearnedHistory(LearnedMarket):
    """A ``LearnedMarket`` over a history: its time axis and hourly rows are
    ``base``'s (prices, availability), its snapshots' hazards learned (what
    the what-if prices spot with)."""

    def __init__(
        self,
        base: HistorySource,
        experience: Callable[[], Mapping[str, Exposure]],
        domains: Callable[[], tuple[FailureDomain, ...]] | None = None,
    ) -> None:
        super().__init__(base, experience, domains)
        self.history = base

    def span(self) -> tuple[datetime, datetime]:
        return self.history.span()

    def hourly(self, start: datetime, hours: int) -> pd.DataFrame:
        return self.history.hourly(start, hours)
