"""The what-if's stressed market: hazards and availability scaled where they are billed too.

Owns: ``MarketStress`` (``interruption_multiplier``, ``availability_multiplier``;
``X1`` is no stress) and ``stressed`` (a view of any market with the stress
applied: a ``PriceSource`` stays one, a ``HistorySource``, the default market
or a replayed recording, stays one). Everything the what-if reads of the
market goes through the view, so the plan, the replayed planning loop, the
lifecycle's reaction and the bill all see the same stressed market:

- snapshots: every pool's hazard rate x ``interruption_multiplier``; its
  ``available_share`` and ``placement_score`` (the planner's spot capacity)
  x ``availability_multiplier`` (score at least 1; no spot at 0);
- the hourly frame (what is billed, ``MarketActuals``): the share of each hour
  spot is held, ``s``, becomes ``min(1, a * s * exp(-(m - 1) * lambda))`` with
  ``lambda`` the pool's listed hazard per hour held: the recorded losses, plus
  the revocations the multiplier adds, each taking its instance for the rest
  of the hour (the survival of ``(m - 1) * lambda`` over one hour), then
  scaled by the availability. At ``X1`` the frame is the market's own.

Must not: decide, plan or bill; change prices (a stress of the hazard is not
one of the price).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from markets.model import MarketSnapshot, PoolSnapshot
from markets.protocols import HistorySource, PriceSource
from markets.wrapped import AdjustedSnapshots

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["X1", "MarketStress", "stressed"]


@dataclass(frozen=True)
class MarketStress:
    """How much worse than recorded the market is (1.0: as recorded)."""

    interruption_multiplier: float = 1.0
    availability_multiplier: float = 1.0

    @property
    def is_x1(self) -> bool:
        return self.interruption_multiplier == 1.0 and self.availability_multiplier == 1.0

    def label(self) -> str:
        return (
            f"x{self.interruption_multiplier:g} interruptions, "
            f"x{self.availability_multiplier:g} availability"
        )

    def held_share(self, share: float, hazard_per_hour: float) -> float:
        """A recorded held share of an hour in the stressed market (module docstring)."""
        extra = (self.interruption_multiplier - 1.0) * hazard_per_hour
        return min(1.0, max(0.0, self.availability_multiplier * share * math.exp(-extra)))

    def pool(self, p: PoolSnapshot) -> PoolSnapshot:
        a = self.availability_multiplier
        hazard = p.hazard.model_copy(
            update={"rate_per_hour": p.hazard.rate_per_hour * self.interruption_multiplier}
        )
        score = p.placement_score
        if score is not None:
            score = max(1, min(10, round(score * a)))
        share = None if p.available_share is None else min(1.0, p.available_share * a)
        return p.model_copy(
            update={
                "hazard": hazard,
                "placement_score": score,
                "available_share": share,
                "spot_available": p.spot_available and a > 0,
            }
        )

    def snapshot(self, snap: MarketSnapshot) -> MarketSnapshot:
        if self.is_x1:
            return snap
        return snap.model_copy(update={"pools": tuple(self.pool(p) for p in snap.pools)})


X1 = MarketStress()


class _StressedPrices(AdjustedSnapshots):
    """A ``PriceSource`` whose snapshots are stressed."""

    def __init__(self, market: PriceSource, stress: MarketStress) -> None:
        super().__init__(market)
        self.stress = stress

    def adjust(self, snapshot: MarketSnapshot) -> MarketSnapshot:
        return self.stress.snapshot(snapshot)


class _StressedHistory(_StressedPrices):
    """A ``HistorySource`` whose snapshots and hourly frame are stressed."""

    def __init__(self, market: HistorySource, stress: MarketStress) -> None:
        super().__init__(market, stress)
        self._history = market

    def span(self) -> tuple[datetime, datetime]:
        return self._history.span()

    def hourly(self, start: datetime, hours: int) -> pd.DataFrame:
        frame = self._history.hourly(start, hours)
        if self.stress.is_x1 or frame.empty:
            return frame
        # The listed hazard at the frame's start (the recorded one, unstressed).
        hazard = {p.pool.key: p.hazard.rate_per_hour for p in self._history.snapshot(start).pools}
        keys = frame["pool_key"].to_numpy()
        lam = np.array([hazard.get(str(k), 0.0) for k in keys], dtype=float)
        share = frame["spot_available"].to_numpy(dtype=float)
        extra = (self.stress.interruption_multiplier - 1.0) * lam
        held = self.stress.availability_multiplier * share * np.exp(-extra)
        out = frame.copy()
        # NaN (unknown) stays unknown: billing reads it as held.
        out["spot_available"] = np.where(np.isnan(share), share, np.clip(held, 0.0, 1.0))
        return out


def stressed(market: PriceSource, stress: MarketStress) -> PriceSource:
    """``market`` as seen under ``stress`` (the market itself at ``X1``)."""
    if stress.is_x1:
        return market
    if isinstance(market, HistorySource):
        return _StressedHistory(market, stress)
    return _StressedPrices(market, stress)
