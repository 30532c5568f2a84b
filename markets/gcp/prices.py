"""GCP prices per (region, machine type) as of a time: a price file, else the catalog.

Owns: ``PriceTable`` (change points read from a price file in the format
``markets.files.gcp_prices.load_gcp_prices`` reads: the Cyclenerd
google-cloud-pricing-cost-calculator export),
``GcpPrice`` (on-demand, spot, 1- and 3-year committed-use prices of one
(region, type) and where they came from) and ``MAX_FILE_AGE_S``.

Why a price file and not the Cloud Billing Catalog API: the catalog prices
SKUs (a vCPU-hour, a GB-hour, a GPU-hour of a family in a region), not machine
types; turning SKUs into a machine type's hourly price needs the family's
SKU naming rules, and spot/CUD SKUs differ per family. The export already does
that join, is what the replay market reads, and adds no dependency
(google-cloud-billing). A cron job refreshing the file keeps the live market
current (re-read every ``markets.ttl.GCP_PRICE_FILE_TTL_S``).

Fallback, per (region, type): the file's row in force at ``at``; else the
embedded catalog's dated list price and committed discounts (spot unknown:
``None``); else no price (the pool is left out). A spot price above on-demand
is dropped (Spot VMs are always discounted), counted in ``skipped``.

Must not: call Google APIs or decide what a pool is.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from markets import catalog
from markets.errors import InputError
from markets.model import Provider

__all__ = ["MAX_FILE_AGE_S", "GcpPrice", "PriceTable"]

# Google may change a Spot VM price once every 30 days (Spot VMs pricing
# docs); a file whose newest row is older than that, plus a day of slack for
# the export's schedule, may be missing a change: snapshots built from it are
# marked stale.
MAX_FILE_AGE_S = 31 * 24 * 3600.0


@dataclass(frozen=True)
class GcpPrice:
    """Prices of one (region, machine type) in force at some time, in US
    dollars per instance-hour; ``None`` where not offered or not known."""

    on_demand_usd_per_hour: float
    spot_usd_per_hour: float | None
    committed_1y_usd_per_hour: float | None
    committed_3y_usd_per_hour: float | None
    valid_from: datetime | None  # None: the catalog's dated list price
    source: str  # "price file" | "catalog"


def _opt(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) or x <= 0 else float(x)


class PriceTable:
    """Price change points per (region, machine type), as of any time."""

    def __init__(
        self,
        rows: Mapping[tuple[str, str], list[tuple[datetime, GcpPrice]]],
        *,
        source: str = "price file",
        generated_at: datetime | None = None,
    ) -> None:
        self._rows = {k: sorted(v, key=lambda r: r[0]) for k, v in rows.items()}
        self._times = {k: [t for t, _ in v] for k, v in self._rows.items()}
        self.source = source
        self.generated_at = generated_at
        self.skipped: Counter[str] = Counter()

    @classmethod
    def empty(cls) -> PriceTable:
        return cls({}, source="none")

    @classmethod
    def load(
        cls, path: str | Path, *, regions: Iterable[str], machine_types: Iterable[str]
    ) -> PriceTable:
        """Read a price file, keeping the rows of ``regions`` x ``machine_types``."""
        path = Path(path)
        if not path.is_file():
            raise InputError("--prices", None, "a GCP price file (CSV or CSV.gz)", got=str(path))
        # Lazy: the loader and pandas cost ~0.5 s, paid only when a file is read.
        import pandas as pd

        from markets.files.gcp_prices import load_gcp_prices

        df = load_gcp_prices(path)
        # The export's newest row, any key: how current the whole file is.
        newest = pd.Timestamp(df["valid_from"].max()).to_pydatetime() if len(df) else None
        df = df[df["region"].isin(set(regions)) & df["machine_type"].isin(set(machine_types))]
        rows: dict[tuple[str, str], list[tuple[datetime, GcpPrice]]] = {}
        unpriced = 0
        columns = zip(
            df["region"].astype(str).tolist(),
            df["machine_type"].astype(str).tolist(),
            [pd.Timestamp(t).to_pydatetime() for t in df["valid_from"]],
            df["on_demand_usd_per_hour"].astype(float).tolist(),
            df["spot_usd_per_hour"].astype(float).tolist(),
            df["committed_1y_usd_per_hour"].astype(float).tolist(),
            df["committed_3y_usd_per_hour"].astype(float).tolist(),
            strict=True,
        )
        for region, machine_type, at, od, spot, c1y, c3y in columns:
            on_demand = _opt(od)
            if on_demand is None:
                unpriced += 1  # a row without an hourly list price prices nothing
                continue
            price = GcpPrice(
                on_demand_usd_per_hour=on_demand,
                spot_usd_per_hour=_opt(spot),
                committed_1y_usd_per_hour=_opt(c1y),
                committed_3y_usd_per_hour=_opt(c3y),
                valid_from=at,
                source=f"price file {path.name}",
            )
            rows.setdefault((region, machine_type), []).append((at, price))
        table = cls(rows, source=str(path), generated_at=newest)
        if unpriced:
            table.skipped["row without an on-demand price"] = unpriced
        return table

    def file_age_s(self, at: datetime) -> float | None:
        """Seconds from the file's newest row to ``at`` (``None``: no file)."""
        if self.generated_at is None:
            return None
        return (at - self.generated_at).total_seconds()

    def price(self, region: str, machine_type: str, at: datetime) -> GcpPrice | None:
        """The price in force at ``at`` (see the module doc for the fallback)."""
        key = (region, machine_type)
        i = bisect.bisect_right(self._times.get(key, []), at)
        found = self._rows[key][i - 1][1] if i > 0 else _catalog_price(region, machine_type)
        if found is None:
            return None
        spot = found.spot_usd_per_hour
        if spot is not None and spot > found.on_demand_usd_per_hour:
            self.skipped["spot above on-demand"] += 1
            found = GcpPrice(
                found.on_demand_usd_per_hour,
                None,
                found.committed_1y_usd_per_hour,
                found.committed_3y_usd_per_hour,
                found.valid_from,
                found.source,
            )
        return found


def _catalog_price(region: str, machine_type: str) -> GcpPrice | None:
    entry = catalog.CATALOG.get(machine_type)
    if entry is None or entry.provider is not Provider.GCP:
        return None
    try:
        od = catalog.list_price(Provider.GCP, region, machine_type)
    except InputError:
        return None  # a region the catalog does not price for this type
    return GcpPrice(
        on_demand_usd_per_hour=od,
        spot_usd_per_hour=None,
        committed_1y_usd_per_hour=catalog.committed_price(Provider.GCP, region, machine_type, 1),
        committed_3y_usd_per_hour=catalog.committed_price(Provider.GCP, region, machine_type, 3),
        valid_from=None,
        source="catalog",
    )
