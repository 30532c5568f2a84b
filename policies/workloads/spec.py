"""Workloads and the fleet, read from a validated YAML file.

Owns: one ``Workload`` (a named demand with a class and a contract) and the
``WorkloadSet`` with fleet-wide dollar limits; ``load_workloads`` turns any
problem in a file into one ``InputError`` naming the file, the field path
(``workloads[2].max_spot_share``) and what was expected. The classes and
their defaults live in ``policies.workloads.classes`` (re-exported here).

Must not: know markets or prices (whether an instance type exists is the
caller's check against its catalog), build demand curves (``broker.planning.demand``)
or decide anything.

Units: demand and work are counted in *reference units* (a capacity unit,
e.g. one GPU, at throughput 1.0). An instance type supplies its capacity units
times the workload's ``throughput`` factor for it, so ``unit_hours`` is work at
throughput 1.0 and ``min_units`` / ``max_units`` count physical units (GPUs).
A type without a stated factor gets the caller's default (``throughput_of``):
the catalog's per-GPU factor relative to a V100, or 1.0. A workload whose
reference is not a V100 should state the factor of every type it lists.

A file looks like (the shipped example is ``policies/examples/workloads.yaml``)::

    class_defaults:            # optional: override the built-in defaults
      serving: {max_spot_share: 0.2}
    budget_usd_per_hour: 2000  # optional, fleet-wide
    workloads:
      - name: chat-api
        class: serving
        instance_types: [g5.12xlarge, g6.12xlarge]
        demand: {base_units: 32, peak_units: 64, peak_start_hour: 9, peak_end_hour: 21}
        regions: [us-east-1, us-west-2]   # optional allow-lists: regions and
        providers: [aws]                  # providers it may run in (every tier)
        max_region_share: 0.5             # at most half of its spot in one region

Allow-lists filter the market per workload (``policies.cost_table``): a pool
outside them is in no plan, baseline or replacement of that workload.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Annotated, Self

from pydantic import Field, ValidationError, field_validator, model_validator

from markets.catalog import CATALOG
from markets.errors import InputError
from markets.model import Provider, Tier
from markets.numbers import DAY_S, MAX_HOURS, MAX_UNITS, MAX_USD, Bounded
from markets.validation import FieldError, StrictModel, input_error_from, read_yaml
from policies.workloads.classes import (
    BUILTIN_CLASS_DEFAULTS,
    ClassDefaults,
    ClassPolicy,
    DemandShape,
    WorkloadClass,
)
from policies.workloads.metric import DemandMetric
from policies.workloads.placement import GangPlacement, caps_apply, placement_key

__all__ = [
    "BUILTIN_CLASS_DEFAULTS",
    "ClassDefaults",
    "ClassPolicy",
    "DemandMetric",
    "DemandShape",
    "Disruption",
    "GangPlacement",
    "Workload",
    "WorkloadClass",
    "WorkloadSet",
    "default_workloads",
    "input_error_from",
    "load_workloads",
    "parse_workloads",
]

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
# Any cloud's region name: lowercase words and digits joined by '-' (AWS
# us-east-1, GCP europe-west4); whether the market has it is build_problem's.
_REGION_RE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)+$")


# Which class-specific fields apply to which classes (the rest are common).
_APPLIES_TO: dict[str, frozenset[WorkloadClass]] = {
    "demand": frozenset({WorkloadClass.SERVING}),
    "demand_metric": frozenset({WorkloadClass.SERVING}),
    "min_units": frozenset({WorkloadClass.TRAINING}),
    "step_units": frozenset({WorkloadClass.TRAINING}),
    "elastic": frozenset({WorkloadClass.TRAINING}),
    "min_on_non_revocable": frozenset({WorkloadClass.TRAINING}),
    "min_dwell_minutes": frozenset({WorkloadClass.TRAINING}),
    "placement": frozenset({WorkloadClass.TRAINING}),
    "mixed_types": frozenset({WorkloadClass.TRAINING}),
    "max_units": frozenset({WorkloadClass.TRAINING, WorkloadClass.BATCH}),
    "unit_hours": frozenset({WorkloadClass.TRAINING, WorkloadClass.BATCH}),
    "deadline_hours": frozenset({WorkloadClass.TRAINING, WorkloadClass.BATCH}),
    "release_hours": frozenset({WorkloadClass.TRAINING, WorkloadClass.BATCH}),
}


def _class_of(data: Mapping[str, object]) -> WorkloadClass | None:
    raw = data.get("class", data.get("workload_class"))
    try:
        return WorkloadClass(str(raw))
    except ValueError:
        return None


def _fill_defaults(data: dict[str, object], defaults: ClassDefaults) -> dict[str, object]:
    """Copy the class's defaults into every applicable field the input leaves out."""
    wc = _class_of(data)
    if wc is None:
        return data
    policy = defaults.for_class(wc)
    out = dict(data)
    for key, value in policy.model_dump().items():
        applies = _APPLIES_TO.get(key)
        if key in Workload.model_fields and key not in out and (applies is None or wc in applies):
            out[key] = value
    return out


