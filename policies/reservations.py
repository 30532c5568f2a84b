"""Committed capacity (reservations, savings plans, CUDs): how many units to commit.

Owns: the break-even occupancy of a committed unit, the committed count for an
hourly demand series (docs/concepts/reservations.md), the cost of any commitment
level and the what-if comparison of levels ("raise committed from 40 % to 60 %
of peak?").

Must not: do I/O, read prices from markets, or plan across workload classes
and spot (the optimizer does, and must reproduce ``committed_count`` in the
special case this module covers: one demand series, one alternative price).

The rule: a committed unit costs ``p_R`` every hour, used or not. The k-th unit
is used in the hours where demand ``D >= k``, replacing a unit bought at
``p_alt`` (on-demand, or the *effective* spot cost for restart-tolerant work).
It pays iff ``P(D >= k) > p_R / p_alt``, the break-even occupancy. Because
``P(D >= k)`` falls as ``k`` grows, the units that pay are exactly 1..K. With
``p_R = (1 - d) p_OD`` and ``p_alt = p_OD``, K is the d-quantile of hourly
demand (a 40 % discount commits the 40th percentile).

Demand is counted in whole units: fractional hourly demand is rounded up
(capacity is bought in whole units), after forgiving float noise of 1e-9.

The term. A commitment bills every hour of its term (``term_hours``: 8,760 for
one year), not only the hours of the series. Demand that persists (serving,
a recurring job: ``persists``) is taken to repeat the series' pattern over the
term, so the rule above holds as is. A finite series (a job that ends) is
demand for its own hours only, zero for the rest of the term: the k-th unit is
busy ``count(D >= k) / term_hours`` of the term, so a 20-day job never
justifies a 1-year commitment at any real discount (``480 / 8760 = 5.5 %``).
Pass ``term_hours`` for a finite series; leave it ``None`` for one that
repeats.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from policies.workloads.spec import Workload, WorkloadClass

__all__ = [
    "CommitmentComparison",
    "CommitmentCost",
    "CommitmentStep",
    "breakeven_occupancy",
    "commitment_cost",
    "committed_count",
    "compare_commitment_levels",
    "marginal_occupancy",
    "persists",
]

# Relative slack for ties: P(D >= k) within this of p_R / p_alt is a tie.
_TIE_TOL = 1e-9


def _as_units(hourly_demand: Sequence[float] | npt.ArrayLike) -> npt.NDArray[np.int64]:
    d = np.asarray(hourly_demand, dtype=float)
    if d.ndim != 1 or d.size == 0:
        raise ValueError("hourly_demand must be a non-empty 1-D series")
    if not np.all(np.isfinite(d)) or np.any(d < 0):
        bad = int(np.flatnonzero(~np.isfinite(d) | (d < 0))[0])
        raise ValueError(f"hourly_demand[{bad}] must be a finite number >= 0, got {d[bad]!r}")
    return np.ceil(d - 1e-9).clip(min=0).astype(np.int64)


def _check_prices(committed: float, alternative: float) -> None:
    if not math.isfinite(committed) or committed < 0:
        raise ValueError(f"committed_usd_per_unit_hour must be >= 0, got {committed!r}")
    if not math.isfinite(alternative) or alternative <= 0:
        raise ValueError(f"alternative_usd_per_unit_hour must be > 0, got {alternative!r}")


def persists(w: Workload) -> bool:
    """Whether ``w``'s demand is expected over a commitment's term: serving
    profiles always, training and batch jobs only when marked ``recurring``."""
    return w.workload_class is WorkloadClass.SERVING or w.recurring


def _billed_hours(n: int, term_hours: int | None) -> int:
    """Hours a commitment bills against a series of ``n`` hours: the series'
    (it repeats over the term) or the term's (a finite series), whichever is
    longer (a series longer than the term renews it)."""
    if term_hours is None:
        return n
    if term_hours <= 0:
        raise ValueError(f"term_hours must be > 0, got {term_hours!r}")
    return max(n, int(term_hours))


def breakeven_occupancy(
    committed_usd_per_unit_hour: float, alternative_usd_per_unit_hour: float
) -> float:
    """``p_R / p_alt``: the share of hours a committed unit must be busy to pay off.

    Above 1 no commitment ever pays (it costs more than the alternative even
    when always busy).
    """
    _check_prices(committed_usd_per_unit_hour, alternative_usd_per_unit_hour)
    return committed_usd_per_unit_hour / alternative_usd_per_unit_hour


def committed_count(
    hourly_demand: Sequence[float] | npt.ArrayLike,
    committed_usd_per_unit_hour: float,
    alternative_usd_per_unit_hour: float,
    *,
    term_hours: int | None = None,
) -> int:
    """Units to commit: the largest k with ``P(D >= k) > p_R / p_alt`` (0 if none);
    with ``term_hours`` (a finite series) ``P`` is over the term's hours.

    Ties: a unit exactly at break-even (``P(D >= k) == p_R / p_alt`` within a
    relative 1e-9) costs the same committed or not; it is NOT committed, so the
    answer is the smallest cost-minimising commitment. With ``p_R = (1 - d) *
    p_alt`` this is the d-quantile of the (whole-unit) demand in the
    "inverted CDF" sense (numpy ``method="inverted_cdf"``): the smallest
    demand value ``v`` with ``P(D <= v) >= d``. Example: demand 1..100, one
    hour each, d = 0.4: unit 40 is busy 61 % of hours (> 60 %: pays), unit 41
    exactly 60 % (a tie: not committed), so K = 40.
    """
    q = breakeven_occupancy(committed_usd_per_unit_hour, alternative_usd_per_unit_hour)
    d = _as_units(hourly_demand)
    n = _billed_hours(d.size, term_hours)
    # The k-th unit pays iff count(D >= k) > q n, i.e. iff at least m hours
    # have D >= k, m = the smallest integer strictly above q n (tie-tolerant).
    # Then K is the m-th largest demand.
    qn = q * n
    m = math.floor(qn * (1.0 + _TIE_TOL) + _TIE_TOL) + 1
    if m > d.size:
        return 0
    desc = np.sort(d)[::-1]
    return int(desc[m - 1])


@dataclass(frozen=True, slots=True)
class CommitmentCost:
    """Cost of holding ``committed_units`` over the whole demand series.

    ``occupancy`` is the share of committed unit-hours actually used (None
    with no commitment); ``alternative_unit_hours`` the demand above it.
    """

    committed_units: int
    hours: int
    committed_usd: float
    alternative_unit_hours: float
    alternative_usd: float
    occupancy: float | None

    @property
    def total_usd(self) -> float:
        return self.committed_usd + self.alternative_usd


def commitment_cost(
    hourly_demand: Sequence[float] | npt.ArrayLike,
    committed_units: int,
    committed_usd_per_unit_hour: float,
    alternative_usd_per_unit_hour: float,
    *,
    term_hours: int | None = None,
) -> CommitmentCost:
    """What committing ``committed_units`` costs against this demand series;
    with ``term_hours`` (a finite series) the commitment bills the whole term
    (``hours``) and the demand is nil after the series."""
    _check_prices(committed_usd_per_unit_hour, alternative_usd_per_unit_hour)
    if committed_units < 0:
        raise ValueError(f"committed_units must be >= 0, got {committed_units}")
    d = _as_units(hourly_demand)
    used = np.minimum(d, committed_units).sum()
    overflow = float(np.maximum(d - committed_units, 0).sum())
    hours = _billed_hours(int(d.size), term_hours)
    return CommitmentCost(
        committed_units=committed_units,
        hours=hours,
        committed_usd=committed_units * hours * committed_usd_per_unit_hour,
        alternative_unit_hours=overflow,
        alternative_usd=overflow * alternative_usd_per_unit_hour,
        occupancy=None if committed_units == 0 else float(used) / (committed_units * hours),
    )


def marginal_occupancy(
    hourly_demand: Sequence[float] | npt.ArrayLike,
    from_units: int,
    to_units: int,
    *,
    term_hours: int | None = None,
) -> float:
    """Mean occupancy of the units between two commitment levels (over the
    term with ``term_hours``, a finite series).

    Raising the commitment from ``from_units`` to ``to_units`` pays iff this
    exceeds the break-even occupancy (lowering it pays iff it falls below).
    """
    lo, hi = sorted((from_units, to_units))
    if lo < 0:
        raise ValueError("commitment levels must be >= 0")
    if lo == hi:
        raise ValueError("the two commitment levels are equal: no marginal units")
    d = _as_units(hourly_demand)
    used = np.clip(d - lo, 0, hi - lo).sum()
    return float(used) / ((hi - lo) * _billed_hours(d.size, term_hours))


@dataclass(frozen=True, slots=True)
class CommitmentStep:
    """Moving from one level to the next: what it changes and whether it pays."""

    from_units: int
    to_units: int
    marginal_occupancy: float | None
    delta_usd: float

    @property
    def pays(self) -> bool:
        return self.delta_usd < 0


@dataclass(frozen=True, slots=True)
class CommitmentComparison:
    """The what-if of several commitment levels against the best one."""

    breakeven_occupancy: float
    peak_units: int
    optimal: CommitmentCost
    levels: tuple[CommitmentCost, ...]
    steps: tuple[CommitmentStep, ...]


def compare_commitment_levels(
    hourly_demand: Sequence[float] | npt.ArrayLike,
    levels_units: Sequence[int],
    committed_usd_per_unit_hour: float,
    alternative_usd_per_unit_hour: float,
    *,
    term_hours: int | None = None,
) -> CommitmentComparison:
    """Cost of each commitment level, the optimum, and each step between levels in order.

    Answers "should we raise committed capacity from 40 % to 60 % of peak?":
    pass both levels; ``steps[0].pays`` says whether the move saves money and
    ``steps[0].marginal_occupancy`` vs ``breakeven_occupancy`` says why.
    ``term_hours``: the series is finite (see the module docstring).
    """
    q = breakeven_occupancy(committed_usd_per_unit_hour, alternative_usd_per_unit_hour)
    prices = (committed_usd_per_unit_hour, alternative_usd_per_unit_hour)
    d = _as_units(hourly_demand)
    levels = tuple(commitment_cost(d, int(k), *prices, term_hours=term_hours) for k in levels_units)
    steps = tuple(
        CommitmentStep(
            from_units=a.committed_units,
            to_units=b.committed_units,
            marginal_occupancy=(
                None
                if a.committed_units == b.committed_units
                else marginal_occupancy(
                    d, a.committed_units, b.committed_units, term_hours=term_hours
                )
            ),
            delta_usd=b.total_usd - a.total_usd,
        )
        for a, b in itertools.pairwise(levels)
    )
    k = committed_count(d, *prices, term_hours=term_hours)
    best = commitment_cost(d, k, *prices, term_hours=term_hours)
    return CommitmentComparison(
        breakeven_occupancy=q,
        peak_units=int(d.max()),
        optimal=best,
        levels=levels,
        steps=steps,
    )
