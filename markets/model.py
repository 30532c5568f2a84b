"""The market data model: typed, validated values every package shares.

Owns: ``Provider``, ``Tier``, ``InstanceType``, ``Pool``, ``Hazard``,
``SpotPriceRisk``, ``PoolSnapshot``, ``FailureDomain``, ``Quota`` and
``MarketSnapshot``.
Prices are US dollars per *instance* hour; per-unit prices are derived
(``PoolSnapshot.price_per_unit_hour``).

Must not: do I/O, know any cloud SDK, or hold decision rules (``policies``).
Nonsense (negative prices, a placement score outside 1-10, a zone outside its
region) is rejected by pydantic with the field named.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from markets.clock import ensure_utc
from markets.errors import InputError
from markets.keys import PoolKey

__all__ = [
    "DEFAULT_PRIOR_HOURS",
    "FailureDomain",
    "Hazard",
    "HazardSource",
    "InstanceType",
    "MarketSnapshot",
    "Pool",
    "PoolSnapshot",
    "Provider",
    "Quota",
    "QuotaUnit",
    "SpotPriceRisk",
    "Tier",
]

NonNegativeUsd = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]


class Provider(StrEnum):
    AWS = "aws"
    GCP = "gcp"


class Tier(StrEnum):
    """How capacity is bought.

    ``committed``: reserved instances, savings plans, committed-use discounts;
    paid every hour whether used or not. ``on_demand``: per hour, never revoked.
    ``spot``: cheap, revocable with a notice (AWS 120 s, GCP 30 s).
    """

    COMMITTED = "committed"
    ON_DEMAND = "on_demand"
    SPOT = "spot"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class InstanceType(_Frozen):
    """An instance (machine) type and the capacity it supplies.

    ``units`` is what demand is counted in (GPUs for GPU types, vCPUs for CPU
    types).
    """

    provider: Provider
    name: str = Field(min_length=1)
    family: str = Field(min_length=1)
    units: int = Field(gt=0, description="capacity units per instance (GPUs, or vCPUs)")
    gpu_model: str | None = None
    gpus: int = Field(default=0, ge=0)
    vcpus: int = Field(gt=0)
    memory_gib: float = Field(gt=0, allow_inf_nan=False)
    gpu_memory_gib: float | None = Field(default=None, gt=0, allow_inf_nan=False)


class Pool(_Frozen):
    """(provider, region, zone, instance type): the unit of a spot market."""

    provider: Provider
    region: str = Field(min_length=1)
    zone: str = Field(min_length=1)
    instance_type: str = Field(min_length=1)

    @model_validator(mode="after")
    def _zone_in_region(self) -> Self:
        if not self.zone.startswith(self.region):
            raise ValueError(
                f"zone {self.zone!r} is not in region {self.region!r} "
                "(a zone name starts with its region's name)"
            )
        return self

    @property
    def pool_key(self) -> PoolKey:
        """The pool's identity as a value (``markets.keys``)."""
        return PoolKey(self.provider.value, self.region, self.zone, self.instance_type)

    @property
    def key(self) -> str:
        """Stable string id: ``aws/us-east-1/us-east-1a/p3.2xlarge``."""
        return str(self.pool_key)

    @classmethod
    def from_key(cls, key: str) -> Pool:
        """The pool a key names; ``ValueError`` (pydantic's, or a malformed
        key's) when it names none, as the adapters that call it expect."""
        try:
            k = PoolKey.parse(key)
        except InputError as e:
            raise ValueError(str(e)) from e
        return cls(
            provider=Provider(k.provider),
            region=k.region,
            zone=k.zone,
            instance_type=k.instance_type,
        )

    def __str__(self) -> str:
        return self.key


class HazardSource(StrEnum):
    """Where an interruption hazard estimate came from."""

    OBSERVED = "observed"  # our own or a trace's recorded revocations
    ADVISOR = "advisor"  # AWS Spot Instance Advisor bucket (a prior)
    MODEL = "model"  # the embedded default market's stated calibration
    ASSUMED = "assumed"  # a configured default: nothing known


# The hazard prior's weight, in hours watched (one day of watching the pool):
# what a ``Hazard``'s ``confidence`` is stated against
# (``markets.hazard.prior`` builds its priors on it).
DEFAULT_PRIOR_HOURS = 24.0


class Hazard(_Frozen):
    """Interruptions per wall-clock hour held on spot, with provenance."""

    rate_per_hour: float = Field(ge=0.0, allow_inf_nan=False)
    source: HazardSource = HazardSource.ASSUMED
    confidence: float = Field(default=0.0, ge=0.0, le=1.0)
    observed_hours: float = Field(default=0.0, ge=0.0, allow_inf_nan=False)

    @property
    def mean_hours_between(self) -> float:
        return float("inf") if self.rate_per_hour == 0 else 1.0 / self.rate_per_hour

    @property
    def observed_gamma_hours(self) -> float | None:
        """Hours behind the estimate's Gamma when it rests on observation
        (``confidence = T / (T + b0)``, so ``T / confidence``); ``None`` when
        nothing was observed (each caller states its prior)."""
        if self.observed_hours > 0 and self.confidence > 0:
            return self.observed_hours / self.confidence
        return None


