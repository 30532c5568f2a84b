"""List prices: on-demand (Price List Query API) and reserved 1y/3y (EC2).

Owns: ``fetch_on_demand`` (``pricing:GetProducts``, parsing the PriceList JSON
strings: the OnDemand term's hourly ``pricePerUnit.USD``) and
``fetch_reserved`` (``ec2:DescribeReservedInstancesOfferings``: effective hourly
price of a term = upfront fixed price amortised over the term's hours + usage
price + hourly recurring charges; the cheapest offering per term wins).

``catalog_on_demand`` gives the embedded catalog's dated list prices, the
fallback where the Pricing API has no answer.

Must not: cache, or invent prices. Products and offerings that do not parse,
are not in USD, or do not match the request are skipped and counted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from markets import catalog
from markets.aws.errors import aws_call
from markets.aws.rows import SkippedRows, parse_usd
from markets.aws.sdk import Ec2Api, PricingApi
from markets.errors import InputError
from markets.model import Provider

if TYPE_CHECKING:
    from mypy_boto3_ec2.type_defs import ReservedInstancesOfferingTypeDef
    from mypy_boto3_pricing.type_defs import FilterTypeDef

__all__ = [
    "SECONDS_PER_TERM",
    "catalog_on_demand",
    "fetch_on_demand",
    "fetch_reserved",
    "on_demand_filters",
    "parse_on_demand_product",
    "reserved_effective_usd_per_hour",
]

OP_PRODUCTS = "pricing:GetProducts"
OP_RESERVED = "ec2:DescribeReservedInstancesOfferings"

# Reserved terms as DescribeReservedInstancesOfferings states Duration (seconds):
# 1 year = 365 days, 3 years = 1095 days.
SECONDS_PER_TERM: Mapping[int, int] = {1: 31_536_000, 3: 94_608_000}


def on_demand_filters(region: str, instance_type: str) -> list[FilterTypeDef]:
    """Filters selecting the one Linux, shared-tenancy, no-licence product of
    ``instance_type`` in ``region`` (without ``capacitystatus=Used`` the answer
    also holds capacity-reservation SKUs priced at zero or at a premium)."""
    terms = {
        "instanceType": instance_type,
        "regionCode": region,
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
        "licenseModel": "No License required",
    }
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in terms.items()]


def _object(parent: Mapping[str, object], key: str) -> Mapping[str, object]:
    """``parent[key]`` as a JSON object: absent or empty is ``{}``."""
    value = parent.get(key)
    if not value:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"{key} is not an object: {value!r}")
    return value


def parse_on_demand_product(doc: Mapping[str, object], *, region: str, instance_type: str) -> float:
    """USD per hour of one PriceList product document; ``ValueError`` (or
    ``TypeError`` for a document of the wrong shape) says why not."""
    attrs = _object(_object(doc, "product"), "attributes")
    if attrs.get("instanceType") != instance_type:
        raise ValueError(f"product is for {attrs.get('instanceType')!r}")
    if attrs.get("regionCode", region) != region:
        raise ValueError(f"product is for region {attrs.get('regionCode')!r}")
    prices: list[float] = []
    for term in _object(_object(doc, "terms"), "OnDemand").values():
        if not isinstance(term, Mapping):
            raise TypeError(f"OnDemand term is not an object: {term!r}")
        for dim in _object(term, "priceDimensions").values():
            if not isinstance(dim, Mapping):
                raise TypeError(f"price dimension is not an object: {dim!r}")
            if dim.get("unit") not in ("Hrs", "Hours"):
                continue
            usd = _object(dim, "pricePerUnit").get("USD")
            if usd is None:
                raise ValueError("OnDemand price dimension has no USD price")
            prices.append(parse_usd(usd))
    if not prices:
        raise ValueError("no hourly OnDemand price dimension")
    price = max(prices)  # one dimension in practice; never understate a cost
    if price <= 0:
        raise ValueError("on-demand price is zero")
    return price


def fetch_on_demand(
    client: PricingApi,
    regions: Sequence[str],
    instance_types: Sequence[str],
    skipped: SkippedRows,
) -> dict[tuple[str, str], float]:
    """``{(region, instance type): on-demand USD per hour}``; pairs without a
    valid product are absent (and counted)."""
    out: dict[tuple[str, str], float] = {}
    for region in sorted(regions):
        for itype in sorted(instance_types):
            found: list[float] = []
            with aws_call(OP_PRODUCTS):
                pages = client.get_paginator("get_products").paginate(
                    ServiceCode="AmazonEC2",
                    FormatVersion="aws_v1",
                    Filters=on_demand_filters(region, itype),
                )
                docs = [d for page in pages for d in page.get("PriceList", [])]
            for raw in docs:
                try:
                    doc: object = json.loads(raw) if isinstance(raw, str) else raw
                    if not isinstance(doc, Mapping):
                        raise TypeError(f"product is not a JSON object: {type(doc).__name__}")
                    found.append(parse_on_demand_product(doc, region=region, instance_type=itype))
                except (ValueError, TypeError, AttributeError) as e:
                    skipped.skip(OP_PRODUCTS, f"{region}/{itype}: {e}", raw)
            if found:
                # Several matching products would mean the filters are too loose;
                # the highest price is the safe reading for a cost estimate.
                out[(region, itype)] = max(found)
            else:
                skipped.skip(OP_PRODUCTS, f"{region}/{itype}: no on-demand product", None)
    return out


def reserved_effective_usd_per_hour(
    offering: ReservedInstancesOfferingTypeDef,
) -> tuple[int, float]:
    """``(term years, effective USD per hour)`` of one reserved offering."""
    if offering.get("CurrencyCode", "USD") != "USD":
        raise ValueError(f"currency {offering.get('CurrencyCode')!r}, not USD")
    duration = offering.get("Duration")
    years = next((y for y, s in SECONDS_PER_TERM.items() if s == duration), None)
    if years is None:
        raise ValueError(f"Duration {duration!r} s is neither a 1- nor a 3-year term")
    fixed = parse_usd(offering.get("FixedPrice", 0))
    usage = parse_usd(offering.get("UsagePrice", 0))
    recurring = sum(
        parse_usd(c.get("Amount", 0))
        for c in offering.get("RecurringCharges") or []
        if c.get("Frequency") == "Hourly"
    )
    hours = SECONDS_PER_TERM[years] / 3600.0
    effective = fixed / hours + usage + recurring
    if effective <= 0:
        raise ValueError("effective price is zero")
    return years, effective


def fetch_reserved(
    client: Ec2Api,
    region: str,
    instance_types: Sequence[str],
    skipped: SkippedRows,
) -> dict[tuple[str, int], float]:
    """``{(instance type, term years): cheapest effective USD per hour}`` of
    standard, default-tenancy, Linux reserved offerings from AWS (not the
    Marketplace: resold terms have odd durations and come and go)."""
    out: dict[tuple[str, int], float] = {}
    for itype in sorted(instance_types):
        with aws_call(OP_RESERVED):
            pages = client.get_paginator("describe_reserved_instances_offerings").paginate(
                Filters=[
                    {"Name": "instance-type", "Values": [itype]},
                    {"Name": "product-description", "Values": ["Linux/UNIX"]},
                ],
                InstanceTenancy="default",
                OfferingClass="standard",
                IncludeMarketplace=False,
            )
            rows = [r for page in pages for r in page.get("ReservedInstancesOfferings", [])]
        for row in rows:
            if row.get("InstanceType") != itype:
                skipped.skip(OP_RESERVED, f"offering is not for {itype}", row)
                continue
            try:
                years, usd = reserved_effective_usd_per_hour(row)
            except (ValueError, TypeError, AttributeError) as e:
                skipped.skip(OP_RESERVED, str(e), row)
                continue
            key = (itype, years)
            out[key] = min(usd, out.get(key, usd))
    return out


def catalog_on_demand(
    regions: Iterable[str], instance_types: Iterable[str]
) -> list[tuple[tuple[str, str], float]]:
    """``[((region, type), USD per hour)]`` from ``markets.catalog`` for the
    pairs it prices (dated list prices: a fallback, not today's price)."""
    out: list[tuple[tuple[str, str], float]] = []
    for region in regions:
        for itype in instance_types:
            if itype not in catalog.CATALOG:
                continue
            try:
                out.append(((region, itype), catalog.list_price(Provider.AWS, region, itype)))
            except InputError:
                continue  # the catalog does not price this type in this region
    return out
