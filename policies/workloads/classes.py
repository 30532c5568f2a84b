"""Workload classes and their per-class default policies (docs/concepts/tiers.md).

Owns: ``WorkloadClass`` (``research`` is another name for ``batch``), the
defaults a workload of each class gets for what it leaves out
(``ClassPolicy``, ``ClassDefaults``, ``BUILTIN_CLASS_DEFAULTS``) and the inline
serving demand shape (``DemandShape``).

Must not: read files (``policies.workloads.spec``) or build hourly curves
(``broker.planning.demand``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Self

from pydantic import Field, GetJsonSchemaHandler, model_validator
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from markets.numbers import DAY_S, MAX_HOURS, MAX_UNITS, MAX_USD, Bounded
from markets.validation import FieldError, StrictModel

__all__ = [
    "BUILTIN_CLASS_DEFAULTS",
    "ClassDefaults",
    "ClassPolicy",
    "DemandShape",
    "WorkloadClass",
]


class WorkloadClass(StrEnum):
    """What a workload's demand looks like and how it may be served.

    ``research`` is accepted as another name for ``batch``.
    """

    SERVING = "serving"
    TRAINING = "training"
    BATCH = "batch"

    @classmethod
    def _missing_(cls, value: object) -> WorkloadClass | None:
        if isinstance(value, str) and value.strip().lower() in _CLASS_ALIASES:
            return cls(_CLASS_ALIASES[value.strip().lower()])
        return None

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        # The published schema (broker.schemas) accepts the aliases too.
        out = handler(schema)
        out["enum"] = [*out["enum"], *_CLASS_ALIASES]
        return out


_CLASS_ALIASES = {"research": "batch"}  # another name -> the class's value


class ClassPolicy(StrictModel):
    """Defaults a workload of one class gets for every field it leaves out."""

    max_spot_share: Annotated[float, Bounded(ge=0.0, le=1.0)] = 1.0
    max_zone_share: Annotated[float, Bounded(gt=0.0, le=1.0)] = 0.5
    max_pool_share: Annotated[float, Bounded(gt=0.0, le=1.0)] = 0.5
    # Most of a workload's spot in one (provider, region): 1.0 is no cap.
    max_region_share: Annotated[float, Bounded(gt=0.0, le=1.0)] = 1.0
    unmet_penalty_usd_per_unit_hour: Annotated[float, Bounded(gt=0.0, le=MAX_USD)] = 15.0
    priority: Annotated[int, Bounded(ge=-1_000_000, le=1_000_000)] = 1
    checkpoint_write_seconds: Annotated[float, Bounded(ge=0.0, le=DAY_S, unit="seconds")] = 60.0
    restart_minutes: Annotated[float, Bounded(ge=0.0, le=1440, unit="minutes")] = 10.0
    min_on_non_revocable: bool = False
    restart_tolerant: bool = True
    min_dwell_minutes: Annotated[float, Bounded(ge=0.0, le=MAX_HOURS * 60, unit="minutes")] = 0.0
    # Dollars an hour of finishing later costs (``policies.waiting``): 0 lets
    # a job wait for any cheaper pool its deadline allows.
    value_of_time_usd_per_hour: Annotated[float, Bounded(ge=0.0, le=MAX_USD)] = 0.0


# Value of time: serving never waits (an hour late is an
# hour of unmet users: far above any instance-hour, the dearest listed being
# p5.48xlarge at $98.32/h); a deadline-critical training run is worth about
# ten of those instance-hours per hour of delay; batch/research waits for any
# saving its deadline allows.
_SERVING_VALUE_OF_TIME = 10_000.0
_TRAINING_VALUE_OF_TIME = 1_000.0


# The built-in per-class defaults (docs/concepts/tiers.md), all overridable in a
# file's ``class_defaults``. Shares: at most half of a workload's spot in one
# zone or one pool, so one zone's correlated revocations (83-97 % followed by
# another within 5 min, SkyServe) cannot take more than half of it.
_BATCH_PENALTY = 15.0  # $/unit-hour: above the dearest on-demand GPU-hour we list
# (p5.48xlarge $98.32/h / 8 GPUs = $12.29), so leaving batch work undone never
# looks cheaper than buying it on-demand.
# The fields each class sets here are its built-in overrides (a partial
# ``class_defaults`` entry in a file is merged over them); the rest keep
# ClassPolicy's defaults.
BUILTIN_CLASS_DEFAULTS: dict[WorkloadClass, ClassPolicy] = {
    WorkloadClass.SERVING: ClassPolicy(
        # 70 % of every hour's demand on committed/on-demand; spot only above it.
        max_spot_share=0.3,
        # An unmet serving unit costs 5-10x a batch unit-hour (docs/concepts/tiers.md): 10x.
        unmet_penalty_usd_per_unit_hour=10 * _BATCH_PENALTY,
        priority=3,
        checkpoint_write_seconds=0.0,  # stateless replicas
        restart_minutes=3.0,  # replica cold start ~3 min for a large model (s7)
        restart_tolerant=False,
        value_of_time_usd_per_hour=_SERVING_VALUE_OF_TIME,
    ),
    WorkloadClass.TRAINING: ClassPolicy(
        max_spot_share=1.0,  # the gang minimum is protected by min_on_non_revocable
        # A lost training hour delays a deadline but is recoverable: 3x batch.
        unmet_penalty_usd_per_unit_hour=3 * _BATCH_PENALTY,
        priority=2,
        checkpoint_write_seconds=180.0,  # 3-5 min for a 175B checkpoint (s2)
        restart_minutes=30.0,  # 20 min reload + 10 min warm-up (golden example C)
        min_on_non_revocable=True,
        restart_tolerant=True,
        # Resizes cost 10-60 s of rendezvous or minutes of re-sharding (s6);
        # an hour between resizes keeps that well under 2 % of the time.
        min_dwell_minutes=60.0,
        value_of_time_usd_per_hour=_TRAINING_VALUE_OF_TIME,
    ),
    WorkloadClass.BATCH: ClassPolicy(
        max_spot_share=1.0,  # spot-first
        unmet_penalty_usd_per_unit_hour=_BATCH_PENALTY,
        priority=1,
        checkpoint_write_seconds=60.0,
        restart_minutes=10.0,
        restart_tolerant=True,
        value_of_time_usd_per_hour=0.0,
    ),
}


class ClassDefaults(StrictModel):
    """Per-class defaults; a partial override keeps the built-in rest of its class."""

    serving: ClassPolicy = Field(
        default_factory=lambda: BUILTIN_CLASS_DEFAULTS[WorkloadClass.SERVING]
    )
    training: ClassPolicy = Field(
        default_factory=lambda: BUILTIN_CLASS_DEFAULTS[WorkloadClass.TRAINING]
    )
    batch: ClassPolicy = Field(default_factory=lambda: BUILTIN_CLASS_DEFAULTS[WorkloadClass.BATCH])

    @model_validator(mode="before")
    @classmethod
    def _merge_builtin(cls, data: object) -> object:
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for wc in WorkloadClass:
            given = out.get(wc.value)
            if isinstance(given, dict):
                builtin = BUILTIN_CLASS_DEFAULTS[wc].model_dump(exclude_unset=True)
                out[wc.value] = {**builtin, **given}
        return out

    def for_class(self, workload_class: WorkloadClass) -> ClassPolicy:
        by_class = {
            WorkloadClass.SERVING: self.serving,
            WorkloadClass.TRAINING: self.training,
            WorkloadClass.BATCH: self.batch,
        }
        return by_class[WorkloadClass(workload_class)]


class DemandShape(StrictModel):
    """A serving curve: ``base_units`` all day, ``peak_units`` in a daily window.

    Hours are UTC hours of the day; the window is ``[peak_start_hour,
    peak_end_hour)`` and wraps past midnight when start > end. On Saturdays and
    Sundays the part above the base is scaled by ``weekend_factor`` (the steady
    base stays: weekends lose peaks, not the base load).
    """

    base_units: Annotated[float, Bounded(ge=0.0, le=MAX_UNITS)]
    peak_units: Annotated[float, Bounded(ge=0.0, le=MAX_UNITS)]
    peak_start_hour: Annotated[int, Bounded(ge=0, le=23)] = 9
    peak_end_hour: Annotated[int, Bounded(ge=0, le=24)] = 21
    weekend_factor: Annotated[float, Bounded(ge=0.0, le=1000)] = 1.0

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.peak_units < self.base_units:
            raise FieldError(
                "peak_units",
                f"peak_units >= base_units ({self.base_units:g})",
                self.peak_units,
            )
        if self.peak_start_hour == self.peak_end_hour % 24:
            raise FieldError(
                "peak_end_hour",
                f"an hour different from peak_start_hour ({self.peak_start_hour})",
                self.peak_end_hour,
            )
        return self

    def in_peak(self, hour_of_day: int) -> bool:
        s, e = self.peak_start_hour, self.peak_end_hour
        return s <= hour_of_day < e if s < e else (hour_of_day >= s or hour_of_day < e)

    def units_at(self, hour_of_day: int, *, weekend: bool = False) -> float:
        """Demand in reference units at one UTC hour of the day."""
        if not self.in_peak(hour_of_day):
            return self.base_units
        extra = self.peak_units - self.base_units
        return self.base_units + extra * (self.weekend_factor if weekend else 1.0)
