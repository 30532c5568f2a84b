"""EC2 Capacity Blocks for ML: the offerings on sale, and buying one when approved.

Owns: ``CapacityBlocksApi`` (the EC2 client methods used),
``fetch_block_offerings`` (``DescribeCapacityBlockOfferings``, every page, as
``CapacityBlock`` values), ``purchase_block`` (``PurchaseCapacityBlock``,
refused unless the caller passes the operator's explicit approval),
``fetch_held_blocks`` (the account's active and scheduled Capacity Blocks and
ODCRs, ``DescribeCapacityReservations``) and ``launch_target`` (the
``RunInstances`` arguments that launch into a held one).
IAM: ``ec2:DescribeCapacityBlockOfferings``, ``ec2:DescribeCapacityReservations``;
``ec2:PurchaseCapacityBlock`` only where purchases are approved.

Must not: decide which offering to buy (``policies.blocks``), retry (botocore
does) or accept an offering AWS's rules do not allow (``markets.blocks``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from pydantic import ValidationError

from markets.aws.errors import aws_call
from markets.blocks import AWS_BLOCK_MAX_INSTANCES, BlockKind, CapacityBlock, check_aws_block_hours
from markets.errors import InputError
from markets.model import Provider
from markets.validation import input_error_from

__all__ = [
    "CapacityBlocksApi",
    "PurchaseNotApprovedError",
    "fetch_block_offerings",
    "fetch_held_blocks",
    "launch_target",
    "purchase_block",
]

_DESCRIBE = "ec2:DescribeCapacityBlockOfferings"
_PURCHASE = "ec2:PurchaseCapacityBlock"
_HELD = "ec2:DescribeCapacityReservations"
# A reservation instances can be launched into now or once it starts
# ("Capacity Reservation states", AWSEC2 UserGuide capacity-reservations-using).
_USABLE_STATES = ["active", "scheduled"]
_MAX_PAGES = 100


class CapacityBlocksApi(Protocol):
    """The EC2 client methods the adapter calls (a boto3 client fits)."""

    def describe_capacity_block_offerings(self, **kwargs: Any) -> Any: ...

    def purchase_capacity_block(self, **kwargs: Any) -> Any: ...

    def describe_capacity_reservations(self, **kwargs: Any) -> Any: ...


class PurchaseNotApprovedError(PermissionError):
    """A block purchase asked for without the operator's approval setting."""


def _offer(row: object, region: str, i: int) -> CapacityBlock:
    where = f"CapacityBlockOfferings[{i}]"
    if not isinstance(row, dict):
        raise InputError(_DESCRIBE, where, "an offering object", got=type(row).__name__)
    if row.get("CurrencyCode", "USD") != "USD":
        raise InputError(_DESCRIBE, f"{where}.CurrencyCode", "USD", got=row.get("CurrencyCode"))
    hours = row.get("CapacityBlockDurationHours")
    if not isinstance(hours, int) or not check_aws_block_hours(hours):
        raise InputError(
            _DESCRIBE,
            f"{where}.CapacityBlockDurationHours",
            "24..336 h in days, then whole weeks to 182 days",
            got=hours,
        )
    try:
        fee = float(row.get("UpfrontFee", ""))
    except (TypeError, ValueError):
        raise InputError(
            _DESCRIBE, f"{where}.UpfrontFee", "a price in dollars", got=row.get("UpfrontFee")
        ) from None
    count = row.get("InstanceCount")
    if not isinstance(count, int) or not 1 <= count <= AWS_BLOCK_MAX_INSTANCES:
        raise InputError(
            _DESCRIBE, f"{where}.InstanceCount", f"1..{AWS_BLOCK_MAX_INSTANCES}", got=count
        )
    zone = row.get("AvailabilityZone")
    try:
        return CapacityBlock(
            kind=BlockKind.AWS_CAPACITY_BLOCK,
            provider=Provider.AWS,
            block_id=row.get("CapacityBlockOfferingId"),
            instance_type=row.get("InstanceType"),
            region=region,
            zone=zone,
            count=count,
            start=row.get("StartDate"),
            end=row.get("EndDate"),
            upfront_usd=fee,
        )
    except ValidationError as e:
        raise input_error_from(_DESCRIBE, e, prefix=where) from e