class SpotPriceRisk(_Frozen):
    """How a pool's spot price has moved (``markets.price_analytics``): the
    level of its current price regime, when that regime began (``None``: no
    shift in the window), the shifts seen, the weekly volatility of its log
    price, and the margin a plan adds for it. A plan prices spot at
    ``planning_usd_per_hour``; a bill uses the price in force."""

    regime_usd_per_hour: NonNegativeUsd
    regime_since: datetime | None = None
    shifts: int = Field(default=0, ge=0)
    last_shift: float | None = None  # relative level change at the last shift
    weekly_volatility: float = Field(default=0.0, ge=0.0, allow_inf_nan=False)
    margin_usd_per_hour: NonNegativeUsd = 0.0
    window_hours: float = Field(default=0.0, ge=0.0)

    @property
    def planning_usd_per_hour(self) -> float:
        return self.regime_usd_per_hour + self.margin_usd_per_hour


class PoolSnapshot(_Frozen):
    """What is known of one pool at one time.

    ``spot_usd_per_hour`` is ``None`` where spot is not offered or not known.
    Committed prices are the effective hourly price of a 1- or 3-year term
    (upfront amortised), ``None`` where unknown. ``placement_score`` (1-10) is a
    signal of *fulfilment* only; it does not predict interruptions. ``hazard``
    does. ``available_share`` is the share of recent time spot could be held.
    """

    pool: Pool
    instance: InstanceType
    on_demand_usd_per_hour: NonNegativeUsd
    spot_usd_per_hour: NonNegativeUsd | None = None
    committed_1y_usd_per_hour: NonNegativeUsd | None = None
    committed_3y_usd_per_hour: NonNegativeUsd | None = None
    placement_score: int | None = Field(default=None, ge=1, le=10)
    hazard: Hazard = Field(default_factory=lambda: Hazard(rate_per_hour=0.0))
    available_share: float | None = Field(default=None, ge=0.0, le=1.0)
    spot_available: bool = True
    observed_at: datetime
    spot_risk: SpotPriceRisk | None = None  # None: the price's movement is not known

    @field_validator("observed_at")
    @classmethod
    def _utc(cls, v: datetime) -> datetime:
        return ensure_utc(v)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.pool.instance_type != self.instance.name:
            raise ValueError(
                f"instance.name {self.instance.name!r} differs from "
                f"pool.instance_type {self.pool.instance_type!r}"
            )
        if self.pool.provider != self.instance.provider:
            raise ValueError("instance.provider differs from pool.provider")
        return self

    @property
    def planning_spot_usd_per_hour(self) -> float | None:
        """The spot price a decision plans with: the current regime's level
        plus its volatility margin where ``spot_risk`` is known, else the
        price in force (``None`` where spot is not offered)."""
        if self.spot_usd_per_hour is None or self.spot_risk is None:
            return self.spot_usd_per_hour
        return self.spot_risk.planning_usd_per_hour

    def price(self, tier: Tier, *, term_years: int = 1) -> float | None:
        """Dollars per instance-hour on ``tier`` (``None`` if not offered)."""
        if tier is Tier.ON_DEMAND:
            return self.on_demand_usd_per_hour
        if tier is Tier.SPOT:
            return self.spot_usd_per_hour
        if term_years == 3:
            return self.committed_3y_usd_per_hour
        return self.committed_1y_usd_per_hour

    def price_per_unit_hour(self, tier: Tier, *, term_years: int = 1) -> float | None:
        """Dollars per capacity-unit-hour on ``tier``."""
        p = self.price(tier, term_years=term_years)
        return None if p is None else p / self.instance.units

    @property
    def spot_discount(self) -> float | None:
        """Fraction off on-demand (0.65 = 65 % cheaper)."""
        if self.spot_usd_per_hour is None or self.on_demand_usd_per_hour == 0:
            return None
        return 1.0 - self.spot_usd_per_hour / self.on_demand_usd_per_hour


class FailureDomain(_Frozen):
    """Zones whose revocations come together: one risk, not several.

    ``zones`` are zone keys (``aws/us-east-1a``, ``PoolKey.zone_key``), the
    pools of a zone merged; a one-zone domain is a zone whose revocations
    bunch. ``co_share``: the share of the members' revocations with another
    member's (another zone's, or for one zone another) within ``window_s``;
    ``baseline``: the same if they came independently at their rates
    (``markets.hazard.clustering.failure_domains`` finds them). ``source``
    says whose record: ``traces`` or ``account`` (the daemon's own)."""

    name: str = Field(min_length=1)
    zones: tuple[str, ...] = Field(min_length=1)
    co_share: float = Field(ge=0.0, le=1.0)
    baseline: float = Field(ge=0.0, le=1.0)
    events: int = Field(ge=0)
    window_s: float = Field(gt=0.0, allow_inf_nan=False)
    source: str = "traces"


