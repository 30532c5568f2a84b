"""Effective cost of spot capacity: dollars per *productive* unit-hour.

Owns: the two interruption-rate conventions (``RateConvention``), the
validated description of one spot run (``SpotRun``), its cost breakdown
(``effective_cost`` -> ``EffectiveCostBreakdown``) and the cheap multiplier
the optimizer applies to spot prices (``spot_time_factor``).

Must not: do I/O, read markets, or choose a tier (the optimizer does). The
formulas are exactly those of docs/concepts/effective-cost.md::

    C_effective = C_spot * T_total / T_productive
    wall       (lambda per wall-clock hour on spot, the default):
               T_total = T_prod * (1 + delta/tau) / (1 - lambda * (R + L))
               valid only while lambda * (R + L) < 1
    productive (a count per productive hour or day, as in the worked examples):
               T_total = T_prod * (1 + c) + N_int * (R + L),  N_int = rate * T_prod

``c = delta / tau`` is the checkpoint overhead, ``R`` the restart time and
``L`` the work lost per interruption: ``tau / 2`` on average, ~0 when a
notice-triggered checkpoint fits in the notice window (policies.checkpoint).
Both time factors ``T_total / T_prod`` are independent of ``T_prod``, which is
what makes the break-even solvers (policies.breakeven) closed-form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from markets.errors import SpotNeverFinishesError
from policies.checkpoint import daly_interval, notice_checkpoint_fits

__all__ = [
    "HOURS_PER_DAY",
    "EffectiveCostBreakdown",
    "RateConvention",
    "RateUnit",
    "SpotRun",
    "effective_cost",
    "spot_time_factor",
    "time_factor",
]

HOURS_PER_DAY = 24.0

_NonNeg = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
_Positive = Annotated[float, Field(gt=0.0, allow_inf_nan=False)]


class RateConvention(StrEnum):
    """What an interruption rate is counted against (docs/concepts/effective-cost.md).

    ``wall``: a hazard, interruptions per wall-clock hour held on spot; time
    lost to restarts is itself exposed to interruptions. ``productive``:
    interruptions per hour (or day) of progress, as in worked examples A-D.
    The same number means different things: example B saves ~51.9 % counted
    per productive hour and ~44 % per wall-clock hour.
    """

    WALL = "wall"
    PRODUCTIVE = "productive"


# Member lookups on an Enum class are slow in CPython 3.11; the hot path
# (spot_time_factor, per workload x pool) compares against these instead.
_WALL = RateConvention.WALL
_PRODUCTIVE = RateConvention.PRODUCTIVE


class RateUnit(StrEnum):
    """The time unit an interruption count is given per."""

    HOUR = "hour"
    DAY = "day"


class SpotRun(BaseModel):
    """One job (or fleet share) run on spot, with what interruptions cost it.

    Checkpointing is given EITHER as ``checkpoint_overhead`` (``c = delta/tau``;
    lost work is then taken as included in ``restart_hours``, as in worked
    example A, unless ``lost_work_hours`` says otherwise) OR as
    ``checkpoint_write_hours`` (``delta``) with an optional
    ``checkpoint_interval_hours`` (``tau``; Daly's optimum for the run's rate
    when omitted). Lost work per interruption, first match wins:
    ``lost_work_hours`` if given; 0 if a notice checkpoint of
    ``notice_checkpoint_write_seconds`` fits in ``notice_seconds``; ``tau / 2``
    if ``tau`` is known; else 0.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    units: _Positive = Field(description="capacity units held (GPUs)")
    productive_hours: _Positive = Field(description="T_prod: hours of progress the work needs")
    on_demand_usd_per_unit_hour: _Positive
    spot_usd_per_unit_hour: _NonNeg
    checkpoint_overhead: _NonNeg | None = Field(default=None, description="c = delta / tau")
    checkpoint_write_hours: _NonNeg | None = Field(default=None, description="delta")
    checkpoint_interval_hours: _Positive | None = Field(default=None, description="tau")
    interruptions: _NonNeg = Field(default=0.0, description="count per `per` in `convention`")
    convention: RateConvention = RateConvention.WALL
    per: RateUnit = RateUnit.HOUR
    restart_hours: _NonNeg = Field(default=0.0, description="R: re-provision, reload, warm up")
    lost_work_hours: _NonNeg | None = Field(default=None, description="L per interruption")
    notice_seconds: _NonNeg | None = Field(default=None, description="AWS 120, GCP 30")
    notice_checkpoint_write_seconds: _NonNeg | None = None

    @model_validator(mode="after")
    def _one_checkpoint_description(self) -> Self:
        if self.checkpoint_overhead is not None and (
            self.checkpoint_write_hours is not None or self.checkpoint_interval_hours is not None
        ):
            raise ValueError(
                "give checkpoint_overhead OR checkpoint_write_hours "
                "(+ checkpoint_interval_hours), not both"
            )
        if self.checkpoint_interval_hours is not None and self.checkpoint_write_hours is None:
            raise ValueError("checkpoint_interval_hours needs checkpoint_write_hours")
        if self.notice_checkpoint_write_seconds is not None and self.notice_seconds is None:
            raise ValueError(
                "notice_checkpoint_write_seconds needs notice_seconds (AWS 120, GCP 30)"
            )
        return self

    @property
    def interruptions_per_hour(self) -> float:
        """The rate per hour (wall-clock or productive, per ``convention``)."""
        if self.per == RateUnit.DAY:
            return self.interruptions / HOURS_PER_DAY
        return self.interruptions

    @property
    def resolved_checkpoint_interval_hours(self) -> float | None:
        """``tau``: as given, else Daly's optimum for this rate; None if only ``c`` is known."""
        if self.checkpoint_write_hours is None:
            return None
        if self.checkpoint_interval_hours is not None:
            return self.checkpoint_interval_hours
        rate = self.interruptions_per_hour
        return daly_interval(self.checkpoint_write_hours, math.inf if rate == 0 else 1.0 / rate)

    @property
    def resolved_checkpoint_overhead(self) -> float:
        """``c = delta / tau`` (0 when checkpoints are free or never needed)."""
        if self.checkpoint_overhead is not None:
            return self.checkpoint_overhead
        delta, tau = self.checkpoint_write_hours, self.resolved_checkpoint_interval_hours
        if delta is None or tau is None or delta == 0 or math.isinf(tau):
            return 0.0
        return delta / tau

    @property
    def notice_checkpoint_counts(self) -> bool:
        """True when a notice-triggered checkpoint completes inside the notice window."""
        if self.notice_seconds is None or self.notice_checkpoint_write_seconds is None:
            return False
        return notice_checkpoint_fits(self.notice_checkpoint_write_seconds, self.notice_seconds)

    @property
    def resolved_lost_work_hours(self) -> float:
        """``L``, the work lost per interruption (see the class docstring)."""
        if self.lost_work_hours is not None:
            return self.lost_work_hours
        if self.notice_checkpoint_counts:
            return 0.0
        tau = self.resolved_checkpoint_interval_hours
        return 0.0 if tau is None else tau / 2.0