def fetch_block_offerings(
    client: CapacityBlocksApi,
    region: str,
    instance_type: str,
    count: int,
    hours: int,
    earliest: datetime,
    latest_end: datetime,
) -> tuple[CapacityBlock, ...]:
    """The offerings of ``count`` x ``instance_type`` for ``hours`` starting no
    earlier than ``earliest`` and ending by ``latest_end``."""
    if not check_aws_block_hours(hours):
        raise InputError(
            "capacity block", "hours", "24..336 h in days, then whole weeks to 182 days", got=hours
        )
    args: dict[str, Any] = {
        "InstanceType": instance_type,
        "InstanceCount": count,
        "CapacityDurationHours": hours,
        "StartDateRange": earliest,
        "EndDateRange": latest_end,
    }
    out: list[CapacityBlock] = []
    for _page in range(_MAX_PAGES):
        with aws_call(_DESCRIBE):
            resp = client.describe_capacity_block_offerings(**args)
        rows = resp.get("CapacityBlockOfferings", []) if isinstance(resp, dict) else []
        out.extend(_offer(r, region, len(out) + j) for j, r in enumerate(rows))
        token = resp.get("NextToken") if isinstance(resp, dict) else None
        if not token:
            return tuple(out)
        args["NextToken"] = token
    raise InputError(_DESCRIBE, "NextToken", f"at most {_MAX_PAGES} pages")


def purchase_block(
    client: CapacityBlocksApi, offer: CapacityBlock, *, approved: bool
) -> CapacityBlock:
    """Buy ``offer``; the block then held, by its Capacity Reservation id.
    Raises ``PurchaseNotApprovedError`` (no call made) unless ``approved``."""
    if not approved:
        raise PurchaseNotApprovedError(
            f"buying capacity block {offer.block_id} needs purchase approval; recommended only"
        )
    with aws_call(_PURCHASE):
        resp = client.purchase_capacity_block(
            CapacityBlockOfferingId=offer.block_id, InstancePlatform="Linux/UNIX"
        )
    res = resp.get("CapacityReservation") if isinstance(resp, dict) else None
    rid = res.get("CapacityReservationId") if isinstance(res, dict) else None
    if not isinstance(rid, str) or not rid:
        raise InputError(
            _PURCHASE,
            "CapacityReservation.CapacityReservationId",
            "the reservation id of the block bought",
            got=rid,
        )
    return offer.model_copy(update={"block_id": rid, "held": True})


def _held(row: object, region: str, horizon_end: datetime, i: int) -> CapacityBlock | None:
    where = f"CapacityReservations[{i}]"
    if not isinstance(row, dict):
        raise InputError(_HELD, where, "a reservation object", got=type(row).__name__)
    free = row.get("AvailableInstanceCount")
    if not isinstance(free, int) or free < 0:
        raise InputError(_HELD, f"{where}.AvailableInstanceCount", "a count >= 0", got=free)
    if free == 0:
        return None  # every slot already runs an instance
    block = row.get("ReservationType") == "capacity-block"
    # An ODCR without an end date lasts until cancelled: held to the horizon.
    end = row.get("EndDate") or horizon_end
    try:
        return CapacityBlock(
            kind=BlockKind.AWS_CAPACITY_BLOCK if block else BlockKind.AWS_ODCR,
            provider=Provider.AWS,
            block_id=row.get("CapacityReservationId"),
            instance_type=row.get("InstanceType"),
            region=region,
            zone=row.get("AvailabilityZone"),
            count=free,
            start=row.get("StartDate"),
            end=end,
            held=True,
        )
    except ValidationError as e:
        raise input_error_from(_HELD, e, prefix=where) from e


def fetch_held_blocks(
    client: CapacityBlocksApi, region: str, horizon_end: datetime
) -> tuple[CapacityBlock, ...]:
    """The account's active and scheduled reservations with free slots, as held
    blocks of their free count (an open-ended ODCR runs to ``horizon_end``)."""
    args: dict[str, Any] = {"Filters": [{"Name": "state", "Values": _USABLE_STATES}]}
    out: list[CapacityBlock] = []
    seen = 0
    for _page in range(_MAX_PAGES):
        with aws_call(_HELD):
            resp = client.describe_capacity_reservations(**args)
        rows = resp.get("CapacityReservations", []) if isinstance(resp, dict) else []
        for j, r in enumerate(rows):
            b = _held(r, region, horizon_end, seen + j)
            if b is not None:
                out.append(b)
        seen += len(rows)
        token = resp.get("NextToken") if isinstance(resp, dict) else None
        if not token:
            return tuple(out)
        args["NextToken"] = token
    raise InputError(_HELD, "NextToken", f"at most {_MAX_PAGES} pages")


def launch_target(block: CapacityBlock) -> dict[str, Any]:
    """The ``RunInstances`` arguments that launch into held ``block``: target
    its reservation; a Capacity Block also needs the ``capacity-block`` market
    type ("Use your Capacity Blocks", AWSEC2 UserGuide capacity-blocks-using)."""
    if not block.held or block.provider is not Provider.AWS:
        raise ValueError(f"{block.block_id} is not an AWS reservation the account holds")
    args: dict[str, Any] = {
        "CapacityReservationSpecification": {
            "CapacityReservationTarget": {"CapacityReservationId": block.block_id}
        }
    }
    if block.kind is BlockKind.AWS_CAPACITY_BLOCK:
        args["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
    return args
