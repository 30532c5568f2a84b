"""The live GCP market: Compute Engine inventory and a price file as one ``MarketSnapshot``.

Owns: ``GcpMarket`` (a ``markets.protocols.PriceSource``), its caches, and the
factory ``open_gcp_market`` the market registry names. A snapshot joins, per
pool (region, zone, machine type): the zone's offering of the type
(machineTypes.aggregatedList) with its GPUs (named via acceleratorTypes), and
the prices in force at ``at`` (``markets.gcp.prices``: on-demand, spot, 1- and
3-year committed use, from a price file or the embedded catalog). With a
regions client the snapshot also carries the GPU quotas of the offered GPU
models (``markets.gcp.quotas``; the global one with a projects client).

What GCP does not have, and what the snapshot says instead: no placement
score (``placement_score=None``); no interruption history per pool, so the
hazard is ``markets.hazard.prior.ASSUMED_PRIOR`` labelled ``assumed`` until
observed preemptions say otherwise; spot prices are per region and change at
most monthly, so one price file row serves every zone of the region.

Caching and failure, one rule per component (zones, machine types,
accelerators, price file), kept by ``markets.cache.TtlCache`` as in
``markets.aws.market``: a value younger than its TTL (``markets.ttl``) is
reused; an older one is refetched; a *transient* failure (429/5xx after
api-core's retries, network) keeps the old value and marks the snapshot
``stale``; with no old value ``StaleDataError`` is raised.
A price file older than ``prices.MAX_FILE_AGE_S`` at ``at`` also marks the
snapshot stale. Auth errors propagate at once.

Must not: retry by itself, launch anything (``markets.gcp.provider``), or
estimate hazards from history (``markets.hazard.posterior``).
"""

from __future__ import annotations

import logging
import os
import re
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, Unpack

from markets import ttl
from markets.cache import Entry, TtlCache
from markets.clock import Clock, SystemClock, ensure_utc
from markets.errors import InputError, StaleDataError
from markets.gcp.errors import gcp_call
from markets.gcp.inventory import (
    AcceleratorSpec,
    GcpZone,
    MachineTypeSpec,
    fetch_accelerators,
    fetch_machine_types,
    fetch_zones,
    instance_type,
)
from markets.gcp.prices import MAX_FILE_AGE_S, PriceTable
from markets.gcp.quotas import fetch_gpu_quotas
from markets.gcp.sdk import (
    AcceleratorTypesApi,
    CallPolicy,
    ComputeClients,
    MachineTypesApi,
    ProjectsApi,
    RegionsApi,
    ZonesApi,
    build_compute_clients,
)
from markets.hazard.prior import ASSUMED_PRIOR
from markets.model import (
    Hazard,
    HazardSource,
    InstanceType,
    MarketSnapshot,
    Pool,
    PoolSnapshot,
    Provider,
    Quota,
)
from markets.options import parse_names
from markets.quotas import gcp_gpu_metric

if TYPE_CHECKING:
    from google.auth.credentials import Credentials

__all__ = [
    "DEFAULT_MACHINE_TYPES",
    "DEFAULT_REGIONS",
    "GcpMarket",
    "open_gcp_market",
]

log = logging.getLogger(__name__)

DEFAULT_REGIONS = ("us-central1",)
# GPU machine types of the embedded catalog, one or two per family.
DEFAULT_MACHINE_TYPES = (
    "a2-highgpu-1g",
    "a2-highgpu-8g",
    "a3-highgpu-8g",
    "g2-standard-4",
    "g2-standard-8",
)
PROJECT_PATTERN = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")  # GCP project id rules
REGION_PATTERN = re.compile(r"^[a-z]+-[a-z]+\d+$")  # us-central1, europe-west4
ZONE_PATTERN = re.compile(r"^[a-z]+-[a-z]+\d+-[a-z]$")  # us-central1-a
TYPE_PATTERN = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)+$")  # a2-highgpu-1g
_FUTURE_SKEW = timedelta(minutes=5)


class GcpMarketOptions(TypedDict, total=False):
    """``GcpMarket``'s options besides project and clients (the constructors
    pass them on)."""

    regions: Sequence[str] | str
    instance_types: Sequence[str] | str
    zones: Sequence[str] | str | None
    prices: str | Path | None
    clock: Clock | None
    policy: CallPolicy | None