MAX_THROUGHPUT = 1000.0
MAX_WORKLOADS = 1000
MAX_INSTANCE_TYPES = 500  # the catalogs list a few hundred GPU types in all
# The longest machine type names of either cloud are under 30 characters.
MAX_TYPE_NAME = 64
# A workloads file is a few KB; 16 MiB is beyond any hand-written fleet.
MAX_FILE_BYTES = 16 * 1024 * 1024
MAX_PRIORITY = 1_000_000


class Disruption(StrictModel):
    """A workload's own disruption budget, like a Karpenter NodePool's
    ``disruption.budgets``: it tightens the fleet-wide one (the lifecycle's
    ``churn_*`` settings: at most 5 % of capacity moved per 10 minutes, one
    move per job per hour), never loosens it. Left out, each field takes the
    fleet's value.

    ``max_share``: at most this share of the workload's own running units
    ended by the broker's moves per window (0: the broker never moves it; it
    changes only as its capacity ends otherwise); ``window_minutes``: that
    window; ``min_interval_minutes``: a job moved at most once per this.
    """

    max_share: Annotated[float, Bounded(ge=0.0, le=1.0)] | None = None
    window_minutes: Annotated[float, Bounded(gt=0.0, le=MAX_HOURS * 60, unit="minutes")] | None = (
        None
    )
    min_interval_minutes: (
        Annotated[float, Bounded(ge=0.0, le=MAX_HOURS * 60, unit="minutes")] | None
    ) = None