def time_factor(
    checkpoint_overhead: float,
    interruptions_per_hour: float,
    per_interruption_hours: float,
    convention: RateConvention = _WALL,
) -> float:
    """``T_total / T_prod`` for overhead ``c``, rate and ``R + L``.

    Raises SpotNeverFinishesError in the wall convention when
    ``lambda * (R + L) >= 1``: interruptions then arrive faster than the lost
    time can be made up, and the run never finishes.
    """
    if interruptions_per_hour == 0:
        return 1.0 + checkpoint_overhead
    if convention == _PRODUCTIVE:
        factor = 1.0 + checkpoint_overhead + interruptions_per_hour * per_interruption_hours
    else:
        load = interruptions_per_hour * per_interruption_hours
        if load >= 1.0:
            raise SpotNeverFinishesError(
                f"spot never finishes: {interruptions_per_hour:.4g} interruptions per wall-clock "
                f"hour x {per_interruption_hours:.4g} h lost per interruption (restart + lost "
                f"work) = {load:.4g} >= 1; every hour loses more time than it has"
            )
        factor = (1.0 + checkpoint_overhead) / (1.0 - load)
    if not math.isfinite(factor):
        raise SpotNeverFinishesError(f"spot never finishes: time factor {factor} is not finite")
    return factor