class QuotaUnit(StrEnum):
    """What a quota counts: AWS's EC2 limits count vCPUs, GCP's GPU quotas GPUs."""

    VCPUS = "vcpus"
    GPUS = "gpus"


class Quota(_Frozen):
    """An account's limit on what it may run at once, in ``unit``.

    Keyed by provider, region (``None``: every region, as GCP's global
    ``GPUS_ALL_REGIONS``), ``group`` (which instances it counts: an AWS
    instance-family group such as ``P`` or ``G``, a GCP GPU metric such as
    ``NVIDIA_H100_GPUS``; ``markets.quotas`` says which instance is in which)
    and ``tier``: ``on_demand`` counts on-demand and committed instances (a
    reservation or a commitment is a discount on a running instance, which
    the limit counts), ``spot`` counts spot, ``None`` both. ``code`` is the
    cloud's own name for it (``L-417A185B``, ``PREEMPTIBLE_NVIDIA_H100_GPUS``).
    """

    provider: Provider
    region: str | None = Field(default=None, min_length=1)
    group: str = Field(min_length=1, max_length=64)
    tier: Tier | None = None
    limit: float = Field(ge=0.0, allow_inf_nan=False)
    unit: QuotaUnit
    code: str = Field(default="", max_length=64)

    @field_validator("tier")
    @classmethod
    def _running_tier(cls, v: Tier | None) -> Tier | None:
        if v is Tier.COMMITTED:
            raise ValueError("on_demand or spot (committed instances count as on_demand)")
        return v

    @property
    def key(self) -> str:
        """``aws/us-east-1/P/on_demand``; ``gcp/*/GPUS_ALL_REGIONS/any``."""
        tier = "any" if self.tier is None else self.tier.value
        return f"{self.provider.value}/{self.region or '*'}/{self.group}/{tier}"

    def counts_tier(self, tier: Tier) -> bool:
        """Whether instances on ``tier`` count against this quota."""
        if self.tier is None:
            return True
        if self.tier is Tier.SPOT:
            return tier is Tier.SPOT
        return tier is not Tier.SPOT

    @property
    def label(self) -> str:
        """How an explanation names it: ``P vCPUs``, ``NVIDIA_H100_GPUS``."""
        if self.unit is QuotaUnit.VCPUS:
            tier = " spot" if self.tier is Tier.SPOT else ""
            return f"{self.group}{tier} vCPUs in {self.region or 'all regions'}"
        return f"{self.code or self.group} in {self.region or 'all regions'}"


class MarketSnapshot(_Frozen):
    """All pools at one time. ``stale`` marks data older than its TTL, kept
    because nothing newer could be had. ``failure_domains``: the zones known
    to revoke together (empty: every zone on its own). ``quotas``: the
    account's limits known (empty: none known, none kept to)."""

    at: datetime
    pools: tuple[PoolSnapshot, ...]
    stale: bool = False
    source: str = "unknown"
    failure_domains: tuple[FailureDomain, ...] = ()
    quotas: tuple[Quota, ...] = ()

    @field_validator("at")
    @classmethod
    def _utc(cls, v: datetime) -> datetime:
        return ensure_utc(v)

    @model_validator(mode="after")
    def _unique(self) -> Self:
        keys = [p.pool.key for p in self.pools]
        if len(keys) != len(set(keys)):
            dupes = sorted({k for k in keys if keys.count(k) > 1})
            raise ValueError(f"pools listed twice: {dupes}")
        qkeys = [q.key for q in self.quotas]
        if len(qkeys) != len(set(qkeys)):
            dupes = sorted({k for k in qkeys if qkeys.count(k) > 1})
            raise ValueError(f"quotas listed twice: {dupes}")
        return self

    def by_key(self) -> dict[str, PoolSnapshot]:
        return {p.pool.key: p for p in self.pools}

    def get(self, key: str) -> PoolSnapshot:
        for p in self.pools:
            if p.pool.key == key:
                return p
        raise KeyError(key)

    def zones(self) -> list[str]:
        return sorted({p.pool.zone for p in self.pools})

    def domain_of(self, zone_key: str) -> FailureDomain | None:
        """The failure domain holding ``zone_key`` (``None``: a zone on its own)."""
        for d in self.failure_domains:
            if zone_key in d.zones:
                return d
        return None

    def instance_types(self) -> list[str]:
        return sorted({p.pool.instance_type for p in self.pools})

    def with_quotas(self, quotas: tuple[Quota, ...]) -> MarketSnapshot:
        """This snapshot keeping to ``quotas`` (those it had of the same key
        replaced)."""
        keys = {q.key for q in quotas}
        kept = tuple(q for q in self.quotas if q.key not in keys)
        return MarketSnapshot.model_validate({**self.__dict__, "quotas": (*kept, *quotas)})

    def mark_stale(self) -> MarketSnapshot:
        return self.model_copy(update={"stale": True})
