"""Break-even solvers: where spot stops paying against on-demand.

Owns: the spot price, the interruption rate and the checkpoint-interval
window at which ``C_effective = C_on_demand`` (docs/concepts/effective-cost.md, check
question D), in both rate conventions, and the small bisection they fall back
on (scipy is not a dependency).

Must not: do I/O or redefine the cost model: everything here solves
``time_factor(...) = k`` with ``k = p_OD / p_spot`` using the formulas of
``policies.effective_cost``; tests cross-check each closed form against the
forward model.

Closed forms (``c`` overhead, ``r`` rate per hour, ``R' = R + L``):

- price:     ``p_spot* = p_OD / factor``
- rate:      productive ``r* = (k - 1 - c) / R'``; wall ``r* = (1 - (1 + c)/k) / R'``
- interval:  with ``L = a * tau`` (``a = 1/2``, or 0 when lost work is fixed),
  spot pays iff ``A tau^2 + B tau + delta < 0`` where
  productive ``A = r a``, ``B = 1 + r R' - k``;
  wall ``A = k r a``, ``B = 1 - k (1 - r R')``.
  The window between the roots is where spot pays. Example D: delta = 1, 3,
  5 min give a lower edge of ~33 s, ~98 s, ~164 s.

When ``tau`` follows the rate (Daly's optimum, no interval given), the rate
break-even has no closed form and is found by bisection on the full model.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from markets.errors import SpotNeverFinishesError
from policies.effective_cost import (
    HOURS_PER_DAY,
    RateConvention,
    RateUnit,
    SpotRun,
    time_factor,
)

__all__ = [
    "CheckpointWindow",
    "RateBreakeven",
    "bisect_increasing",
    "breakeven_checkpoint_window",
    "breakeven_interruption_rate",
    "breakeven_spot_price",
    "price_ratio",
]


def price_ratio(run: SpotRun) -> float:
    """``k = p_OD / p_spot``: the time factor spot can afford (inf when spot is free)."""
    if run.spot_usd_per_unit_hour == 0:
        return math.inf
    return run.on_demand_usd_per_unit_hour / run.spot_usd_per_unit_hour


def _run_factor(run: SpotRun) -> float:
    return time_factor(
        run.resolved_checkpoint_overhead,
        run.interruptions_per_hour,
        run.restart_hours + run.resolved_lost_work_hours,
        run.convention,
    )


def breakeven_spot_price(run: SpotRun) -> float:
    """Spot price per unit-hour at which spot costs exactly what on-demand does.

    Spot pays below this price. Raises SpotNeverFinishesError when no price
    helps because the run never finishes.
    """
    return run.on_demand_usd_per_unit_hour / _run_factor(run)


def bisect_increasing(
    f: Callable[[float], float],
    lo: float,
    hi: float,
    *,
    rel_tol: float = 1e-12,
    max_iter: int = 200,
) -> float:
    """Root of a non-decreasing ``f`` on ``[lo, hi]`` with ``f(lo) <= 0 < f(hi)``.

    Plain bisection: robust for the monotone, possibly kinked functions here
    (a ``SpotNeverFinishesError`` region is passed in as ``+inf``).
    """
    if not f(lo) <= 0 < f(hi):
        raise ValueError(f"root not bracketed in [{lo}, {hi}]")
    for _ in range(max_iter):
        mid = 0.5 * (lo + hi)
        if f(mid) <= 0:
            lo = mid
        else:
            hi = mid
        if hi - lo <= rel_tol * max(abs(hi), 1e-300):
            break
    return 0.5 * (lo + hi)


@dataclass(frozen=True, slots=True)
class RateBreakeven:
    """The interruption rate at which spot stops paying, in the run's convention.

    Spot pays iff the rate is below ``interruptions_per_hour``. It is 0.0 when
    spot does not pay even without interruptions (checkpoint overhead alone
    eats the discount) and ``inf`` when interruptions cost nothing
    (``R + L = 0``) and spot pays.
    """

    convention: RateConvention
    interruptions_per_hour: float

    @property
    def interruptions_per_day(self) -> float:
        return self.interruptions_per_hour * HOURS_PER_DAY

    @property
    def mean_minutes_between(self) -> float:
        """Minutes between interruptions at break-even (inf at a zero rate)."""
        r = self.interruptions_per_hour
        return math.inf if r == 0 else 60.0 / r


def breakeven_interruption_rate(run: SpotRun) -> RateBreakeven:
    """Rate (per hour, in ``run.convention``) at which spot equals on-demand.

    Everything but the rate is held fixed. When the run gives a checkpoint
    write time but no interval, ``tau`` is Daly's optimum for each rate tried,
    so the answer is found by bisection on ``effective_cost``'s model.
    """
    k = price_ratio(run)
    conv = RateConvention(run.convention)
    at_zero = run.model_copy(update={"interruptions": 0.0})
    if _run_factor(at_zero) >= k:
        return RateBreakeven(conv, 0.0)
    if run.checkpoint_write_hours is not None and run.checkpoint_interval_hours is None:
        return RateBreakeven(conv, _bisect_rate(run, k))
    c = run.resolved_checkpoint_overhead
    per_event = run.restart_hours + run.resolved_lost_work_hours
    if per_event == 0:
        return RateBreakeven(conv, math.inf)
    if conv == RateConvention.PRODUCTIVE:
        rate = (k - 1.0 - c) / per_event
    else:
        rate = (1.0 - (1.0 + c) / k) / per_event if math.isfinite(k) else 1.0 / per_event
    return RateBreakeven(conv, rate)


def _bisect_rate(run: SpotRun, k: float) -> float:
    # per-hour rate: "per" is fixed to hours on the copies so the unknown is one number.
    def excess(rate_per_hour: float) -> float:
        trial = run.model_copy(update={"interruptions": rate_per_hour, "per": RateUnit.HOUR})
        try:
            return _run_factor(trial) - k
        except SpotNeverFinishesError:
            return math.inf

    hi = 1.0
    while excess(hi) <= 0:
        hi *= 2.0
        if hi > 1e12:
            # Interruptions (almost) cost nothing: report "any rate".
            return math.inf
    return bisect_increasing(excess, 0.0, hi)


@dataclass(frozen=True, slots=True)
class CheckpointWindow:
    """Checkpoint intervals (hours of progress) at which spot still pays.

    Spot pays iff ``min_interval_hours < tau < max_interval_hours``.
    Checkpointing more often than ``min_interval_hours`` spends the discount
    on writes; less often than ``max_interval_hours`` (``inf`` when lost work
    does not grow with ``tau``), on lost work.
    """

    min_interval_hours: float
    max_interval_hours: float

    @property
    def min_interval_s(self) -> float:
        return self.min_interval_hours * 3600.0

    @property
    def max_interval_s(self) -> float:
        return self.max_interval_hours * 3600.0

    def pays(self, interval_hours: float) -> bool:
        return self.min_interval_hours < interval_hours < self.max_interval_hours


def breakeven_checkpoint_window(run: SpotRun) -> CheckpointWindow | None:
    """Range of ``tau`` over which spot beats on-demand; None if no ``tau`` makes it pay.

    Needs ``run.checkpoint_write_hours`` (``delta``); any interval in the run
    is ignored (it is the unknown). Lost work is ``tau / 2`` unless the run
    fixes it (``lost_work_hours``, or a notice checkpoint that fits).
    """
    delta = run.checkpoint_write_hours
    if delta is None:
        raise ValueError("the checkpoint window needs checkpoint_write_hours (delta)")
    r = run.interruptions_per_hour
    fixed_lost = run.lost_work_hours is not None or run.notice_checkpoint_counts
    a = 0.0 if fixed_lost else 0.5
    r_prime = run.restart_hours + (run.resolved_lost_work_hours if fixed_lost else 0.0)
    k = price_ratio(run)
    if math.isinf(k):
        return _free_spot_window(run.convention, r, r_prime, a)
    if run.convention == RateConvention.PRODUCTIVE:
        qa, qb = r * a, 1.0 + r * r_prime - k
    else:
        qa, qb = k * r * a, 1.0 - k * (1.0 - r * r_prime)
    return _negative_window(qa, qb, delta)


def _free_spot_window(
    convention: RateConvention, r: float, r_prime: float, a: float
) -> CheckpointWindow | None:
    """Free spot pays wherever the run finishes at all."""
    if convention == RateConvention.PRODUCTIVE or r == 0:
        return CheckpointWindow(0.0, math.inf)
    if r * r_prime >= 1.0:
        return None
    # wall: finishes iff r (R' + a tau) < 1
    return CheckpointWindow(0.0, math.inf if a == 0 else (1.0 / r - r_prime) / a)


def _negative_window(qa: float, qb: float, delta: float) -> CheckpointWindow | None:
    """Where ``qa tau^2 + qb tau + delta < 0`` for ``tau > 0`` (qa, delta >= 0)."""
    if qb >= 0:
        return None  # every term is >= 0 for tau > 0
    if qa == 0:
        return CheckpointWindow(delta / -qb, math.inf)
    disc = qb * qb - 4.0 * qa * delta
    if disc <= 0:
        return None
    s = -qb + math.sqrt(disc)
    # Stable pair of roots: the small one as 2 delta / s avoids cancellation.
    return CheckpointWindow(2.0 * delta / s, s / (2.0 * qa))
