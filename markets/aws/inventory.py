"""What exists where: availability zones, instance type specs, zone offerings.

Owns: the readers of ``DescribeAvailabilityZones``, ``DescribeInstanceTypes``
(GPU information) and ``DescribeInstanceTypeOfferings``, turning responses into
``Zone`` values, ``markets.model.InstanceType`` and ``{type: zones}``.

Must not: price anything or cache (``market`` caches). Malformed rows are
skipped and counted in ``SkippedRows``; a requested instance type that no
region knows is the user's typo and raises ``InputError``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from markets import catalog
from markets.aws.errors import aws_call
from markets.aws.rows import SkippedRows, parse_positive_int
from markets.aws.sdk import Ec2Api
from markets.errors import InputError
from markets.model import InstanceType, Provider

if TYPE_CHECKING:
    from mypy_boto3_ec2.type_defs import InstanceTypeInfoTypeDef

__all__ = ["Zone", "fetch_instance_types", "fetch_offerings", "fetch_zones", "parse_instance_type"]

OP_ZONES = "ec2:DescribeAvailabilityZones"
OP_TYPES = "ec2:DescribeInstanceTypes"
OP_OFFERINGS = "ec2:DescribeInstanceTypeOfferings"
_MIB_PER_GIB = 1024.0


@dataclass(frozen=True)
class Zone:
    """An availability zone: its name (``us-east-1a``, differs per account)
    and its id (``use1-az6``, the same physical zone for every account)."""

    region: str
    name: str
    zone_id: str


def fetch_zones(client: Ec2Api, region: str, skipped: SkippedRows) -> tuple[Zone, ...]:
    """The region's available availability zones (Local and Wavelength zones
    are left out: other prices, other capacity)."""
    with aws_call(OP_ZONES):
        resp = client.describe_availability_zones(
            Filters=[{"Name": "zone-type", "Values": ["availability-zone"]}]
        )
    zones: list[Zone] = []
    for row in resp.get("AvailabilityZones", []):
        name, zone_id = row.get("ZoneName"), row.get("ZoneId")
        if not isinstance(name, str) or not isinstance(zone_id, str) or not zone_id:
            skipped.skip(OP_ZONES, "missing ZoneName or ZoneId", row)
            continue
        if row.get("RegionName", region) != region or not name.startswith(region):
            skipped.skip(OP_ZONES, f"zone not in region {region}", row)
            continue
        if row.get("ZoneType", "availability-zone") != "availability-zone":
            continue  # filtered server-side already; a fake may not filter
        if row.get("State", "available") != "available":
            continue  # impaired or unavailable: nothing to plan on there
        zones.append(Zone(region=region, name=name, zone_id=zone_id))
    return tuple(sorted(zones, key=lambda z: z.name))


def parse_instance_type(row: InstanceTypeInfoTypeDef) -> InstanceType:
    """One ``DescribeInstanceTypes`` row as an ``InstanceType``; ``ValueError``
    (or pydantic's, a subclass) names what is wrong."""
    name = row.get("InstanceType")
    if not isinstance(name, str) or "." not in name:
        raise ValueError(f"InstanceType is not a type name: {name!r}")
    vcpus = parse_positive_int(row.get("VCpuInfo", {}).get("DefaultVCpus"), "DefaultVCpus")
    mem_mib = parse_positive_int(row.get("MemoryInfo", {}).get("SizeInMiB"), "SizeInMiB")
    gpu_info = row.get("GpuInfo") or {}
    gpus_list = gpu_info.get("Gpus") or []
    gpus = sum(parse_positive_int(g.get("Count"), "Gpus[].Count") for g in gpus_list)
    gpu_model: str | None = None
    gpu_mem_gib: float | None = None
    if gpus:
        gpu_model = str(gpus_list[0].get("Name") or "") or None
        total_mib = gpu_info.get("TotalGpuMemoryInMiB")
        if total_mib is None:
            total_mib = sum(
                int(g.get("MemoryInfo", {}).get("SizeInMiB", 0)) * int(g["Count"])
                for g in gpus_list
            )
        gpu_mem_gib = total_mib / _MIB_PER_GIB if total_mib else None
        # One naming of GPU models across markets (the catalog's, e.g.
        # "A100-40GB" where AWS says "A100") so per-model throughput applies.
        if name in catalog.CATALOG:
            gpu_model = catalog.CATALOG[name].instance.gpu_model or gpu_model
    return InstanceType(
        provider=Provider.AWS,
        name=name,
        family=name.split(".")[0],
        units=gpus or vcpus,
        gpu_model=gpu_model,
        gpus=gpus,
        vcpus=vcpus,
        memory_gib=mem_mib / _MIB_PER_GIB,
        gpu_memory_gib=gpu_mem_gib,
    )


def fetch_instance_types(
    clients: Mapping[str, Ec2Api], names: Sequence[str], skipped: SkippedRows
) -> dict[str, InstanceType]:
    """Specs of ``names``, asked of every region (a type unknown in one region
    may exist in another; a filter, unlike ``InstanceTypes=``, does not fail on
    a type the region lacks)."""
    found: dict[str, InstanceType] = {}
    for region in sorted(clients):
        if all(n in found for n in names):
            break
        with aws_call(OP_TYPES):
            pages = (
                clients[region]
                .get_paginator("describe_instance_types")
                .paginate(Filters=[{"Name": "instance-type", "Values": list(names)}])
            )
            rows = [row for page in pages for row in page.get("InstanceTypes", [])]
        for row in rows:
            try:
                it = parse_instance_type(row)
            except (ValueError, TypeError, AttributeError, KeyError) as e:
                skipped.skip(OP_TYPES, f"unparseable: {e}", row)
                continue
            if it.name not in names:
                skipped.skip(OP_TYPES, "instance type not requested", row)
                continue
            found.setdefault(it.name, it)
    missing = sorted(set(names) - set(found))
    if missing:
        raise InputError(
            "--instance-types",
            None,
            f"instance types EC2 knows in {', '.join(sorted(clients))}",
            got=", ".join(missing),
        )
    return found


def fetch_offerings(
    client: Ec2Api,
    region: str,
    names: Iterable[str],
    zones: Sequence[Zone],
    skipped: SkippedRows,
) -> dict[str, tuple[str, ...]]:
    """``{instance type: zone names}`` where each type is offered in ``region``."""
    wanted = sorted(set(names))
    known = {z.name for z in zones}
    with aws_call(OP_OFFERINGS):
        pages = client.get_paginator("describe_instance_type_offerings").paginate(
            LocationType="availability-zone",
            Filters=[{"Name": "instance-type", "Values": wanted}],
        )
        rows = [row for page in pages for row in page.get("InstanceTypeOfferings", [])]
    out: dict[str, set[str]] = {}
    for row in rows:
        itype, zone = row.get("InstanceType"), row.get("Location")
        if itype not in wanted:
            skipped.skip(OP_OFFERINGS, "instance type not requested", row)
        elif zone not in known:
            skipped.skip(OP_OFFERINGS, f"unknown zone for {region}", row)
        else:
            out.setdefault(str(itype), set()).add(str(zone))
    return {t: tuple(sorted(z)) for t, z in sorted(out.items())}