class GcpMarket:
    """Live GCP pools for ``instance_types`` (machine types) in ``regions``.

    Clients are injected (tests pass clients pointed at a local fake); use
    ``from_settings`` or ``open_gcp_market`` to build real ones. ``prices``:
    a price file path (``None``: the catalog's list and committed prices, no
    spot). ``skipped`` counts what was left out and why.
    """

    name = "gcp"

    def __init__(
        self,
        *,
        project: str,
        zones_client: ZonesApi,
        machine_types_client: MachineTypesApi,
        accelerator_types_client: AcceleratorTypesApi,
        regions: Sequence[str] | str = DEFAULT_REGIONS,
        instance_types: Sequence[str] | str = DEFAULT_MACHINE_TYPES,
        zones: Sequence[str] | str | None = None,
        prices: str | Path | None = None,
        clock: Clock | None = None,
        policy: CallPolicy | None = None,
        regions_client: RegionsApi | None = None,
        projects_client: ProjectsApi | None = None,
    ) -> None:
        if not PROJECT_PATTERN.match(project):
            raise InputError("--project", None, "a GCP project id (6-30 of a-z 0-9 -)", got=project)
        self.project = project
        self.regions = parse_names(regions, "--regions", REGION_PATTERN, "names like us-central1")
        self.requested_types = parse_names(
            instance_types, "--instance-types", TYPE_PATTERN, "names like a2-highgpu-1g"
        )
        self._zone_filter = (
            frozenset(parse_names(zones, "--zones", ZONE_PATTERN, "names like us-central1-a"))
            if zones
            else None
        )
        self.zones_client = zones_client
        self.machine_types_client = machine_types_client
        self.accelerator_types_client = accelerator_types_client
        self.prices_path = Path(prices) if prices is not None else None
        self._clock: Clock = clock or SystemClock()
        self._policy = policy or CallPolicy()
        self._cache = TtlCache(self._clock, source="gcp", answer_from="Compute Engine", log=log)
        # Parts old for reasons other than a kept cache entry (the price file's age).
        self._stale_parts: set[str] = set()
        self.skipped: Counter[str] = Counter()
        self.regions_client = regions_client
        self.projects_client = projects_client

    @classmethod
    def from_settings(
        cls,
        *,
        project: str | None = None,
        endpoint: str | None = None,
        credentials: Credentials | None = None,
        anonymous: bool = False,
        read_quotas: bool = False,
        **options: Unpack[GcpMarketOptions],
    ) -> GcpMarket:
        """Real REST clients (Application Default Credentials unless given);
        ``read_quotas``: as ``from_clients``'s."""
        with gcp_call("credentials"):
            clients = build_compute_clients(
                endpoint=endpoint, credentials=credentials, anonymous=anonymous
            )
            project = project or _default_project()
        if not project:
            raise InputError("--project", None, "a GCP project id (or GOOGLE_CLOUD_PROJECT)")
        return cls.from_clients(clients, project=project, read_quotas=read_quotas, **options)

    @classmethod
    def from_clients(
        cls,
        clients: ComputeClients,
        *,
        project: str,
        read_quotas: bool = False,
        **options: Unpack[GcpMarketOptions],
    ) -> GcpMarket:
        """The market on ``clients``; ``read_quotas``: the snapshot carries
        the GPU quotas (its regions and projects clients)."""
        if not (clients.zones and clients.machine_types and clients.accelerator_types):
            raise ValueError("the market needs zones, machine types and accelerator types clients")
        return cls(
            project=project,
            zones_client=clients.zones,
            machine_types_client=clients.machine_types,
            accelerator_types_client=clients.accelerator_types,
            regions_client=clients.regions if read_quotas else None,
            projects_client=clients.projects if read_quotas else None,
            **options,
        )

    # -- PriceSource -----------------------------------------------------------

    def pools(self) -> Sequence[Pool]:
        return tuple(p.pool for p in self.snapshot().pools)

    def instance_types(self) -> Sequence[InstanceType]:
        offered = self._machine_types(self._zones()).value
        accels = self._accelerators(offered)
        specs = {s.name: s for by_name in offered.values() for s in by_name.values()}
        return tuple(instance_type(specs[n], accels) for n in sorted(specs))

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
        zones = self._zones()
        offered_entry = self._machine_types(zones)
        offered = offered_entry.value
        accels = self._accelerators(offered)
        table = self._prices()
        hazard = Hazard(rate_per_hour=ASSUMED_PRIOR.rate_per_hour, source=HazardSource.ASSUMED)
        pools: list[PoolSnapshot] = []
        for zone in zones:
            if self._zone_filter is not None and zone.name not in self._zone_filter:
                continue
            for name, spec in sorted(offered.get(zone.name, {}).items()):
                price = table.price(zone.region, name, at)
                if price is None:
                    self.skipped["no price (price file or catalog)"] += 1
                    continue
                observed = min(at, offered_entry.fetched_at)
                if price.valid_from is not None and table.generated_at is not None:
                    observed = min(observed, table.generated_at)
                pools.append(
                    PoolSnapshot(
                        pool=Pool(
                            provider=Provider.GCP,
                            region=zone.region,
                            zone=zone.name,
                            instance_type=name,
                        ),
                        instance=instance_type(spec, accels),
                        on_demand_usd_per_hour=price.on_demand_usd_per_hour,
                        spot_usd_per_hour=price.spot_usd_per_hour,
                        committed_1y_usd_per_hour=price.committed_1y_usd_per_hour,
                        committed_3y_usd_per_hour=price.committed_3y_usd_per_hour,
                        placement_score=None,  # GCP publishes no placement score
                        hazard=hazard,
                        spot_available=price.spot_usd_per_hour is not None,
                        observed_at=observed,
                    )
                )
        age = table.file_age_s(at)
        if age is not None and age > MAX_FILE_AGE_S:
            self._stale_parts.add("price file")
        stale_parts = self._stale_parts | self._cache.stale_keys
        stale = bool(stale_parts)
        if stale:
            log.warning("gcp market snapshot is stale: %s", sorted(stale_parts))
        self.skipped.update(table.skipped)
        table.skipped.clear()
        quotas = self._quotas({p.pool.region for p in pools}, {p.instance.gpu_model for p in pools})
        stale = stale or bool(self._stale_parts)
        return MarketSnapshot(at=at, pools=tuple(pools), stale=stale, source="gcp", quotas=quotas)

    def _quotas(self, regions: set[str], models: set[str | None]) -> tuple[Quota, ...]:
        """The GPU quotas of ``models`` in ``regions`` (cached; none without
        a regions client, and none known when never read)."""
        client = self.regions_client
        metrics = sorted({m for g in models if (m := gcp_gpu_metric(g)) is not None})
        if client is None or not metrics or not regions:
            return ()
        key = f"quotas:{','.join(sorted(regions))}:{','.join(metrics)}"
        try:
            return self._cache.get(
                key,
                ttl.QUOTA_TTL_S,
                lambda: fetch_gpu_quotas(
                    client,
                    self.projects_client,
                    self.project,
                    sorted(regions),
                    metrics,
                    self._policy,
                ),
            ).value
        except StaleDataError as e:  # a refused insert is still handled
            log.warning("gcp quotas unknown: %s", e)
            self._stale_parts.add("quotas")
            return ()

    # -- components ------------------------------------------------------------

    def _zones(self) -> tuple[GcpZone, ...]:
        return self._cache.get(
            "zones",
            ttl.AVAILABILITY_ZONES_TTL_S,
            lambda: fetch_zones(self.zones_client, self.project, self.regions, self._policy),
        ).value

    def _machine_types(
        self, zones: Sequence[GcpZone]
    ) -> Entry[dict[str, dict[str, MachineTypeSpec]]]:
        names = [z.name for z in zones]
        return self._cache.get(
            "machine_types",
            ttl.INSTANCE_TYPE_OFFERINGS_TTL_S,
            lambda: fetch_machine_types(
                self.machine_types_client,
                self.project,
                self.requested_types,
                names,
                self._policy,
                self.skipped,
            ),
        )

    def _accelerators(
        self, offered: dict[str, dict[str, MachineTypeSpec]]
    ) -> dict[str, AcceleratorSpec]:
        names = sorted(
            {
                s.accelerator
                for by_name in offered.values()
                for s in by_name.values()
                if s.accelerator
            }
        )
        return self._cache.get(
            f"accelerators/{','.join(names)}",
            ttl.INSTANCE_TYPES_TTL_S,
            lambda: fetch_accelerators(
                self.accelerator_types_client,
                self.project,
                names,
                self._policy,
            ),
        ).value

    def _prices(self) -> PriceTable:
        path = self.prices_path
        if path is None:
            return PriceTable.empty()
        return self._cache.get(
            "prices",
            ttl.GCP_PRICE_FILE_TTL_S,
            lambda: PriceTable.load(path, regions=self.regions, machine_types=self.requested_types),
        ).value


