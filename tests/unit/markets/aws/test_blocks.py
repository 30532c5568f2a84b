"""EC2 Capacity Block offerings and purchase (botocore Stubber: moto has no
Capacity Blocks): every page read, AWS's duration rule kept, a bad row named,
no purchase without approval."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from markets.aws.blocks import (
    PurchaseNotApprovedError,
    fetch_block_offerings,
    fetch_held_blocks,
    launch_target,
    purchase_block,
)
from markets.blocks import BlockKind, check_aws_block_hours
from markets.errors import InputError
from tests.unit.markets.aws.test_market import CREDS, REGION

START = datetime(2026, 12, 8, 11, 30, tzinfo=UTC)
LATEST = START + timedelta(days=10)


def _ec2() -> Any:
    return boto3.client("ec2", region_name=REGION, **CREDS)


def _row(oid: str, days: int = 9, fee: str = "13592.448", **over: Any) -> dict[str, Any]:
    row = {
        "CapacityBlockOfferingId": oid,
        "InstanceType": "p5.48xlarge",
        "AvailabilityZone": f"{REGION}a",
        "InstanceCount": 2,
        "StartDate": START,
        "EndDate": START + timedelta(days=days),
        "CapacityBlockDurationHours": days * 24,
        "UpfrontFee": fee,
        "CurrencyCode": "USD",
        "Tenancy": "default",
    }
    row.update(over)
    return row


def _params(token: str | None = None) -> dict[str, Any]:
    p: dict[str, Any] = {
        "InstanceType": "p5.48xlarge",
        "InstanceCount": 2,
        "CapacityDurationHours": 216,
        "StartDateRange": START,
        "EndDateRange": LATEST,
    }
    if token:
        p["NextToken"] = token
    return p


def test_offerings_of_every_page() -> None:
    ec2 = _ec2()
    with Stubber(ec2) as stub:
        stub.add_response(
            "describe_capacity_block_offerings",
            {"CapacityBlockOfferings": [_row("cb-1")], "NextToken": "t2"},
            _params(),
        )
        stub.add_response(
            "describe_capacity_block_offerings",
            {"CapacityBlockOfferings": [_row("cb-2", fee="14000.00")]},
            _params("t2"),
        )
        got = fetch_block_offerings(ec2, REGION, "p5.48xlarge", 2, 216, START, LATEST)
        stub.assert_no_pending_responses()
    assert [(b.block_id, b.upfront_usd, b.count, b.hours) for b in got] == [
        ("cb-1", 13592.448, 2, 216.0),
        ("cb-2", 14000.0, 2, 216.0),
    ]
    assert all(b.kind is BlockKind.AWS_CAPACITY_BLOCK and not b.held for b in got)
    assert got[0].zone == f"{REGION}a" and got[0].cost_usd == 13592.448


@pytest.mark.parametrize(
    "over,field",
    [
        ({"UpfrontFee": "lots"}, "CapacityBlockOfferings[0].UpfrontFee"),
        ({"CurrencyCode": "EUR"}, "CapacityBlockOfferings[0].CurrencyCode"),
        (
            {"CapacityBlockDurationHours": 15 * 24},
            "CapacityBlockOfferings[0].CapacityBlockDurationHours",
        ),
        ({"InstanceCount": 65}, "CapacityBlockOfferings[0].InstanceCount"),
    ],
)
def test_a_bad_offering_is_named(over: dict[str, Any], field: str) -> None:
    ec2 = _ec2()
    with Stubber(ec2) as stub:
        stub.add_response(
            "describe_capacity_block_offerings",
            {"CapacityBlockOfferings": [_row("cb-1", **over)]},
            _params(),
        )
        with pytest.raises(InputError) as e:
            fetch_block_offerings(ec2, REGION, "p5.48xlarge", 2, 216, START, LATEST)
    assert field in str(e.value) and "ec2:DescribeCapacityBlockOfferings" in str(e.value)


def test_durations_aws_sells() -> None:
    assert [h for h in range(0, 24 * 30, 24) if check_aws_block_hours(h)] == [
        24 * d for d in (*range(1, 15), 21, 28)
    ]
    assert check_aws_block_hours(182 * 24) and not check_aws_block_hours(189 * 24)
    assert not check_aws_block_hours(36)
    with pytest.raises(InputError, match="hours"):
        fetch_block_offerings(_ec2(), REGION, "p5.48xlarge", 2, 15 * 24, START, LATEST)


def test_purchase_needs_approval_then_holds_the_block() -> None:
    ec2 = _ec2()
    with Stubber(ec2) as stub:
        stub.add_response(
            "describe_capacity_block_offerings",
            {"CapacityBlockOfferings": [_row("cb-1")]},
            _params(),
        )
        (offer,) = fetch_block_offerings(ec2, REGION, "p5.48xlarge", 2, 216, START, LATEST)
        with pytest.raises(PurchaseNotApprovedError, match="recommended only"):
            purchase_block(ec2, offer, approved=False)  # no call queued: Stubber would refuse
        stub.add_response(
            "purchase_capacity_block",
            {"CapacityReservation": {"CapacityReservationId": "cr-0123"}},
            {"CapacityBlockOfferingId": "cb-1", "InstancePlatform": "Linux/UNIX"},
        )
        held = purchase_block(ec2, offer, approved=True)
        stub.assert_no_pending_responses()
    assert held.block_id == "cr-0123" and held.held and held.cost_usd == 0.0


def _reservation(rid: str, rtype: str, free: int, end: datetime | None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "CapacityReservationId": rid,
        "InstanceType": "p5.48xlarge",
        "AvailabilityZone": f"{REGION}b",
        "TotalInstanceCount": 4,
        "AvailableInstanceCount": free,
        "State": "active",
        "StartDate": START,
        "ReservationType": rtype,
        "EndDateType": "limited" if end else "unlimited",
    }
    if end:
        row["EndDate"] = end
    return row


def test_held_reservations_with_free_slots_and_their_launch_target() -> None:
    ec2 = _ec2()
    horizon = START + timedelta(days=30)
    want = {"Filters": [{"Name": "state", "Values": ["active", "scheduled"]}]}
    with Stubber(ec2) as stub:
        stub.add_response(
            "describe_capacity_reservations",
            {
                "CapacityReservations": [
                    _reservation("cr-block", "capacity-block", 2, START + timedelta(days=7)),
                    _reservation("cr-full", "default", 0, None),
                ],
                "NextToken": "n",
            },
            want,
        )
        stub.add_response(
            "describe_capacity_reservations",
            {"CapacityReservations": [_reservation("cr-odcr", "default", 3, None)]},
            {**want, "NextToken": "n"},
        )
        got = fetch_held_blocks(ec2, REGION, horizon)
        stub.assert_no_pending_responses()
    assert [(b.block_id, b.kind, b.count, b.end) for b in got] == [
        ("cr-block", BlockKind.AWS_CAPACITY_BLOCK, 2, START + timedelta(days=7)),
        ("cr-odcr", BlockKind.AWS_ODCR, 3, horizon),
    ]  # cr-full has no free slot
    assert all(b.held and b.cost_usd == 0.0 for b in got)
    assert launch_target(got[0]) == {
        "CapacityReservationSpecification": {
            "CapacityReservationTarget": {"CapacityReservationId": "cr-block"}
        },
        "InstanceMarketOptions": {"MarketType": "capacity-block"},
    }
    assert "InstanceMarketOptions" not in launch_target(got[1])
    # the RunInstances shape accepts both (botocore validates the parameters)
    with Stubber(ec2) as stub:
        for b in got:
            args = {
                "ImageId": "ami-12345678",
                "InstanceType": "p5.48xlarge",
                "MinCount": 1,
                "MaxCount": 1,
                **launch_target(b),
            }
            stub.add_response("run_instances", {"Instances": []}, args)
            ec2.run_instances(**args)
        stub.assert_no_pending_responses()


def test_an_offering_is_no_launch_target() -> None:
    ec2 = _ec2()
    with Stubber(ec2) as stub:
        stub.add_response(
            "describe_capacity_block_offerings",
            {"CapacityBlockOfferings": [_row("cb-1")]},
            _params(),
        )
        (offer,) = fetch_block_offerings(ec2, REGION, "p5.48xlarge", 2, 216, START, LATEST)
    with pytest.raises(ValueError, match="not an AWS reservation the account holds"):
        launch_target(offer)