class Workload(StrictModel):
    """A named demand with a class and a contract (see the module docstring for units).

    Fields left out take the class's default (``ClassDefaults``). Class
    specifics: serving ``demand`` or ``demand_metric``; training ``min_units``, ``step_units``,
    ``max_units``, ``elastic``, ``min_on_non_revocable``, ``unit_hours``,
    ``deadline_hours``, ``min_dwell_minutes``, ``placement``, ``mixed_types``; batch ``unit_hours``,
    ``deadline_hours``, ``max_units`` (a parallelism cap). A field of another
    class is an error.
    """

    name: str = Field(min_length=1, max_length=63)
    workload_class: WorkloadClass = Field(alias="class")
    instance_types: list[Annotated[str, Field(max_length=MAX_TYPE_NAME)]] = Field(
        min_length=1, max_length=MAX_INSTANCE_TYPES, description="in order of preference"
    )
    # Stated factors only; see throughput_of for the rest.
    # A factor is reference work per unit-hour; 1,000x a reference GPU is
    # beyond any real type, and 1e308 overflows the solver's coefficients.
    throughput: dict[str, Annotated[float, Bounded(gt=0, le=MAX_THROUGHPUT)]] = Field(
        default_factory=dict
    )
    max_spot_share: Annotated[float, Bounded(ge=0.0, le=1.0)] = 1.0
    max_zone_share: Annotated[float, Bounded(gt=0.0, le=1.0)] = 0.5
    max_pool_share: Annotated[float, Bounded(gt=0.0, le=1.0)] = 0.5
    # Region-level diversification beside zone and pool: at most this share of
    # the workload's spot units in one (provider, region); 1.0 is no cap.
    max_region_share: Annotated[float, Bounded(gt=0.0, le=1.0)] = 1.0
    # Where the workload may run at all (None: anywhere the market has pools):
    # providers by name (aws, gcp), regions by the provider's name
    # (us-east-1, europe-west4). Every tier, every plan and every replacement.
    providers: list[Provider] | None = Field(default=None, min_length=1, max_length=8)
    regions: list[str] | None = Field(default=None, min_length=1, max_length=500)
    unmet_penalty_usd_per_unit_hour: Annotated[float, Bounded(gt=0.0, le=MAX_USD)] = 15.0
    budget_usd: Annotated[float, Bounded(gt=0.0, le=MAX_USD)] | None = None
    budget_usd_per_hour: Annotated[float, Bounded(gt=0.0, le=MAX_USD)] | None = None
    priority: Annotated[int, Bounded(ge=-MAX_PRIORITY, le=MAX_PRIORITY)] = 1
    checkpoint_write_seconds: Annotated[float, Bounded(ge=0.0, le=DAY_S, unit="seconds")] = 60.0
    # None: the caller uses Daly's optimum for the pool's hazard (docs/concepts/notice-window.md).
    checkpoint_interval_minutes: (
        Annotated[float, Bounded(gt=0.0, le=MAX_HOURS * 60, unit="minutes")] | None
    ) = None
    restart_minutes: Annotated[float, Bounded(ge=0.0, le=1440, unit="minutes")] = 10.0
    restart_tolerant: bool = True
    # Dollars an hour of finishing later costs (the class's default: ClassPolicy).
    value_of_time_usd_per_hour: Annotated[float, Bounded(ge=0.0, le=MAX_USD)] = 0.0
    # serving: an inline shape, or a live metric (policies.workloads.metric)
    demand: DemandShape | None = None
    demand_metric: DemandMetric | None = None
    # training (max_units, unit_hours, deadline_hours also batch)
    min_units: Annotated[int, Bounded(ge=0, le=MAX_UNITS)] = 0
    step_units: Annotated[int, Bounded(ge=1, le=MAX_UNITS)] = 1
    max_units: Annotated[int, Bounded(ge=1, le=MAX_UNITS)] | None = None
    elastic: bool = False
    min_on_non_revocable: bool = False
    unit_hours: Annotated[float, Bounded(gt=0.0, le=MAX_UNITS * MAX_HOURS, unit="hours")] | None = (
        None
    )
    # A deadline only bounds the work, it sizes no array: a century of hours.
    deadline_hours: Annotated[float, Bounded(gt=0.0, le=1e6, unit="hours")] | None = None
    # When the work becomes available, in hours from the same epoch as the
    # deadline: nothing of it runs before (0, the default: from the start).
    release_hours: Annotated[float, Bounded(ge=0.0, le=1e6, unit="hours")] = 0.0
    # The job comes back (a nightly retrain, a standing sweep queue): its demand
    # is expected over a 1- or 3-year commitment term, so it may justify one.
    # A finite job (the default) only counts for the hours it runs.
    recurring: bool = False
    min_dwell_minutes: Annotated[float, Bounded(ge=0.0, le=MAX_HOURS * 60, unit="minutes")] = 0.0
    # The gang placement contract (``policies.workloads.placement``): one
    # zone (default), one region or one provider ("any"), one instance type
    # unless mixed_types; every plan, growth, shrink and replacement inside it.
    placement: GangPlacement = GangPlacement.ZONE
    mixed_types: bool = False
    # How far the broker's own moves (re-plans ending running spot or gang
    # capacity) may disrupt this workload, beside the fleet-wide budget.
    disruption: Disruption = Field(default_factory=Disruption)
    # Out of capacity, after every listed type: larger types of the same
    # family (g5.xlarge -> g5.2xlarge, p4d.24xlarge -> p4de.24xlarge).
    allow_upgrade: bool = False
    # Who owns it, for cost per team (``broker.whatif.advice``): ``team``, else
    # a ``team`` entry of ``tags``. Labels only: nothing is planned by them.
    team: str | None = Field(default=None, min_length=1, max_length=128)
    tags: dict[Annotated[str, Field(min_length=1, max_length=128)],
               Annotated[str, Field(max_length=256)]] = Field(
        default_factory=dict, max_length=50
    )  # fmt: skip

    @model_validator(mode="before")
    @classmethod
    def _builtin_defaults(cls, data: object) -> object:
        return _fill_defaults(data, ClassDefaults()) if isinstance(data, dict) else data

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME_RE.match(v):
            raise ValueError("a name of lowercase letters, digits, '-' and '_'")
        return v

    @field_validator("instance_types")
    @classmethod
    def _unique_types(cls, v: list[str]) -> list[str]:
        dupes = sorted({t for t in v if v.count(t) > 1})
        if dupes:
            raise ValueError(f"each instance type listed once (repeated: {', '.join(dupes)})")
        if any(not t.strip() for t in v):
            raise ValueError("non-empty instance type names")
        return v

    @field_validator("regions")
    @classmethod
    def _region_names(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        bad = [r for r in v if not _REGION_RE.match(r)]
        if bad:
            raise ValueError(f"region names like us-east-1 or europe-west4 (got {bad[0]!r})")
        dupes = sorted({r for r in v if v.count(r) > 1})
        if dupes:
            raise ValueError(f"each region listed once (repeated: {', '.join(dupes)})")
        return v

    @field_validator("providers")
    @classmethod
    def _unique_providers(cls, v: list[Provider] | None) -> list[Provider] | None:
        if v is not None and len(set(v)) != len(v):
            raise ValueError("each provider listed once")
        return v

    @field_validator("throughput")
    @classmethod
    def _positive_factors(cls, v: dict[str, float]) -> dict[str, float]:
        for itype, factor in v.items():
            if not factor > 0 or factor == float("inf"):
                raise FieldError(itype, "a finite throughput factor > 0", factor)
        return v

    @model_validator(mode="after")
    def _cross_checks(self) -> Self:
        wc = self.workload_class
        for key in sorted(self.model_fields_set & _APPLIES_TO.keys()):
            if wc not in _APPLIES_TO[key]:
                allowed = " or ".join(sorted(c.value for c in _APPLIES_TO[key]))
                raise FieldError(key, f"no {key} on a {wc.value} workload ({allowed} only)")
        unlisted = sorted(set(self.throughput) - set(self.instance_types))
        if unlisted:
            raise FieldError(
                f"throughput.{unlisted[0]}",
                "an instance type that is also listed in instance_types",
                unlisted[0],
            )
        if wc is WorkloadClass.TRAINING:
            self._check_gang()
        if self.demand_metric is not None:
            self._check_demand_metric(self.demand_metric)
        if wc is not WorkloadClass.SERVING:
            if self.unit_hours is None:
                raise FieldError("unit_hours", f"the total work of a {wc.value} workload")
            self._check_deadline()
        return self

    def _check_gang(self) -> None:
        if self.min_units < 1:
            raise FieldError("min_units", "a gang size of at least 1 unit", self.min_units)
        if self.max_units is None:
            if self.elastic:
                raise FieldError("max_units", "a maximum size for an elastic job")
            object.__setattr__(self, "max_units", self.min_units)
        assert self.max_units is not None
        if self.max_units < self.min_units:
            raise FieldError(
                "max_units", f"max_units >= min_units ({self.min_units})", self.max_units
            )
        if not self.elastic and self.max_units != self.min_units:
            raise FieldError(
                "max_units",
                f"max_units == min_units ({self.min_units}) for a job with elastic: false",
                self.max_units,
            )
        if (self.max_units - self.min_units) % self.step_units:
            raise FieldError(
                "step_units",
                f"a step that divides max_units - min_units ({self.max_units - self.min_units})",
                self.step_units,
            )

    def _check_demand_metric(self, m: DemandMetric) -> None:
        if self.demand is not None:
            raise FieldError("demand_metric", "either demand or demand_metric, not both")
        if m.lookahead_for(self.restart_minutes) < self.restart_minutes:
            raise FieldError(
                "demand_metric.lookahead_minutes",
                f"at least the replica readiness, restart_minutes ({self.restart_minutes:g})",
                m.lookahead_minutes,
            )

    def _check_deadline(self) -> None:
        if self.deadline_hours is not None and self.release_hours >= self.deadline_hours:
            raise FieldError(
                "release_hours",
                f"a release before deadline_hours ({self.deadline_hours:g})",
                self.release_hours,
            )
        if self.unit_hours is None or self.deadline_hours is None or self.max_units is None:
            return
        # Feasible in principle: the largest gang on the fastest acceptable type
        # (types without a stated factor count as 1.0 here).
        best = max(self.throughput_of(t) for t in self.instance_types)
        needed_hours = self.unit_hours / (self.max_units * best)
        if needed_hours > self.deadline_hours - self.release_hours:
            after = f" after release_hours {self.release_hours:g}" if self.release_hours else ""
            raise FieldError(
                "deadline_hours",
                f"at least {self.release_hours + needed_hours:g} h: {self.unit_hours:g} "
                f"unit-hours need {needed_hours:g} h{after} at max_units {self.max_units} "
                f"and best throughput {best:g}",
                self.deadline_hours,
            )

    def due_share(self, hours: float) -> float:
        """The share of the work due ``hours`` after the epoch on uniform
        progress from ``release_hours`` to ``deadline_hours`` (0.0 without a
        deadline: nothing is due by a given hour)."""
        if self.deadline_hours is None or hours >= self.deadline_hours:
            return 1.0 if self.deadline_hours is not None else 0.0
        span = self.deadline_hours - self.release_hours
        return min(1.0, max(0.0, (hours - self.release_hours) / span))

    # --- lookups the optimizer uses -------------------------------------------------

    def gang_placement_key(
        self, *, provider: str, region: str, zone: str, instance_type: str
    ) -> str | None:
        """The placement a pool is in under this gang's contract
        (``policies.workloads.placement``); ``None`` for a workload that is no gang."""
        if self.workload_class is not WorkloadClass.TRAINING:
            return None
        return placement_key(self.placement, self.mixed_types, provider=provider,
                             region=region, zone=zone, instance_type=instance_type)  # fmt: skip

    def spot_caps_apply(self) -> tuple[bool, bool]:
        """(zone and pool caps, region cap) apply to this workload's spot:
        a gang's placement contract overrides those it makes moot
        (``policies.workloads.placement.caps_apply``)."""
        gang = self.workload_class is WorkloadClass.TRAINING
        return caps_apply(self.placement if gang else None)

    def same_placement(self, pool_a: str, pool_b: str) -> bool:
        """Whether two pools (``provider/region/zone/type``) are in one
        placement under this gang's contract (always, for no gang)."""
        if self.workload_class is not WorkloadClass.TRAINING:
            return True
        keys = set()
        for text in (pool_a, pool_b):
            p, r, z, t = text.split("/")
            keys.add(self.gang_placement_key(provider=p, region=r, zone=z, instance_type=t))
        return len(keys) == 1

    def throughput_of(self, instance_type: str, default: float = 1.0) -> float:
        """Reference work per capacity unit-hour on an acceptable ``instance_type``.

        The stated factor, else ``default`` (a caller with a catalog passes the
        GPU model's factor, ``markets.catalog.throughput_factor``). KeyError if
        the type is not acceptable to this workload.
        """
        if instance_type not in self.instance_types:
            raise KeyError(f"{instance_type!r} is not acceptable to workload {self.name!r}")
        return float(self.throughput.get(instance_type, default))

    def allows(self, provider: str, region: str) -> bool:
        """Whether the allow-lists (``providers``, ``regions``) admit a pool
        of ``provider`` in ``region`` (both ``None``: everywhere)."""
        if self.providers is not None and provider not in {str(p) for p in self.providers}:
            return False
        return self.regions is None or region in self.regions

    def preference_rank(self, instance_type: str) -> int:
        """0 for the most preferred acceptable type (ValueError if not acceptable)."""
        return self.instance_types.index(instance_type)

    def gang_sizes(self) -> list[int]:
        """Allowed sizes in physical units: min..max in steps (training only)."""
        if self.workload_class is not WorkloadClass.TRAINING or self.max_units is None:
            return []
        return list(range(self.min_units, self.max_units + 1, self.step_units))

    @property
    def non_revocable_min_units(self) -> int:
        """Units of a training gang that must sit on committed/on-demand."""
        return self.min_units if self.min_on_non_revocable else 0

    @property
    def checkpoint_write_hours(self) -> float:
        return self.checkpoint_write_seconds / 3600.0

    @property
    def restart_hours(self) -> float:
        return self.restart_minutes / 60.0


class WorkloadSet(StrictModel):
    """The workloads, their class defaults and fleet-wide dollar limits."""

    class_defaults: ClassDefaults = Field(default_factory=ClassDefaults)
    budget_usd_per_hour: Annotated[float, Bounded(gt=0.0, le=MAX_USD)] | None = None
    budget_usd: Annotated[float, Bounded(gt=0.0, le=MAX_USD)] | None = None
    # Most extra dollars break-glass may spend moving spot to on-demand (horizon).
    break_glass_cap_usd: Annotated[float, Bounded(ge=0.0, le=MAX_USD)] | None = None
    # Fleet-wide dollars per tier, per hour and per UTC day (e.g. on-demand at
    # most $500 a day); commitments count on the committed tier as bought.
    tier_budget_usd_per_hour: dict[Tier, Annotated[float, Bounded(gt=0.0, le=MAX_USD)]] = Field(
        default_factory=dict
    )
    tier_budget_usd_per_day: dict[Tier, Annotated[float, Bounded(gt=0.0, le=MAX_USD)]] = Field(
        default_factory=dict
    )
    # Fleet-wide region cap: every workload's spot is held to at most this
    # share in one (provider, region) (its own max_region_share if lower),
    # hence the fleet's spot too (the sum of shares each within the cap).
    max_region_share: Annotated[float, Bounded(gt=0.0, le=1.0)] | None = None
    # Each workload adds its own variables and rows to the plan: a thousand
    # is beyond any fleet and keeps the solver's model in memory.
    workloads: list[Workload] = Field(min_length=1, max_length=MAX_WORKLOADS)

    @model_validator(mode="before")
    @classmethod
    def _file_defaults(cls, data: object) -> object:
        if not isinstance(data, dict) or not isinstance(data.get("workloads"), list):
            return data
        try:
            defaults = ClassDefaults.model_validate(data.get("class_defaults") or {})
        except ValidationError:
            return data  # reported at class_defaults by the normal validation
        out = dict(data)
        out["workloads"] = [
            _fill_defaults(w, defaults) if isinstance(w, dict) else w for w in data["workloads"]
        ]
        return out

    @model_validator(mode="after")
    def _unique_names(self) -> Self:
        seen: set[str] = set()
        for i, w in enumerate(self.workloads):
            if w.name in seen:
                raise FieldError(f"workloads[{i}].name", "a name not used before", w.name)
            seen.add(w.name)
        if self.max_region_share is not None:
            for w in self.workloads:
                if w.max_region_share > self.max_region_share:
                    object.__setattr__(w, "max_region_share", self.max_region_share)
        return self

    def names(self) -> list[str]:
        return [w.name for w in self.workloads]

    def by_name(self, name: str) -> Workload:
        for w in self.workloads:
            if w.name == name:
                return w
        raise KeyError(f"no workload named {name!r} (known: {', '.join(self.names())})")

    def of_class(self, workload_class: WorkloadClass | str) -> list[Workload]:
        wc = WorkloadClass(workload_class)
        return [w for w in self.workloads if w.workload_class is wc]

    def instance_types(self) -> list[str]:
        """Every acceptable instance type of any workload, first mention first."""
        return list(dict.fromkeys(t for w in self.workloads for t in w.instance_types))


def parse_workloads(
    data: object, *, source: str = "<workloads>", demand_supplied: bool = False
) -> WorkloadSet:
    """Validate already-parsed YAML/JSON data (a mapping with ``workloads``).

    Without ``demand_supplied`` every serving workload needs an inline shape.
    """
    if not isinstance(data, dict):
        raise InputError(source, None, "a mapping with a 'workloads' list", got=type(data).__name__)
    try:
        wset = WorkloadSet.model_validate(data)
    except ValidationError as e:
        raise input_error_from(source, e) from e
    if not demand_supplied:
        for i, w in enumerate(wset.workloads):
            if w.workload_class is WorkloadClass.SERVING and w.demand is None:
                if w.demand_metric is not None:
                    continue
                raise InputError(
                    source,
                    f"workloads[{i}].demand",
                    "an inline demand shape for a serving workload "
                    "(or a demand_metric, or a demand file)",
                )
    return wset


def load_workloads(path: str | Path, *, demand_supplied: bool = False) -> WorkloadSet:
    """Read and validate a workloads YAML file.

    ``demand_supplied``: a demand file will provide the serving curves, so a
    serving workload need not carry an inline ``demand`` shape. Any problem
    raises ``InputError(source=path, field=<path or line>, expected=...)``.
    """
    source = str(path)
    try:
        if Path(path).stat().st_size > MAX_FILE_BYTES:
            raise InputError(source, None, f"a workloads file of at most {MAX_FILE_BYTES:,} bytes")
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(source, None, f"a readable UTF-8 YAML file ({e})") from e
    return _parse_text(text, source, demand_supplied=demand_supplied)


def _parse_text(text: str, source: str, *, demand_supplied: bool) -> WorkloadSet:
    data = read_yaml(text, source)
    wset = parse_workloads(data, source=source, demand_supplied=demand_supplied)
    _check_catalog_types(wset, source)
    return wset


def _check_catalog_types(wset: WorkloadSet, source: str) -> None:
    """A file names instance types the catalog prices: a type no market
    offers would leave its workload with no pool at all, or silently drop a
    preference (a typo)."""
    for i, w in enumerate(wset.workloads):
        for j, name in enumerate(w.instance_types):
            if name in CATALOG:
                continue
            close = difflib.get_close_matches(name, list(CATALOG), n=3, cutoff=0.6)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise InputError(
                source, f"workloads[{i}].instance_types[{j}]",
                f"an instance type the catalog knows{hint}",
                got=name,
            )  # fmt: skip


def default_workloads() -> WorkloadSet:
    """The built-in example (``spotfolio whatif`` with no arguments)."""
    ref = resources.files("policies").joinpath("examples/workloads.yaml")
    return _parse_text(
        ref.read_text(encoding="utf-8"), "policies/examples/workloads.yaml", demand_supplied=False
    )
