"""EC2 vCPU limits from Service Quotas (botocore Stubber: moto's Service
Quotas knows only the vpc service) and the market snapshot that carries them
(moto's EC2 server): the groups of the requested types only, read once per
TTL, a code a region lacks left out, an auth failure never hidden."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from markets import ttl
from markets.aws.market import AwsMarket
from markets.aws.quotas import fetch_ec2_quotas
from markets.clock import ManualClock
from markets.errors import AuthError
from markets.model import QuotaUnit, Tier
from tests.unit.markets.aws.test_market import CREDS, REGION, T0, TYPES, server_client, stub_pricing


def _client() -> Any:
    return boto3.client("service-quotas", region_name=REGION, **CREDS)


def _answer(stub: Stubber, code: str, value: float) -> None:
    stub.add_response(
        "get_service_quota",
        {"Quota": {"ServiceCode": "ec2", "QuotaCode": code, "Value": value}},
        {"ServiceCode": "ec2", "QuotaCode": code},
    )


def test_each_group_reads_its_on_demand_and_spot_limit() -> None:
    sq = _client()
    with Stubber(sq) as stub:
        _answer(stub, "L-DB2E81BA", 64.0)  # G on-demand
        _answer(stub, "L-3819A6DF", 128.0)  # G spot
        _answer(stub, "L-417A185B", 96.0)  # P on-demand
        absent = {"ServiceCode": "ec2", "QuotaCode": "L-7212CCBC"}  # P spot
        stub.add_client_error(
            "get_service_quota",
            "NoSuchResourceException",
            http_status_code=400,
            expected_params=absent,
        )
        got = fetch_ec2_quotas(sq, REGION, ["P", "G"])
        stub.assert_no_pending_responses()
    assert [(q.group, q.tier, q.limit, q.code) for q in got] == [
        ("G", Tier.ON_DEMAND, 64.0, "L-DB2E81BA"),
        ("G", Tier.SPOT, 128.0, "L-3819A6DF"),
        ("P", Tier.ON_DEMAND, 96.0, "L-417A185B"),
    ]  # P spot: no such quota in the region, none kept to
    assert all(q.unit is QuotaUnit.VCPUS and q.region == REGION for q in got)


def test_access_denied_is_an_auth_error_not_a_missing_quota() -> None:
    sq = _client()
    with Stubber(sq) as stub:
        stub.add_client_error("get_service_quota", "AccessDeniedException", http_status_code=403)
        with pytest.raises(AuthError, match="servicequotas:GetServiceQuota"):
            fetch_ec2_quotas(sq, REGION, ["P"])


def test_the_snapshot_carries_the_limits_of_the_requested_types_once_per_ttl(
    moto_server: str,
) -> None:
    clock = ManualClock(T0)
    pricing, _ = stub_pricing()
    sq = _client()
    stub = Stubber(sq)
    stub.activate()
    # TYPES: g4dn.xlarge, g5.xlarge (G), p4d.24xlarge (P): G then P, on-demand then spot
    for code, v in (
        ("L-DB2E81BA", 64.0),
        ("L-3819A6DF", 64.0),
        ("L-417A185B", 96.0),
        ("L-7212CCBC", 192.0),
    ):
        _answer(stub, code, v)
    market = AwsMarket(
        ec2_clients={REGION: server_client(moto_server)},
        pricing_client=pricing,
        instance_types=TYPES,
        placement="off",
        clock=clock,
        quota_clients={REGION: sq},
    )
    snap = market.snapshot()
    stub.assert_no_pending_responses()
    assert {q.key: q.limit for q in snap.quotas} == {
        "aws/us-east-1/G/on_demand": 64.0,
        "aws/us-east-1/G/spot": 64.0,
        "aws/us-east-1/P/on_demand": 96.0,
        "aws/us-east-1/P/spot": 192.0,
    }
    clock.advance(timedelta(seconds=ttl.QUOTA_TTL_S / 2))
    assert market.snapshot(clock.now()).quotas == snap.quotas  # no call: Stubber would fail
