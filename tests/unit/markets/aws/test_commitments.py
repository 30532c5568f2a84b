"""What the AWS account owns, read through botocore Stubber clients (moto 5.2
implements neither DescribeReservedInstances nor the Savings Plans API)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import boto3
import pytest
from botocore.stub import Stubber

from markets.aws.commitments import AwsCommitments, SavingsPlanRate
from markets.commitments import CommitmentKind, PaymentOption
from markets.errors import InputError, ThrottledError

CREDS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
START = datetime(2026, 1, 1, tzinfo=UTC)
END = datetime(2027, 1, 1, tzinfo=UTC)


@pytest.fixture
def clients() -> Iterator[tuple[object, Stubber, object, Stubber]]:
    ec2 = boto3.client("ec2", region_name="us-east-1", **CREDS)  # type: ignore[call-overload]
    sp = boto3.client("savingsplans", region_name="us-east-1", **CREDS)  # type: ignore[call-overload]
    with Stubber(ec2) as e, Stubber(sp) as s:
        yield ec2, e, sp, s
        e.assert_no_pending_responses()
        s.assert_no_pending_responses()


def _ri(rid: str, offering: str, state: str = "active") -> dict[str, object]:
    return {
        "ReservedInstancesId": rid,
        "InstanceType": "p4d.24xlarge",
        "InstanceCount": 2,
        "Start": START,
        "End": END,
        "State": state,
        "OfferingType": offering,
        "Scope": "Region",
    }


def test_reserved_instances_and_both_kinds_of_savings_plan(clients: tuple) -> None:  # type: ignore[type-arg]
    ec2, e, sp, s = clients
    e.add_response(
        "describe_reserved_instances",
        {"ReservedInstances": [_ri("ri-1", "All Upfront"), _ri("ri-2", "No Upfront", "retired")]},
        {"Filters": [{"Name": "state", "Values": ["active"]}]},
    )
    plan = {
        "start": "2026-03-01T00:00:00.000Z",
        "end": "2029-03-01T00:00:00.000Z",
        "state": "active",
        "paymentOption": "Partial Upfront",
    }
    s.add_response(
        "describe_savings_plans",
        {
            "savingsPlans": [
                {
                    **plan,
                    "savingsPlanId": "sp-c",
                    "savingsPlanType": "Compute",
                    "commitment": "40.5",
                }
            ],
            "nextToken": "page2",
        },
        {"states": ["active"]},
    )
    s.add_response(
        "describe_savings_plans",
        {
            "savingsPlans": [
                {
                    **plan,
                    "savingsPlanId": "sp-e",
                    "savingsPlanType": "EC2Instance",
                    "ec2InstanceFamily": "p4d",
                    "region": "us-east-1",
                    "commitment": "10",
                },
                {
                    **plan,
                    "savingsPlanId": "sp-s",
                    "savingsPlanType": "SageMaker",
                    "commitment": "3",
                },
            ]
        },
        {"states": ["active"], "nextToken": "page2"},
    )
    owned = AwsCommitments({"us-east-1": ec2}, sp).owned()
    assert [c.id for c in owned] == ["ri-1", "sp-c", "sp-e"]  # retired and SageMaker skipped
    ri, compute, ec2_sp = owned
    assert ri.group == "aws/us-east-1/p4d.24xlarge" and ri.count == 2
    assert ri.payment is PaymentOption.ALL_UPFRONT and ri.end == END
    assert compute.kind is CommitmentKind.SAVINGS_PLAN_COMPUTE and compute.usd_per_hour == 40.5
    assert compute.region is None and compute.payment is PaymentOption.PARTIAL_UPFRONT
    assert ec2_sp.kind is CommitmentKind.SAVINGS_PLAN_EC2
    assert (ec2_sp.family, ec2_sp.region) == ("p4d", "us-east-1")


def test_rates_per_type_and_region(clients: tuple) -> None:  # type: ignore[type-arg]
    ec2, _e, sp, s = clients
    s.add_response(
        "describe_savings_plan_rates",
        {
            "savingsPlanId": "sp-c",
            "searchResults": [
                {
                    "rate": "20.1",
                    "properties": [
                        {"name": "instanceType", "value": "p4d.24xlarge"},
                        {"name": "region", "value": "us-east-1"},
                    ],
                },
                {"rate": "0.5", "properties": [{"name": "region", "value": "us-east-1"}]},
            ],
        },
        {
            "savingsPlanId": "sp-c",
            "filters": [
                {"name": "productDescription", "values": ["Linux/UNIX"]},
                {"name": "tenancy", "values": ["shared"]},
                {"name": "productType", "values": ["EC2"]},
            ],
        },
    )
    rates = AwsCommitments({"us-east-1": ec2}, sp).rates(["sp-c"])
    assert rates == [SavingsPlanRate("sp-c", "p4d.24xlarge", "us-east-1", 20.1)]


def test_throttling_outlasting_retries_is_a_throttled_error(clients: tuple) -> None:  # type: ignore[type-arg]
    ec2, e, _sp, _s = clients
    e.add_client_error("describe_reserved_instances", "RequestLimitExceeded", http_status_code=503)
    with pytest.raises(ThrottledError, match="DescribeReservedInstances"):
        AwsCommitments({"us-east-1": ec2}).reserved_instances()


def test_a_garbled_commitment_names_the_field(clients: tuple) -> None:  # type: ignore[type-arg]
    ec2, _e, sp, s = clients
    s.add_response(
        "describe_savings_plans",
        {
            "savingsPlans": [
                {
                    "savingsPlanId": "sp-x",
                    "savingsPlanType": "Compute",
                    "start": "2026-03-01T00:00:00Z",
                    "end": "2029-03-01T00:00:00Z",
                    "commitment": "lots",
                }
            ]
        },
        {"states": ["active"]},
    )
    with pytest.raises(InputError, match=r"savingsPlans\[0\].commitment"):
        AwsCommitments({"us-east-1": ec2}, sp).savings_plans()


def test_owned_with_rates_attaches_each_plans_rates(clients: tuple) -> None:  # type: ignore[type-arg]
    ec2, e, sp, s = clients
    e.add_response(
        "describe_reserved_instances",
        {"ReservedInstances": []},
        {"Filters": [{"Name": "state", "Values": ["active"]}]},
    )
    s.add_response(
        "describe_savings_plans",
        {
            "savingsPlans": [
                {
                    "start": "2026-03-01T00:00:00.000Z",
                    "end": "2029-03-01T00:00:00.000Z",
                    "state": "active",
                    "paymentOption": "All Upfront",
                    "savingsPlanId": "sp-c",
                    "savingsPlanType": "Compute",
                    "commitment": "40.5",
                }
            ]
        },
        {"states": ["active"]},
    )
    s.add_response(
        "describe_savings_plan_rates",
        {
            "savingsPlanId": "sp-c",
            "searchResults": [
                {
                    "rate": "14.75",
                    "properties": [
                        {"name": "instanceType", "value": "p4d.24xlarge"},
                        {"name": "region", "value": "us-east-1"},
                    ],
                }
            ],
        },
        {
            "savingsPlanId": "sp-c",
            "filters": [
                {"name": "productDescription", "values": ["Linux/UNIX"]},
                {"name": "tenancy", "values": ["shared"]},
                {"name": "productType", "values": ["EC2"]},
            ],
        },
    )
    (plan,) = AwsCommitments({"us-east-1": ec2}, sp).owned_with_rates()
    assert plan.usd_per_hour == 40.5
    assert plan.rates == (("p4d.24xlarge", "us-east-1", 14.75),)
