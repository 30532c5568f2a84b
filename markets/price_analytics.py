"""How a pool's spot price moves: volatility, regime shifts, spread across zones.

Owns: ``price_risk`` (one pool's change points as of a time -> a
``markets.model.SpotPriceRisk``: the current regime's level, when it began, the
weekly volatility and the planning margin), ``ZoneSpread`` and
``zone_spreads`` (how far apart the zones of one type in one region are
priced). Pure values in, values out.

Must not: read files, call a cloud, read the clock, or decide (a plan reads
``PoolSnapshot.planning_spot_usd_per_hour``; ``policies.cost_table`` prices
spot with it).

The model, over the trailing ``WINDOW_HOURS`` (4 weeks) before ``at``:

* The price is a step function (change points hold until the next), sampled
  hourly as in force; ``x_h`` is its log.
* Weekly volatility: the realised volatility of the hourly log returns,
  ``sqrt(168 * sum(r_h^2) / hours)`` (zero-mean returns, scaled by the square
  root of time: Andersen & Bollerslev 1998). A jump counts: a pool whose price
  jumps has shown that it does.
* Regime shifts: change points of ``x`` minimising the L2 cost of the segments
  plus a penalty per shift, exactly, by optimal partitioning (Jackson et al.
  2005, "An algorithm for optimal partitioning of data on an interval"; the
  optimum PELT, Killick, Fearnhead & Eckley 2012, reaches with pruning), over
  prefix sums: O(n^2) vectorised, a few ms for the window's 673 hours where
  ``ruptures.Pelt`` (pure Python cost calls) took seconds per pool, too slow
  for a snapshot. A shift starts at an hour where the price changed (for a
  step function, an L2-optimal split lies at a change unless the minimum
  length forces it inside a run; so candidates are the changes, a few dozen,
  not every hour). Segments last at least ``MIN_REGIME_HOURS`` (a day); the
  penalty is ``MIN_REGIME_HOURS * REGIME_SHIFT^2``: splitting off a segment
  of ``n`` hours whose level differs by ``d`` (in log) lowers the L2 cost by
  about ``n d^2``, so a shift of 10 % held for a day (or 5 % held four days)
  is where a split starts to pay; smaller or briefer moves are volatility only.
* The current regime's level: the geometric mean of the last segment's
  hourly prices, but never below the price in force (a plan pays at least
  that; a dip inside a dearer regime is priced at the regime). A drift over
  the window (a few percent a week on AWS since 2017) splits into
  shifts of the level like any lasting move; with the floor it is priced at
  today's price plus its volatility.
* Planning margin: ``level * (exp(RISK_Z * weekly volatility) - 1)``, one
  weekly standard deviation up: a plan holds its spot pools for about a week.
  So a pool whose price has just jumped is priced at its new level, plus the
  margin its jump earned.

Spread: per (provider, region, instance type) with spot priced in at least two
zones, ``max / min - 1`` of the prices in force and the cheapest zone.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
from numpy.typing import NDArray

from markets.model import PoolSnapshot, SpotPriceRisk

__all__ = [
    "HOURS_PER_WEEK",
    "MIN_REGIME_HOURS",
    "REGIME_SHIFT",
    "RISK_Z",
    "WINDOW_HOURS",
    "ZoneSpread",
    "price_risk",
    "zone_spreads",
]

HOURS_PER_WEEK = 168
WINDOW_HOURS = 4 * HOURS_PER_WEEK  # trailing history analysed
MIN_REGIME_HOURS = 24  # a regime lasts at least a day
REGIME_SHIFT = 0.10  # log-level change (about 10 %) held a day: a shift
RISK_Z = 1.0  # planning margin: one weekly standard deviation
_NS_PER_HOUR = 3_600_000_000_000


def _dt(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC)


def _breaks(x: NDArray[np.float64]) -> list[int]:
    """Change points of ``x`` (indices where a new segment starts) minimising
    the penalised L2 cost by optimal partitioning over prefix sums, a shift
    starting where the price changes (module docstring)."""
    n, m = len(x), MIN_REGIME_HOURS
    cand = np.flatnonzero(np.diff(x) != 0) + 1
    if n < 2 * m or not len(cand):
        return []
    pen = m * REGIME_SHIFT**2
    s1 = np.concatenate([[0.0], np.cumsum(x)])
    s2 = np.concatenate([[0.0], np.cumsum(x * x)])
    pos = np.concatenate([[0], cand[(cand >= m) & (cand <= n - m)], [n]])
    best = np.full(len(pos), np.inf)
    best[0] = -pen  # the first segment pays no penalty
    last = np.zeros(len(pos), dtype=np.int64)
    for j in range(1, len(pos)):
        t = int(pos[j])
        i = np.flatnonzero((pos[:j] <= t - m) & np.isfinite(best[:j]))
        if not len(i):
            continue
        s = pos[i]
        cost = (s2[t] - s2[s]) - (s1[t] - s1[s]) ** 2 / (t - s)
        total = best[i] + cost + pen
        k = int(np.argmin(total))
        best[j], last[j] = total[k], i[k]
    cuts: list[int] = []
    j = len(pos) - 1
    while j > 0:
        j = int(last[j])
        if j > 0:
            cuts.append(int(pos[j]))
    return sorted(cuts)


def price_risk(
    t_ns: NDArray[np.int64],
    usd_per_hour: NDArray[np.float64],
    at_ns: int,
    *,
    window_hours: int = WINDOW_HOURS,
) -> SpotPriceRisk | None:
    """The movement of a price given as change points (``t_ns`` ascending,
    each value holding until the next) as of ``at_ns`` (module docstring).
    ``None`` without a positive price in force at ``at_ns``."""
    t = np.asarray(t_ns, dtype=np.int64)
    v = np.asarray(usd_per_hour, dtype=np.float64)
    known = np.isfinite(v) & (v > 0)
    t, v = t[known], v[known]
    seen = int(np.searchsorted(t, at_ns, side="right"))
    if seen == 0:
        return None
    start = max(int(t[0]), at_ns - window_hours * _NS_PER_HOUR)
    grid = np.arange(start, at_ns + 1, _NS_PER_HOUR, dtype=np.int64)
    idx = np.searchsorted(t[:seen], grid, side="right") - 1
    x = np.log(v[np.maximum(idx, 0)])
    hours = max(len(x) - 1, 1)
    r = np.diff(x)
    vol = math.sqrt(HOURS_PER_WEEK * float(np.sum(r * r)) / hours)
    cuts = _breaks(x)
    first = cuts[-1] if cuts else 0
    mean = math.exp(float(np.mean(x[first:])))
    level = max(mean, math.exp(float(x[-1])))
    last_shift = None
    if cuts:
        before = cuts[-2] if len(cuts) > 1 else 0
        last_shift = mean / math.exp(float(np.mean(x[before:first]))) - 1.0
    return SpotPriceRisk(
        regime_usd_per_hour=level,
        regime_since=_dt(int(grid[first])) if cuts else None,
        shifts=len(cuts),
        last_shift=last_shift,
        weekly_volatility=vol,
        margin_usd_per_hour=level * math.expm1(RISK_Z * vol),
        window_hours=float(hours),
    )


@dataclass(frozen=True)
class ZoneSpread:
    """Spot prices in force across the zones of one type in one region."""

    provider: str
    region: str
    instance_type: str
    zones: int
    min_usd_per_hour: float
    max_usd_per_hour: float
    cheapest_zone: str

    @property
    def spread(self) -> float:
        """``max / min - 1``: 0.25 = the dearest zone costs 25 % more."""
        return self.max_usd_per_hour / self.min_usd_per_hour - 1.0

    def premium(self, usd_per_hour: float) -> float:
        """A zone's price over the cheapest zone's, as a share."""
        return usd_per_hour / self.min_usd_per_hour - 1.0


def zone_spreads(pools: Iterable[PoolSnapshot]) -> dict[tuple[str, str, str], ZoneSpread]:
    """Per (provider, region, type) priced in two zones or more."""
    groups: dict[tuple[str, str, str], list[tuple[float, str]]] = defaultdict(list)
    for p in pools:
        if p.spot_usd_per_hour is not None and p.spot_usd_per_hour > 0:
            key = (p.pool.provider.value, p.pool.region, p.pool.instance_type)
            groups[key].append((p.spot_usd_per_hour, p.pool.zone))
    out: dict[tuple[str, str, str], ZoneSpread] = {}
    for key, rows in groups.items():
        if len({z for _, z in rows}) < 2:
            continue
        cheapest = min(rows)
        out[key] = ZoneSpread(
            provider=key[0],
            region=key[1],
            instance_type=key[2],
            zones=len({z for _, z in rows}),
            min_usd_per_hour=cheapest[0],
            max_usd_per_hour=max(rows)[0],
            cheapest_zone=cheapest[1],
        )
    return out
