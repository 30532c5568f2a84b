"""The live AWS market: EC2 and Price List APIs as one ``MarketSnapshot``.

Owns: ``AwsMarket`` (a ``markets.protocols.PriceSource``), its caches, and the
factory ``open_aws_market`` the market registry names. A snapshot joins, per
pool (region, zone, instance type): the on-demand list price (Pricing API,
falling back to the embedded catalog's dated list price), reserved 1y/3y
effective prices, the spot price in force at ``at`` (spot price history), the
placement score (zone or region) and an interruption hazard prior. With
``quota_clients`` the snapshot also carries the account's EC2 vCPU limits of
the requested types' family groups (``markets.aws.quotas``).

Caching and failure, one rule per component (zones, offerings, instance
types, on-demand, reserved, spot history, placement), kept by
``markets.cache.TtlCache``: a value younger than its TTL (``markets.ttl``) is
reused; an older one is refetched; if the refetch fails *transiently*
(throttled or 5xx after botocore's retries, network) the old value is kept and
the snapshot is marked ``stale``; with no old value there is nothing honest to
plan on and ``StaleDataError`` is raised. Auth errors are never masked as
stale: they propagate at once.

Must not: retry by itself (botocore's retry config does), launch anything,
or estimate hazards from history (``markets.hazard.posterior`` does).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Literal, TypedDict, Unpack

import numpy as np

from markets import ttl
from markets.aws.hazard import advisor_hazard, assumed_hazard
from markets.aws.inventory import Zone, fetch_instance_types, fetch_offerings, fetch_zones
from markets.aws.options import REGION_PATTERN, TYPE_PATTERN, parse_names
from markets.aws.pricing import catalog_on_demand, fetch_on_demand, fetch_reserved
from markets.aws.quotas import ServiceQuotasApi, fetch_ec2_quotas
from markets.aws.rows import SkippedRows
from markets.aws.sdk import (
    DEFAULT_MAX_ATTEMPTS,
    Ec2Api,
    PricingApi,
    RetryMode,
    build_clients,
)
from markets.aws.spot import SpotHistory, fetch_placement_scores, fetch_spot_history
from markets.cache import Entry, TtlCache
from markets.clock import Clock, SystemClock, ensure_utc
from markets.errors import InputError, StaleDataError
from markets.model import InstanceType, MarketSnapshot, Pool, PoolSnapshot, Provider, Quota
from markets.price_analytics import price_risk
from markets.quotas import aws_group

__all__ = [
    "DEFAULT_INSTANCE_TYPES",
    "DEFAULT_REGIONS",
    "AwsMarket",
    "AwsMarketOptions",
    "PlacementMode",
    "open_aws_market",
]

log = logging.getLogger(__name__)

DEFAULT_REGIONS = ("us-east-1",)
# GPU types from the embedded catalog, one per family, cheap to expensive.
DEFAULT_INSTANCE_TYPES = ("g4dn.xlarge", "g5.xlarge", "g6.xlarge", "p4d.24xlarge", "p5.48xlarge")
DEFAULT_HISTORY_DAYS = 7.0
# DescribeSpotPriceHistory: "you can view the spot price history for the past
# 90 days" (EC2 API reference).
MAX_HISTORY_DAYS = 90.0
PlacementMode = Literal["zone", "region", "off"]
_FUTURE_SKEW = timedelta(minutes=5)


class AwsMarketOptions(TypedDict, total=False):
    """``AwsMarket``'s options besides its clients (``from_settings`` passes them on)."""

    instance_types: Sequence[str]
    zones: Sequence[str] | None
    placement_client: Ec2Api | None
    placement: PlacementMode
    placement_target_capacity: int
    reserved: bool
    history_days: float
    advisor_buckets: Mapping[tuple[str, str], int] | None
    clock: Clock | None


