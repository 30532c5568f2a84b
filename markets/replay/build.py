"""Join the recorded datasets into replay pools (the rules are in ``markets.replay``).

Owns: ``PoolData`` (one pool's instance type, its time series per tier, its
traces and its static facts, each with a provenance label), ``build_pools``
(``DataInventory`` -> pools + what was left out and why) and the helpers that
type and place GCP machine types.

Must not: answer "what is in force at t" (``markets.replay.market`` does) or
read files (``markets.files.datadir`` did).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from markets import catalog
from markets.errors import InputError
from markets.files.datadir import DataInventory
from markets.files.traces import SpotTrace
from markets.model import InstanceType, Pool, Provider
from markets.replay.series import (
    NEVER,
    NS,
    FloatArray,
    IntArray,
    PricePart,
    StepSeries,
    TraceSeries,
)

__all__ = ["LEFT_OUT_REASONS", "PoolData", "build_pools", "gcp_gpu_model"]

# Why a pool candidate is not exposed (keys of ``ReplayMarket.left_out``).
NOT_IN_CATALOG = "aws type not in the catalog (no list price or GPU facts in the data)"
NO_ZONES = "gcp machine type whose zones in the region are unknown (catalog, traces)"
UNTYPED = "gcp machine type without attributes (vCPUs) or shared-core"
NO_ON_DEMAND = "no on-demand price (catalog or price list)"
NOT_GPU = "no GPU (gpu_only)"
LEFT_OUT_REASONS = (NOT_IN_CATALOG, NO_ZONES, UNTYPED, NO_ON_DEMAND, NOT_GPU)

# machine_type_attributes.csv GPU columns -> the catalog's GPU model names
# (markets.catalog.GPU_THROUGHPUT_VS_V100 keys); others are upper-cased.
_GCP_GPU_MODELS = {
    "a100": "A100-40GB",
    "a100-80gb": "A100-80GB",
    "h100-80gb": "H100",
    "h100-80gb-mega": "H100",
    "l4": "L4",
}


def gcp_gpu_model(column: str) -> str:
    return _GCP_GPU_MODELS.get(column, column.upper())


@dataclass(frozen=True, eq=False)
class PoolData:
    """Everything the replay market knows of one pool.

    Series are absolute in time; ``offset_ns`` records how far an aligned view
    shifted them (0 in the absolute market). ``origins`` names the inputs that
    created the pool (``trace``, ``aws-history``, ``gcp-list``)."""

    pool: Pool
    instance: InstanceType
    origins: tuple[str, ...]
    spot: StepSeries
    on_demand: StepSeries
    committed_1y: StepSeries
    committed_3y: StepSeries
    traces: tuple[TraceSeries, ...]
    catalog_on_demand: float | None
    catalog_committed: tuple[float | None, float | None]
    catalog_label: str
    advisor_bucket: int | None
    advisor_savings: float | None
    advisor_label: str
    offset_ns: int = 0

    @property
    def key(self) -> str:
        return self.pool.key

    def shifted(self, offset_ns: int, traces: tuple[TraceSeries, ...]) -> PoolData:
        """The same pool with every series moved by ``offset_ns``, keeping only
        ``traces`` (already of this pool)."""
        return replace(
            self,
            spot=self.spot.shifted(offset_ns),
            on_demand=self.on_demand.shifted(offset_ns),
            committed_1y=self.committed_1y.shifted(offset_ns),
            committed_3y=self.committed_3y.shifted(offset_ns),
            traces=tuple(t.shifted(offset_ns) for t in traces),
            offset_ns=self.offset_ns + offset_ns,
        )


def _ns(values: pd.Series[pd.Timestamp]) -> IntArray:
    return np.asarray(values.dt.as_unit("ns").astype("int64"), dtype=np.int64)


def _groups(df: pd.DataFrame, cols: list[str]) -> dict[tuple[str, ...], IntArray]:
    """Row positions per distinct key (sorted), keys as tuples of str."""
    if not len(df):
        return {}
    found = df.groupby(cols, sort=True).indices
    return {
        tuple(str(x) for x in k) if isinstance(k, tuple) else (str(k),): np.asarray(
            v, dtype=np.int64
        )
        for k, v in found.items()
    }


def _trace_series(tr: SpotTrace, root: Path) -> TraceSeries:
    path = Path(tr.path)
    try:
        trace_id = path.relative_to(root).as_posix()
    except ValueError:
        trace_id = path.name
    return TraceSeries(
        trace_id=trace_id.removesuffix(".json"),
        key=tr.pool_key,
        kind=tr.kind,
        nodes=tr.nodes,
        start_ns=int(pd.Timestamp(tr.start).value),
        gap_ns=round(tr.gap_seconds * NS),
        available=tr.frame["available"].to_numpy(dtype=np.int64),
    )


def _trace_prices(tr: SpotTrace) -> PricePart | None:
    """Per-tick prices as change points (a tick whose price equals the last
    one adds nothing); they hold until the trace ends."""
    if not tr.has_prices:
        return None
    price = tr.frame["price"].to_numpy(dtype=np.float64)
    t = _ns(tr.frame["t"])
    keep = np.isfinite(price)
    price, t = price[keep], t[keep]
    if not len(price):
        return None
    change = np.r_[True, price[1:] != price[:-1]]
    end = int(pd.Timestamp(tr.end).value)
    return ("trace-prices", t[change], price[change], end)


def _catalog_zones() -> dict[str, tuple[tuple[str, str], ...]]:
    """GCP type name and price family (``a2-ultragpu``) -> catalog (region, zone)s."""
    out: dict[str, tuple[tuple[str, str], ...]] = {}
    for name, entry in catalog.CATALOG.items():
        if entry.provider is Provider.GCP:
            out[name] = entry.zones
            out.setdefault(entry.discount_family, entry.zones)
    return out


def _gcp_zones(
    region: str,
    machine_type: str,
    trace_zones: set[str],
    known: dict[str, tuple[tuple[str, str], ...]],
) -> list[str]:
    """Zones of a GCP (region, type): the catalog's for the type, else for its
    price family, else those its traces were recorded in."""
    zones = known.get(machine_type) or known.get("-".join(machine_type.split("-")[:2]))
    if zones is not None:
        return [z for r, z in zones if r == region]
    return sorted(z for z in trace_zones if z.startswith(f"{region}-"))


@dataclass(frozen=True)
class _MachineAttrs:
    """One row of the GCP machine-type list (``load_gcp_machine_types``)."""

    family: str
    vcpus: float
    memory_gib: float
    gpu_model: str | None
    gpus: int


def _machine_attrs(df: pd.DataFrame) -> dict[str, _MachineAttrs]:
    rows = zip(
        df["machine_type"].tolist(),
        df["family"].tolist(),
        df["vcpus"].tolist(),
        df["memory_gib"].tolist(),
        df["gpu_model"].tolist(),
        df["gpus"].tolist(),
        strict=True,
    )
    return {
        str(name): _MachineAttrs(
            family=str(family),
            vcpus=float(vcpus),
            memory_gib=float(memory),
            gpu_model=model if isinstance(model, str) else None,  # NaN without GPUs
            gpus=int(gpus),
        )
        for name, family, vcpus, memory, model, gpus in rows
    }


def _gcp_instance(machine_type: str, attrs: _MachineAttrs | None) -> InstanceType | None:
    if attrs is None or not attrs.vcpus >= 1 or attrs.vcpus != round(attrs.vcpus):
        return None  # unknown, or shared-core (e2-micro: 0.25 vCPU) - not fleet capacity
    vcpus = round(attrs.vcpus)
    return InstanceType(
        provider=Provider.GCP,
        name=machine_type,
        family=attrs.family,
        units=attrs.gpus if attrs.gpus > 0 else vcpus,
        gpu_model=gcp_gpu_model(attrs.gpu_model)
        if attrs.gpus > 0 and attrs.gpu_model is not None
        else None,
        gpus=attrs.gpus,
        vcpus=vcpus,
        memory_gib=attrs.memory_gib,
    )


def _catalog_prices(
    provider: Provider, region: str, name: str
) -> tuple[float | None, tuple[float | None, float | None], str]:
    """Catalog on-demand and committed prices in ``region``; the reference
    region's where the catalog does not price that region."""
    entry = catalog.CATALOG.get(name)
    if entry is None or entry.provider is not provider:
        return None, (None, None), ""
    try:
        od = catalog.list_price(provider, region, name)
        label = "catalog"
    except InputError:
        od = entry.list_usd_per_hour
        label = f"catalog ({catalog.REFERENCE_REGION[provider]} price: region not in the catalog)"
    d1, d3 = entry.committed_discount_1y, entry.committed_discount_3y
    return od, (None if d1 is None else od * (1 - d1), None if d3 is None else od * (1 - d3)), label


