"""Checkpoint intervals and the two-tier (periodic + notice) checkpoint rule.

Owns: Young's and Daly's optimal checkpoint intervals, the first-order
productive fraction of docs/concepts/notice-window.md, the provider notice windows
(``NOTICE_SECONDS``, the one place they are stated) and whether a
notice-triggered checkpoint fits inside one.

Must not: do I/O, price anything (``policies.effective_cost`` does), or know
any cloud SDK. Plain float maths only: the optimizer calls these per workload x
pool, so they must stay cheap (no pydantic here).

Units: every time is in hours except the notice window and the notice
checkpoint write time, which are in seconds because providers state them so.
``M`` is the mean time between interruptions (``1 / lambda``).

Sources:
- J. W. Young, "A first order approximation to the optimum checkpoint
  interval", Communications of the ACM 17(9):530-531, 1974.
- J. T. Daly, "A higher order estimate of the optimum checkpoint interval for
  restart dumps", Future Generation Computer Systems 22(3):303-312, 2006.
- docs/concepts/notice-window.md (formulas as used here) and section 7 (notice windows).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType

from markets.model import Provider

__all__ = [
    "NOTICE_SECONDS",
    "daly_interval",
    "mean_hours_between",
    "notice_checkpoint_fits",
    "productive_fraction",
    "young_interval",
]

# Interruption notice windows, in seconds. AWS: the spot instance interruption
# notice is two minutes, best effort; GCP: preemption/spot VMs get 30 seconds
# (docs/concepts/market.md; docs/concepts/notice-window.md).
NOTICE_SECONDS: Mapping[str, float] = MappingProxyType(
    {Provider.AWS.value: 120.0, Provider.GCP.value: 30.0}
)


def _check_finite_nonneg(name: str, value: float) -> None:
    # Explicit checks: these functions sit below the validated input models and
    # must never turn a NaN or a negative into a plausible-looking interval.
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


def mean_hours_between(interruptions_per_hour: float) -> float:
    """``M = 1 / lambda`` in hours; ``inf`` when nothing interrupts."""
    _check_finite_nonneg("interruptions_per_hour", interruptions_per_hour)
    return math.inf if interruptions_per_hour == 0 else 1.0 / interruptions_per_hour


def young_interval(checkpoint_write_hours: float, mean_hours_between: float) -> float:
    """Young (1974): ``tau* = sqrt(2 * delta * M)``, hours of progress between checkpoints.

    ``M = inf`` (nothing interrupts) gives ``inf``: never checkpoint.
    """
    _check_finite_nonneg("checkpoint_write_hours", checkpoint_write_hours)
    if math.isnan(mean_hours_between) or mean_hours_between <= 0:
        raise ValueError(f"mean_hours_between must be > 0, got {mean_hours_between!r}")
    if math.isinf(mean_hours_between):
        return math.inf if checkpoint_write_hours > 0 else 0.0
    return math.sqrt(2.0 * checkpoint_write_hours * mean_hours_between)


def daly_interval(checkpoint_write_hours: float, mean_hours_between: float) -> float:
    """Daly (2006), higher-order optimum checkpoint interval, in hours.

    ``tau* = sqrt(2 delta M) * (1 + (1/3) sqrt(delta/(2M)) + (1/9) delta/(2M)) - delta``
    for ``delta < 2M``; ``tau* = M`` otherwise (docs/concepts/notice-window.md: when a
    checkpoint takes longer than twice the mean time between interruptions,
    checkpoint once per expected interruption). Tends to Young's interval as
    ``delta / M -> 0`` (their ratio is ``1 - (2/3) x + x^2 / 9`` with
    ``x = sqrt(delta / (2M))``).
    """
    _check_finite_nonneg("checkpoint_write_hours", checkpoint_write_hours)
    if math.isnan(mean_hours_between) or mean_hours_between <= 0:
        raise ValueError(f"mean_hours_between must be > 0, got {mean_hours_between!r}")
    delta, m = checkpoint_write_hours, mean_hours_between
    if math.isinf(m):
        return math.inf if delta > 0 else 0.0
    if delta >= 2.0 * m:
        return m
    x2 = delta / (2.0 * m)
    return math.sqrt(2.0 * delta * m) * (1.0 + math.sqrt(x2) / 3.0 + x2 / 9.0) - delta


def productive_fraction(
    checkpoint_write_hours: float,
    checkpoint_interval_hours: float,
    interruptions_per_hour: float,
    restart_hours: float,
) -> float:
    """First-order share of wall-clock time that advances the work.

    ``1 - delta/tau - lambda * (tau/2 + R)`` (docs/concepts/notice-window.md), floored
    at 0: a value of 0 means the job makes no progress at all on these terms.
    This is the small-rate expansion of the exact wall-convention fraction
    ``(1 - lambda (R + tau/2)) / (1 + delta/tau)`` that
    ``policies.effective_cost`` uses for prices.
    """
    _check_finite_nonneg("checkpoint_write_hours", checkpoint_write_hours)
    _check_finite_nonneg("interruptions_per_hour", interruptions_per_hour)
    _check_finite_nonneg("restart_hours", restart_hours)
    tau = checkpoint_interval_hours
    if math.isnan(tau) or tau <= 0:
        raise ValueError(f"checkpoint_interval_hours must be > 0, got {tau!r}")
    if math.isinf(tau):
        # Never checkpointing: any interruption loses unbounded work.
        return 1.0 if interruptions_per_hour == 0 else 0.0
    value = (
        1.0 - checkpoint_write_hours / tau - interruptions_per_hour * (tau / 2.0 + restart_hours)
    )
    return max(0.0, value)


def notice_checkpoint_fits(
    write_seconds: float, notice_seconds: float, margin_seconds: float = 0.0
) -> bool:
    """Does a notice-triggered checkpoint complete inside the notice window?

    Two-tier checkpointing counts the notice checkpoint only if it completes in
    the window (docs/concepts/notice-window.md); otherwise lost work falls back to the
    last periodic checkpoint (``tau / 2`` on average). ``margin_seconds`` is
    time spent before writing can start (noticing the notice, quiescing).
    Example: a 175B-parameter checkpoint takes 3-5 min, so it fits in neither
    GCP's 30 s nor AWS's 120 s.
    """
    _check_finite_nonneg("write_seconds", write_seconds)
    _check_finite_nonneg("notice_seconds", notice_seconds)
    _check_finite_nonneg("margin_seconds", margin_seconds)
    return write_seconds + margin_seconds <= notice_seconds