class AwsMarket:
    """Live AWS pools for ``instance_types`` in the regions of ``ec2_clients``.

    Clients are injected (tests pass moto or ``Stubber`` clients); use
    ``from_settings`` or ``open_aws_market`` to build real ones.
    ``pricing_client=None`` prices on-demand from the embedded catalog only.
    ``skipped`` counts every row AWS sent that did not validate.
    """

    name = "aws"

    def __init__(
        self,
        *,
        ec2_clients: Mapping[str, Ec2Api],
        pricing_client: PricingApi | None,
        instance_types: Sequence[str] = DEFAULT_INSTANCE_TYPES,
        zones: Sequence[str] | None = None,
        placement_client: Ec2Api | None = None,
        placement: PlacementMode = "zone",
        placement_target_capacity: int = 1,
        reserved: bool = True,
        history_days: float = DEFAULT_HISTORY_DAYS,
        advisor_buckets: Mapping[tuple[str, str], int] | None = None,
        clock: Clock | None = None,
        quota_clients: Mapping[str, ServiceQuotasApi] | None = None,
    ) -> None:
        if not ec2_clients:
            raise InputError("--regions", None, "at least one region")
        if not 0 < history_days <= MAX_HISTORY_DAYS:
            raise InputError(
                "history_days", None, f"> 0 and <= {MAX_HISTORY_DAYS:g}", got=history_days
            )
        if placement not in ("zone", "region", "off"):
            raise InputError("placement", None, "zone, region or off", got=placement)
        if placement_target_capacity < 1:
            raise InputError(
                "placement_target_capacity", None, ">= 1", got=placement_target_capacity
            )
        self.regions: tuple[str, ...] = tuple(sorted(ec2_clients))
        # Public and read-only by convention: what the market talks to.
        self.ec2_clients: Mapping[str, Ec2Api] = dict(ec2_clients)
        self.pricing_client = pricing_client
        self._placement_client = placement_client or self.ec2_clients[self.regions[0]]
        self.requested_types: tuple[str, ...] = tuple(sorted(set(instance_types)))
        self._zone_filter = frozenset(zones) if zones else None
        self._placement: PlacementMode = placement
        self._target_capacity = placement_target_capacity
        self._with_reserved = reserved
        self._history = timedelta(days=history_days)
        self._advisor = dict(advisor_buckets or {})
        self._clock: Clock = clock or SystemClock()
        self._cache = TtlCache(self._clock, source="aws", answer_from="AWS", log=log)
        # Parts missing or old for reasons other than a kept cache entry.
        self._stale_parts: set[str] = set()
        self._reported: set[tuple[str, datetime]] = set()
        self.skipped = SkippedRows()
        self._quota_clients = dict(quota_clients or {})

    @classmethod
    def from_settings(
        cls,
        *,
        regions: Sequence[str] = DEFAULT_REGIONS,
        retry_mode: RetryMode = "adaptive",
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        profile: str | None = None,
        endpoint_url: str | None = None,
        read_quotas: bool = False,
        **options: Unpack[AwsMarketOptions],
    ) -> AwsMarket:
        """Real boto3 clients (default credential chain, or ``profile``) with
        botocore's ``retry_mode`` retries; ``read_quotas``: Service Quotas
        clients too (the snapshot carries the EC2 vCPU limits)."""
        clients = build_clients(
            regions,
            retry_mode=retry_mode,
            max_attempts=max_attempts,
            profile=profile,
            endpoint_url=endpoint_url,
            quotas=read_quotas,
        )
        return cls(
            ec2_clients=clients.ec2,
            pricing_client=clients.pricing,
            quota_clients=clients.service_quotas,
            **options,
        )

    # -- PriceSource -----------------------------------------------------------

    def pools(self) -> Sequence[Pool]:
        return tuple(p.pool for p in self.snapshot().pools)

    def instance_types(self) -> Sequence[InstanceType]:
        types = self._cache.get("instance_types", ttl.INSTANCE_TYPES_TTL_S, self._fetch_types)
        return tuple(types.value[n] for n in sorted(types.value))

    def snapshot(self, at: datetime | None = None) -> MarketSnapshot:
        now = self._clock.now()
        at = now if at is None else ensure_utc(at)
        if at > now + _FUTURE_SKEW:
            raise InputError("snapshot", "at", "a time not after now", got=at.isoformat())
        self._stale_parts = set()
        # Marks left by calls outside a snapshot (instance_types()) go too, and
        # lose nothing: a failed refresh keeps its entry past the TTL, so this
        # snapshot asks again and marks it again if that fails.
        self._cache.clear_stale()
        types = self._cache.get("instance_types", ttl.INSTANCE_TYPES_TTL_S, self._fetch_types).value
        zones = {r: self._zones(r) for r in self.regions}
        on_demand = self._on_demand()
        live = now - at <= timedelta(seconds=ttl.SPOT_PRICE_TTL_S)
        scores = self._scores(zones) if live and self._placement != "off" else {}
        pools: list[PoolSnapshot] = []
        for region in self.regions:
            offered = self._offerings(region, zones[region])
            reserved = self._reserved(region)
            spot = self._spot(region, zones[region])
            hist: SpotHistory = spot.value
            if at < hist.start:
                raise InputError(
                    "snapshot",
                    "at",
                    f"a time after {hist.start.isoformat()} (spot history fetched)",
                    got=at.isoformat(),
                )
            observed_at = min(at, spot.fetched_at)
            for itype, zone_names in offered.items():
                od = on_demand.get((region, itype))
                if od is None or itype not in types:
                    continue  # counted where the price or the spec went missing
                for zone in zone_names:
                    if self._zone_filter is not None and zone not in self._zone_filter:
                        continue
                    pools.append(
                        self._pool_snapshot(
                            types[itype], region, zone, od, reserved, hist, scores, at, observed_at
                        )
                    )
        pools.sort(key=lambda p: p.pool.key)
        quotas = self._quotas(types)
        stale_parts = self._stale_parts | self._cache.stale_keys
        stale = bool(stale_parts)
        if stale:
            log.warning("aws market snapshot is stale: kept old %s", sorted(stale_parts))
        return MarketSnapshot(at=at, pools=tuple(pools), stale=stale, source="aws", quotas=quotas)

    def _quotas(self, types: Mapping[str, InstanceType]) -> tuple[Quota, ...]:
        """Each region's vCPU limits of the requested types' groups (cached)."""
        groups = sorted({aws_group(types[t].family) for t in self.requested_types if t in types})
        out: list[Quota] = []
        for region in self.regions:
            client = self._quota_clients.get(region)
            if client is None:
                continue

            def fetch(c: ServiceQuotasApi = client, r: str = region) -> tuple[Quota, ...]:
                return fetch_ec2_quotas(c, r, groups)

            try:
                entry = self._cache.get(f"quotas:{region}", ttl.QUOTA_TTL_S, fetch)
            except StaleDataError as e:  # never read: none known (a refusal is still handled)
                log.warning("aws quotas of %s unknown: %s", region, e)
                self._stale_parts.add(f"quotas:{region}")
                continue
            out.extend(entry.value)
        return tuple(out)

    # -- assembly --------------------------------------------------------------

    def _pool_snapshot(
        self,
        inst: InstanceType,
        region: str,
        zone: str,
        on_demand_usd: float,
        reserved: Mapping[tuple[str, int], float],
        hist: SpotHistory,
        scores: Mapping[str, int],
        at: datetime,
        observed_at: datetime,
    ) -> PoolSnapshot:
        pool = Pool(provider=Provider.AWS, region=region, zone=zone, instance_type=inst.name)
        point = hist.price_at(zone, inst.name, at)
        spot = point.usd_per_hour if point else None
        if point is not None and spot is not None and spot > on_demand_usd:
            # AWS caps spot at on-demand (since the 2017 pricing change): a
            # higher figure is a bad row, not a price to plan with.
            if (pool.key, point.at) not in self._reported:
                self._reported.add((pool.key, point.at))
                self.skipped.skip("ec2:DescribeSpotPriceHistory", "spot above on-demand", point)
            spot = None
        bucket = self._advisor.get((region, inst.name))
        # The price's movement over the history fetched (volatility, regime):
        # the planners price spot at its current regime plus a margin
        # (``markets.price_analytics``), as the replay market does.
        pts = [p for p in hist.points.get((zone, inst.name), ()) if p.at <= at]
        risk = (
            price_risk(
                np.array([int(p.at.timestamp() * 1e9) for p in pts], dtype=np.int64),
                np.array([p.usd_per_hour for p in pts], dtype=np.float64),
                int(at.timestamp() * 1e9),
            )
            if pts and spot is not None
            else None
        )
        return PoolSnapshot(
            pool=pool,
            instance=inst,
            on_demand_usd_per_hour=on_demand_usd,
            spot_usd_per_hour=spot,
            committed_1y_usd_per_hour=reserved.get((inst.name, 1)),
            committed_3y_usd_per_hour=reserved.get((inst.name, 3)),
            placement_score=scores.get(zone, scores.get(region)),
            hazard=assumed_hazard() if bucket is None else advisor_hazard(bucket),
            spot_available=spot is not None,
            spot_risk=risk,
            observed_at=observed_at,
        )

    # -- components ------------------------------------------------------------

    def _fetch_types(self) -> dict[str, InstanceType]:
        return fetch_instance_types(self.ec2_clients, self.requested_types, self.skipped)

    def _zones(self, region: str) -> tuple[Zone, ...]:
        return self._cache.get(
            f"zones/{region}",
            ttl.AVAILABILITY_ZONES_TTL_S,
            lambda: fetch_zones(self.ec2_clients[region], region, self.skipped),
        ).value

    def _offerings(self, region: str, zones: Sequence[Zone]) -> dict[str, tuple[str, ...]]:
        return self._cache.get(
            f"offerings/{region}",
            ttl.INSTANCE_TYPE_OFFERINGS_TTL_S,
            lambda: fetch_offerings(
                self.ec2_clients[region], region, self.requested_types, zones, self.skipped
            ),
        ).value

    def _on_demand(self) -> dict[tuple[str, str], float]:
        """Pricing API prices, completed from the catalog where it has none."""
        prices: dict[tuple[str, str], float] = {}
        if self.pricing_client is not None:
            client = self.pricing_client
            try:
                prices = dict(
                    self._cache.get(
                        "on_demand",
                        ttl.ON_DEMAND_PRICE_TTL_S,
                        lambda: fetch_on_demand(
                            client, self.regions, self.requested_types, self.skipped
                        ),
                    ).value
                )
            except StaleDataError as e:
                # Never answered: the catalog's dated list prices are still
                # facts, but not today's, so the snapshot is stale.
                log.warning("aws on-demand prices unavailable (%s); using the catalog", e)
                self._stale_parts.add("on_demand")
        for (region, itype), usd in catalog_on_demand(self.regions, self.requested_types):
            if (region, itype) not in prices:
                log.info("on-demand price of %s in %s from the catalog", itype, region)
                prices[(region, itype)] = usd
        return prices

    def _reserved(self, region: str) -> dict[tuple[str, int], float]:
        if not self._with_reserved:
            return {}
        return self._cache.get(
            f"reserved/{region}",
            ttl.RESERVED_PRICE_TTL_S,
            lambda: fetch_reserved(
                self.ec2_clients[region], region, self.requested_types, self.skipped
            ),
        ).value

    def _spot(self, region: str, zones: Iterable[Zone]) -> Entry[SpotHistory]:
        names = [z.name for z in zones]

        def fetch() -> SpotHistory:
            end = self._clock.now()
            start = end - self._history
            points = fetch_spot_history(
                self.ec2_clients[region],
                region,
                self.requested_types,
                names,
                start,
                end,
                self.skipped,
            )
            return SpotHistory.build(start, end, points)

        return self._cache.get(f"spot/{region}", ttl.SPOT_PRICE_TTL_S, fetch)

    def placement_scores(self) -> dict[str, int]:
        """The current placement score of every offered pool, by pool key (the
        lifecycle's ``PlacementReader``: a replacement or a fallback ranks with
        the score now, not the snapshot's): the score of the pool's zone, or of
        its region with ``placement="region"``, read at most once per
        ``SPOT_PLACEMENT_SCORE_TTL_S`` (the same cache as the snapshot's);
        ``{}`` with ``placement="off"``."""
        if self._placement == "off":
            return {}
        zones = {r: self._zones(r) for r in self.regions}
        scores = self._scores(zones)
        out: dict[str, int] = {}
        for region in self.regions:
            for itype, zone_names in self._offerings(region, zones[region]).items():
                for zone in zone_names:
                    if self._zone_filter is not None and zone not in self._zone_filter:
                        continue
                    score = scores.get(zone if self._placement == "zone" else region)
                    if score is not None:
                        key = Pool(
                            provider=Provider.AWS, region=region, zone=zone, instance_type=itype
                        ).key
                        out[key] = score
        return out

    def _scores(self, zones: Mapping[str, Sequence[Zone]]) -> dict[str, int]:
        by_id = {z.zone_id: z.name for zs in zones.values() for z in zs}
        return self._cache.get(
            f"placement/{self._placement}",
            ttl.SPOT_PLACEMENT_SCORE_TTL_S,
            lambda: fetch_placement_scores(
                self._placement_client,
                self.regions,
                self.requested_types,
                target_capacity=self._target_capacity,
                single_zone=self._placement == "zone",
                zone_names_by_id=by_id,
                skipped=self.skipped,
            ),
        ).value