def build_pools(
    inv: DataInventory, *, gpu_only: bool = False
) -> tuple[list[PoolData], dict[str, list[str]]]:
    """Pools joined across the inventory's datasets, sorted by key, and the
    candidates left out per reason (sorted, unique)."""
    left: dict[str, set[str]] = defaultdict(set)
    root = Path(inv.root)
    traces: dict[str, list[SpotTrace]] = defaultdict(list)
    for tr in inv.spot_traces:
        traces[tr.pool_key].append(tr)
    origins: dict[str, set[str]] = defaultdict(set)
    for key in traces:
        origins[key].add("trace")

    aws = inv.aws_spot_prices
    aws_groups = _groups(aws, ["region", "zone", "instance_type"])
    aws_end = int(aws["timestamp"].max().value) if len(aws) else NEVER
    aws_t = _ns(aws["timestamp"]) if len(aws) else np.zeros(0, dtype=np.int64)
    aws_usd = aws["spot_usd_per_hour"].to_numpy(dtype=np.float64)
    for region, zone, itype in aws_groups:
        if itype not in catalog.CATALOG:
            left[NOT_IN_CATALOG].add(str(itype))
            continue
        origins[f"aws/{region}/{zone}/{itype}"].add("aws-history")

    gcp = inv.gcp_prices
    gcp_groups = _groups(gcp, ["region", "machine_type"])
    gcp_t = _ns(gcp["valid_from"]) if len(gcp) else np.zeros(0, dtype=np.int64)
    gcp_cols: dict[str, FloatArray] = {
        col: gcp[col].to_numpy(dtype=np.float64)
        for col in (
            "on_demand_usd_per_hour",
            "spot_usd_per_hour",
            "committed_1y_usd_per_hour",
            "committed_3y_usd_per_hour",
        )
    }
    trace_zones: dict[str, set[str]] = defaultdict(set)
    for tr in inv.spot_traces:
        if tr.provider == "gcp":
            trace_zones[tr.instance_type].add(tr.zone)
    known = _catalog_zones()
    for region, mtype in gcp_groups:
        zones = _gcp_zones(region, mtype, trace_zones[mtype], known)
        if not zones:
            left[NO_ZONES].add(f"{region}/{mtype}")
        for zone in zones:
            origins[f"gcp/{region}/{zone}/{mtype}"].add("gcp-list")

    attrs = _machine_attrs(inv.gcp_machine_types)
    advisor = _advisor(inv)
    pools: list[PoolData] = []
    for key in sorted(origins):
        pool = Pool.from_key(key)
        provider, region, name = pool.provider, pool.region, pool.instance_type
        if name in catalog.CATALOG and catalog.CATALOG[name].provider is provider:
            inst: InstanceType | None = catalog.instance_type(name)
        elif provider is Provider.AWS:
            left[NOT_IN_CATALOG].add(name)
            continue
        else:
            inst = _gcp_instance(name, attrs.get(name))
            if inst is None:
                left[UNTYPED].add(name)
                continue
        assert inst is not None
        od_cat, committed_cat, cat_label = _catalog_prices(provider, region, name)
        spot_parts: list[PricePart] = []
        idx = aws_groups.get((region, pool.zone, name)) if provider is Provider.AWS else None
        if idx is not None:
            spot_parts.append(("aws-history", aws_t[idx], aws_usd[idx], aws_end))
        for tr in traces.get(key, []):
            part = _trace_prices(tr)
            if part:
                spot_parts.append(part)
        series: dict[str, StepSeries] = {}
        gidx = gcp_groups.get((region, name)) if provider is Provider.GCP else None
        if gidx is not None:
            t = gcp_t[gidx]
            spot_parts.append(("gcp-list", t, gcp_cols["spot_usd_per_hour"][gidx], NEVER))
            od = gcp_cols["on_demand_usd_per_hour"][gidx]
            ok = np.isfinite(od) & (od > 0)  # 0 / missing: not a price, the last one holds
            series["od"] = StepSeries.merge([("gcp-list", t[ok], od[ok], NEVER)])
            for col, name_ in (
                ("committed_1y_usd_per_hour", "c1"),
                ("committed_3y_usd_per_hour", "c3"),
            ):
                series[name_] = StepSeries.merge([("gcp-list", t, gcp_cols[col][gidx], NEVER)])
        if od_cat is None and not len(series.get("od", StepSeries.empty())):
            left[NO_ON_DEMAND].add(key)
            continue
        if gpu_only and inst.gpus == 0:
            left[NOT_GPU].add(key)
            continue
        bucket, savings, adv_label = advisor(provider, region, name)
        pools.append(
            PoolData(
                pool=pool,
                instance=inst,
                origins=tuple(sorted(origins[key])),
                spot=StepSeries.merge(spot_parts),
                on_demand=series.get("od", StepSeries.empty()),
                committed_1y=series.get("c1", StepSeries.empty()),
                committed_3y=series.get("c3", StepSeries.empty()),
                traces=tuple(_trace_series(tr, root) for tr in traces.get(key, [])),
                catalog_on_demand=od_cat,
                catalog_committed=committed_cat,
                catalog_label=cat_label,
                advisor_bucket=bucket,
                advisor_savings=savings,
                advisor_label=adv_label,
            )
        )
    return pools, {k: sorted(v) for k, v in sorted(left.items())}