def _default_project() -> str | None:
    """The project of the environment: ``GOOGLE_CLOUD_PROJECT``, else the one
    Application Default Credentials name (``gcloud config`` or the VM's)."""
    project = os.environ.get("GOOGLE_CLOUD_PROJECT") or os.environ.get("CLOUDSDK_CORE_PROJECT")
    if project:
        return project
    import google.auth

    _, found = google.auth.default()
    return str(found) if found else None


def open_gcp_market(
    *,
    project: str | None = None,
    regions: Sequence[str] | str | None = None,
    instance_types: Sequence[str] | str | None = None,
    zones: Sequence[str] | str | None = None,
    prices: str | Path | None = None,
    clients: ComputeClients | None = None,
    endpoint: str | None = None,
    credentials: Credentials | None = None,
    anonymous: bool = False,
    clock: Clock | None = None,
    policy: CallPolicy | None = None,
    read_quotas: bool = False,
    **_other_markets: object,
) -> GcpMarket:
    """The registry's factory: ``open_market("gcp", project=..., prices=...)``.

    ``regions`` / ``instance_types`` / ``zones``: sequences or comma-separated
    strings. With ``clients`` (tests) no client is built and ``project`` is
    required. ``read_quotas``: the snapshot carries the project's GPU quotas.
    Options meant for other markets are ignored.
    """
    options: GcpMarketOptions = {
        "regions": regions or DEFAULT_REGIONS,
        "instance_types": instance_types or DEFAULT_MACHINE_TYPES,
        "zones": zones or None,
        "prices": prices,
        "clock": clock,
        "policy": policy,
    }
    if clients is not None:
        if not project:
            raise InputError("--project", None, "a GCP project id")
        return GcpMarket.from_clients(clients, project=project, read_quotas=read_quotas, **options)
    return GcpMarket.from_settings(
        project=project,
        endpoint=endpoint,
        credentials=credentials,
        anonymous=anonymous,
        read_quotas=read_quotas,
        **options,
    )