def spot_time_factor(
    hazard_per_hour: float,
    restart_hours: float,
    checkpoint_write_hours: float,
    checkpoint_interval_hours: float | None = None,
    notice_seconds: float = 120.0,
    notice_checkpoint_write_seconds: float | None = None,
) -> float:
    """``T_total / T_prod`` in the wall convention; the optimizer multiplies spot prices by it.

    ``checkpoint_interval_hours`` defaults to Daly's optimum for
    ``M = 1 / hazard``. A notice checkpoint is counted only when
    ``notice_checkpoint_write_seconds`` is given and fits in ``notice_seconds``
    (AWS 120 s by default; pass ``NOTICE_SECONDS["gcp"]`` for GCP); it then
    removes the lost work, otherwise ``L = tau / 2``. Plain float maths: called
    per workload x pool. Raises SpotNeverFinishesError when the factor is infinite.
    """
    # One combined check keeps the hot path cheap; name the culprit only on failure.
    if not (
        hazard_per_hour >= 0 and restart_hours >= 0 and checkpoint_write_hours >= 0
    ) or not math.isfinite(hazard_per_hour + restart_hours + checkpoint_write_hours):
        for name, value in (
            ("hazard_per_hour", hazard_per_hour),
            ("restart_hours", restart_hours),
            ("checkpoint_write_hours", checkpoint_write_hours),
        ):
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    delta = checkpoint_write_hours
    if checkpoint_interval_hours is None:
        mtbi = math.inf if hazard_per_hour == 0 else 1.0 / hazard_per_hour
        tau = daly_interval(delta, mtbi)
    else:
        tau = checkpoint_interval_hours
        if not tau > 0:
            raise ValueError(f"checkpoint_interval_hours must be > 0, got {tau!r}")
    overhead = 0.0 if delta == 0 or math.isinf(tau) else delta / tau
    if notice_checkpoint_write_seconds is not None and notice_checkpoint_fits(
        notice_checkpoint_write_seconds, notice_seconds
    ):
        lost = 0.0
    else:
        lost = tau / 2.0
    return time_factor(overhead, hazard_per_hour, restart_hours + lost, _WALL)


@dataclass(frozen=True, slots=True)
class EffectiveCostBreakdown:
    """Where the hours and dollars of one spot run go; every total is for the whole run.

    ``*_hours`` are per unit (wall-clock hours the run takes);
    ``lost_work_hours`` and ``restart_hours`` are summed over all
    interruptions. ``saving_*`` compare with running the same work on
    on-demand, which is never interrupted and needs no checkpoints; a negative
    saving is the "hidden premium" of docs/concepts/effective-cost.md.
    """

    convention: RateConvention
    units: float
    base_hours: float
    checkpoint_hours: float
    lost_work_hours: float
    restart_hours: float
    total_hours: float
    interruptions_per_hour: float
    interruptions_expected: float
    checkpoint_interval_hours: float | None
    lost_work_per_interruption_hours: float
    spot_total_usd: float
    on_demand_total_usd: float
    effective_usd_per_unit_hour: float
    saving_usd: float
    saving_fraction: float
    calendar_stretch: float
    usd_per_interruption: float
    wasted_unit_hours: float
    spot_worth_it: bool

    @property
    def time_factor(self) -> float:
        return self.total_hours / self.base_hours


def effective_cost(run: SpotRun) -> EffectiveCostBreakdown:
    """Price ``run`` on spot and compare it with on-demand (docs/concepts/effective-cost.md)."""
    base = run.productive_hours
    c = run.resolved_checkpoint_overhead
    rate = run.interruptions_per_hour
    lost_each = run.resolved_lost_work_hours
    per_event = run.restart_hours + lost_each
    factor = time_factor(c, rate, per_event, run.convention)
    total = base * factor
    # productive: a count per hour of progress; wall: a hazard over the whole stay.
    n_int = rate * (base if run.convention == RateConvention.PRODUCTIVE else total)
    # With no interruptions, L may be infinite (never checkpointing): 0 x inf is 0 here.
    lost_total = 0.0 if n_int == 0 else n_int * lost_each
    restart_total = 0.0 if n_int == 0 else n_int * run.restart_hours

    spot_usd = run.units * total * run.spot_usd_per_unit_hour
    od_usd = run.units * base * run.on_demand_usd_per_unit_hour
    effective = run.spot_usd_per_unit_hour * factor
    saving = od_usd - spot_usd
    return EffectiveCostBreakdown(
        convention=RateConvention(run.convention),
        units=run.units,
        base_hours=base,
        checkpoint_hours=base * c,
        lost_work_hours=lost_total,
        restart_hours=restart_total,
        total_hours=total,
        interruptions_per_hour=rate,
        interruptions_expected=n_int,
        checkpoint_interval_hours=run.resolved_checkpoint_interval_hours,
        lost_work_per_interruption_hours=lost_each,
        spot_total_usd=spot_usd,
        on_demand_total_usd=od_usd,
        effective_usd_per_unit_hour=effective,
        saving_usd=saving,
        saving_fraction=saving / od_usd,
        calendar_stretch=factor - 1.0,
        usd_per_interruption=run.units * per_event * run.spot_usd_per_unit_hour,
        wasted_unit_hours=run.units * (lost_total + restart_total),
        spot_worth_it=effective < run.on_demand_usd_per_unit_hour,
    )
