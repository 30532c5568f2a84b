"""Spot market readers: price history (as-of lookup) and placement scores.

Owns: ``fetch_spot_history`` (``ec2:DescribeSpotPriceHistory``, paginated, one
region, the requested instance types, Linux/UNIX, between two times),
``SpotHistory.price_at`` (the price in force at a time, per zone and type),
and ``fetch_placement_scores`` (``ec2:GetSpotPlacementScores`` for zones or
regions at a target capacity).

Must not: cache, or mix placement with interruption risk: a placement score
says how likely a request is to be *fulfilled*, not how long it will last
(AWS documents the two apart: Spot placement scores vs the Spot Instance
Advisor's interruption frequency).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, cast

from markets.aws.errors import aws_call
from markets.aws.rows import SkippedRows, parse_timestamp, parse_usd
from markets.aws.sdk import Ec2Api

if TYPE_CHECKING:
    from mypy_boto3_ec2.literals import InstanceTypeType

__all__ = [
    "SpotHistory",
    "SpotPricePoint",
    "fetch_placement_scores",
    "fetch_spot_history",
]

OP_HISTORY = "ec2:DescribeSpotPriceHistory"
OP_SCORES = "ec2:GetSpotPlacementScores"

# AWS answers "Linux/UNIX" and, for accounts that predate VPC-by-default,
# "Linux/UNIX (Amazon VPC)"; both are the price of the same Linux instance.
_LINUX = "Linux/UNIX"
# Clock skew we tolerate between AWS's timestamps and ours.
_SKEW = timedelta(minutes=5)


@dataclass(frozen=True, order=True)
class SpotPricePoint:
    """A spot price change: ``usd_per_hour`` holds from ``at`` until the next."""

    at: datetime
    zone: str
    instance_type: str
    usd_per_hour: float


@dataclass(frozen=True)
class SpotHistory:
    """Price changes per (zone, instance type), sorted by time, for
    ``[start, end]``. AWS also returns the last change before ``start``, so
    the price in force at ``start`` is known."""

    start: datetime
    end: datetime
    points: Mapping[tuple[str, str], tuple[SpotPricePoint, ...]] = field(default_factory=dict)

    @classmethod
    def build(cls, start: datetime, end: datetime, points: Iterable[SpotPricePoint]) -> SpotHistory:
        by_key: dict[tuple[str, str], dict[datetime, SpotPricePoint]] = {}
        for p in points:
            slot = by_key.setdefault((p.zone, p.instance_type), {})
            # Two rows at one instant (both Linux descriptions): keep the higher
            # price, the safe reading for a cost.
            if p.at not in slot or p.usd_per_hour > slot[p.at].usd_per_hour:
                slot[p.at] = p
        ordered = {k: tuple(v[t] for t in sorted(v)) for k, v in sorted(by_key.items())}
        return cls(start=start, end=end, points=ordered)

    def price_at(self, zone: str, instance_type: str, at: datetime) -> SpotPricePoint | None:
        """The change in force at ``at`` (the last one at or before it)."""
        pts = self.points.get((zone, instance_type), ())
        i = bisect.bisect_right([p.at for p in pts], at)
        return pts[i - 1] if i else None

    def __len__(self) -> int:
        return sum(len(v) for v in self.points.values())


def fetch_spot_history(
    client: Ec2Api,
    region: str,
    instance_types: Sequence[str],
    zones: Iterable[str],
    start: datetime,
    end: datetime,
    skipped: SkippedRows,
) -> list[SpotPricePoint]:
    """Linux/UNIX spot price changes of ``instance_types`` in ``region``'s
    ``zones`` between ``start`` and ``end``, every page."""
    known_zones = set(zones)
    wanted = set(instance_types)
    with aws_call(OP_HISTORY):
        pages = client.get_paginator("describe_spot_price_history").paginate(
            # boto3-stubs list today's type names as a Literal; ours come from
            # the user and EC2 itself rejects an unknown one.
            InstanceTypes=cast("list[InstanceTypeType]", sorted(wanted)),
            ProductDescriptions=[_LINUX],
            StartTime=start,
            EndTime=end,
        )
        rows = [r for page in pages for r in page.get("SpotPriceHistory", [])]
    out: list[SpotPricePoint] = []
    for row in rows:
        try:
            desc = str(row.get("ProductDescription", ""))
            if not desc.startswith(_LINUX):
                raise ValueError(f"product {desc!r} is not {_LINUX}")
            if row.get("InstanceType") not in wanted:
                raise ValueError("instance type not requested")
            if row.get("AvailabilityZone") not in known_zones:
                raise ValueError(f"unknown zone for {region}")
            at = parse_timestamp(row.get("Timestamp"))
            if at > end + _SKEW:
                raise ValueError("timestamp after the requested end")
            usd = parse_usd(row.get("SpotPrice"))
        except (ValueError, TypeError, AttributeError) as e:
            skipped.skip(OP_HISTORY, str(e), row)
            continue
        out.append(
            SpotPricePoint(
                at=at,
                zone=str(row["AvailabilityZone"]),
                instance_type=str(row["InstanceType"]),
                usd_per_hour=usd,
            )
        )
    return out


def fetch_placement_scores(
    client: Ec2Api,
    regions: Sequence[str],
    instance_types: Sequence[str],
    *,
    target_capacity: int,
    single_zone: bool,
    zone_names_by_id: Mapping[str, str],
    skipped: SkippedRows,
) -> dict[str, int]:
    """Placement scores (1-10) by zone name (``single_zone``) or region name.

    One request for *all* the instance types: the score is for a fleet free to
    use any of them, which is how AWS means it; asking per type gets "always
    low" scores below three types (EC2 API reference, GetSpotPlacementScores
    ``InstanceTypes``). Zones come back as ids (``use1-az6``) and are mapped to
    this account's zone names. AWS returns only the top 10 places: the rest get
    no score (``None``), not a low one.
    """
    with aws_call(OP_SCORES):
        pages = client.get_paginator("get_spot_placement_scores").paginate(
            InstanceTypes=sorted(set(instance_types)),
            TargetCapacity=target_capacity,
            TargetCapacityUnitType="units",
            SingleAvailabilityZone=single_zone,
            RegionNames=sorted(set(regions)),
        )
        rows = [r for page in pages for r in page.get("SpotPlacementScores", [])]
    out: dict[str, int] = {}
    for row in rows:
        score, region = row.get("Score"), row.get("Region")
        if isinstance(score, bool) or not isinstance(score, int) or not 1 <= score <= 10:
            skipped.skip(OP_SCORES, "score not an integer 1-10", row)
        elif region not in regions:
            skipped.skip(OP_SCORES, "region not requested", row)
        elif not single_zone:
            out[str(region)] = score
        elif row.get("AvailabilityZoneId") not in zone_names_by_id:
            skipped.skip(OP_SCORES, "unknown zone id", row)
        else:
            out[zone_names_by_id[str(row["AvailabilityZoneId"])]] = score
    return out