def open_aws_market(
    *,
    regions: object = None,
    instance_types: object = None,
    ec2_clients: Mapping[str, Ec2Api] | None = None,
    pricing_client: PricingApi | None = None,
    retry_mode: RetryMode = "adaptive",
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    profile: str | None = None,
    endpoint_url: str | None = None,
    zones: Sequence[str] | None = None,
    placement_client: Ec2Api | None = None,
    placement: PlacementMode | None = None,
    placement_target_capacity: int | None = None,
    reserved: bool | None = None,
    history_days: float | None = None,
    advisor_buckets: Mapping[tuple[str, str], int] | None = None,
    clock: Clock | None = None,
    read_quotas: bool = False,
    **_other_markets: object,
) -> AwsMarket:
    """The registry's factory: ``open_market("aws", regions=..., instance_types=...)``.

    ``regions`` / ``instance_types``: sequences or comma-separated strings.
    With ``ec2_clients`` (tests) no client is built. ``read_quotas``: the
    snapshot carries the account's EC2 vCPU limits. The other keyword
    options go to ``AwsMarket`` (``None`` keeps its default); options meant
    for other markets are ignored.
    """
    types = parse_names(
        instance_types or DEFAULT_INSTANCE_TYPES,
        "--instance-types",
        TYPE_PATTERN,
        "names like g5.xlarge",
    )
    kwargs: AwsMarketOptions = {
        "instance_types": types,
        "zones": zones,
        "placement_client": placement_client,
        "advisor_buckets": advisor_buckets,
        "clock": clock,
    }
    if placement is not None:
        kwargs["placement"] = placement
    if placement_target_capacity is not None:
        kwargs["placement_target_capacity"] = placement_target_capacity
    if reserved is not None:
        kwargs["reserved"] = reserved
    if history_days is not None:
        kwargs["history_days"] = history_days
    if ec2_clients is not None:
        wanted = (
            parse_names(regions, "--regions", REGION_PATTERN, "names like us-east-1")
            if regions
            else None
        )
        if wanted and not set(wanted) <= set(ec2_clients):
            raise InputError(
                "--regions", None, f"regions with a client: {sorted(ec2_clients)}", got=wanted
            )
        clients = {r: c for r, c in ec2_clients.items() if not wanted or r in wanted}
        return AwsMarket(ec2_clients=clients, pricing_client=pricing_client, **kwargs)
    region_names = parse_names(
        regions or DEFAULT_REGIONS, "--regions", REGION_PATTERN, "names like us-east-1"
    )
    return AwsMarket.from_settings(
        regions=region_names,
        retry_mode=retry_mode,
        max_attempts=max_attempts,
        profile=profile,
        endpoint_url=endpoint_url,
        read_quotas=read_quotas,
        **kwargs,
    )