# (provider, region, type) -> (advisor bucket, savings fraction, label)
AdvisorLookup = Callable[[Provider, str, str], tuple[int | None, float | None, str]]


def _advisor(inv: DataInventory) -> AdvisorLookup:
    """(provider, region, type) -> (bucket, savings fraction, label): the
    advisor's Linux row for the region; savings fall back to the median over
    the regions listing the type (the bucket does not: it is regional)."""
    frame = inv.advisor.frame if inv.advisor is not None else None
    by_key: dict[tuple[str, str], tuple[int, float]] = {}
    by_type: dict[str, list[float]] = defaultdict(list)
    if frame is not None:
        linux = frame[frame["os"] == "Linux"]
        for region, itype, bucket, savings in zip(
            linux["region"].tolist(),
            linux["instance_type"].tolist(),
            linux["bucket"].tolist(),
            linux["savings_fraction"].tolist(),
            strict=True,
        ):
            by_key[(region, itype)] = (int(bucket), float(savings))
            by_type[itype].append(float(savings))

    def lookup(provider: Provider, region: str, name: str) -> tuple[int | None, float | None, str]:
        if provider is not Provider.AWS:
            return None, None, ""
        hit = by_key.get((region, name))
        if hit is not None:
            return hit[0], hit[1], "advisor"
        if by_type.get(name):
            return None, statistics.median(by_type[name]), "advisor (median of regions)"
        return None, None, ""

    return lookup
