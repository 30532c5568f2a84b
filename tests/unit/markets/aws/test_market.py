"""The AWS market adapter against moto's HTTP server and botocore's Stubber.

moto (real HTTP on 127.0.0.1) answers what it implements: zones, instance
types, offerings, spot price history (dummy prices: only shape is checked).
Stubber answers what moto lacks (GetSpotPlacementScores, the Pricing API) and
scripted pages (NextToken, bad rows). Throttling is injected *before send* on
real HTTP clients, so botocore's own retry handler is what retries it.
"""

from __future__ import annotations

import ast
import json
import math
import types
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, TypedDict, cast

import boto3
import botocore.endpoint
import pytest
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.client import BaseClient
from botocore.compat import HTTPHeaders
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from broker.lifecycle.placement import PlacementReader
from markets import catalog, ttl
from markets.aws import errors as aws_errors
from markets.aws.hazard import advisor_hazard, assumed_hazard
from markets.aws.market import AwsMarket, PlacementMode, open_aws_market
from markets.aws.pricing import fetch_reserved, parse_on_demand_product
from markets.aws.rows import SkippedRows
from markets.aws.sdk import (
    AWS_API_CALLS,
    AWS_BLOCK_API_CALLS,
    AWS_MARKET_API_CALLS,
    RetryMode,
    client_config,
)
from markets.aws.spot import SpotHistory, fetch_spot_history
from markets.clock import ManualClock
from markets.errors import (
    AuthError,
    CapacityUnavailableError,
    InputError,
    QuotaExceededError,
    StaleDataError,
    ThrottledError,
    TransientError,
)
from markets.model import HazardSource
from markets.protocols import PriceSource
from tests.paths import REPO

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ec2.literals import InstanceTypeType
    from mypy_boto3_ec2.type_defs import InstanceTypeInfoTypeDef
    from mypy_boto3_pricing import PricingClient

REGION = "us-east-1"
# GPU types moto 5 knows in us-east-1 (p4d.24xlarge is not offered in every zone).
TYPES: tuple[InstanceTypeType, ...] = ("g4dn.xlarge", "g5.xlarge", "p4d.24xlarge")
T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


class _Creds(TypedDict):
    aws_access_key_id: str
    aws_secret_access_key: str
    aws_session_token: str


CREDS: _Creds = {
    "aws_access_key_id": "testing",
    "aws_secret_access_key": "testing",
    "aws_session_token": "testing",
}
ON_DEMAND = {"g4dn.xlarge": 0.526, "g5.xlarge": 1.006, "p4d.24xlarge": 32.7726}


# -- helpers -------------------------------------------------------------------


def server_client(url: str, *, attempts: int = 3) -> EC2Client:
    cfg = client_config(retry_mode="standard", max_attempts=attempts)
    return boto3.client("ec2", region_name=REGION, endpoint_url=url, config=cfg, **CREDS)


def offline_client() -> EC2Client:
    """An EC2 client that only ever talks to a Stubber."""
    return boto3.client("ec2", region_name=REGION, **CREDS)


def offline_pricing() -> PricingClient:
    """A Pricing client that only ever talks to a Stubber."""
    return boto3.client("pricing", region_name=REGION, **CREDS)


def price_doc(itype: str, usd: str, region: str = REGION) -> str:
    return json.dumps(
        {
            "product": {"attributes": {"instanceType": itype, "regionCode": region}},
            "terms": {
                "OnDemand": {
                    "SKU.TERM": {
                        "priceDimensions": {
                            "SKU.TERM.RATE": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}
                        }
                    }
                }
            },
        }
    )


def stub_pricing(types_: tuple[str, ...] = TYPES) -> tuple[PricingClient, Stubber]:
    """A Pricing client answering one product per type, in the adapter's order."""
    client = offline_pricing()
    stub = Stubber(client)
    for t in sorted(types_):
        stub.add_response(
            "get_products",
            {"PriceList": [price_doc(t, str(ON_DEMAND[t]))], "FormatVersion": "aws_v1"},
        )
    stub.activate()
    return client, stub


class Faults:
    """Answers an EC2 action with an AWS error *before send*: botocore's retry
    handler sees it exactly like a server reply. ``times=None``: always."""

    def __init__(
        self, client: BaseClient, action: str, code: str, status: int, times: int | None
    ) -> None:
        self.code, self.status, self.left = code, status, times
        self.sent = 0
        # botocore-stubs type event handlers as returning None; a before-send
        # handler's answer is the response botocore uses instead of sending.
        client.meta.events.register(f"before-send.ec2.{action}", cast("Callable[..., None]", self))

    def __call__(self, request: AWSPreparedRequest, **_: object) -> AWSResponse | None:
        self.sent += 1
        if self.left is not None and self.left <= 0:
            return None
        if self.left is not None:
            self.left -= 1
        body = (
            f"<Response><Errors><Error><Code>{self.code}</Code><Message>injected</Message>"
            "</Error></Errors><RequestID>r</RequestID></Response>"
        ).encode()
        raw = types.SimpleNamespace(stream=lambda **_: iter([body]))
        return AWSResponse(request.url, self.status, HTTPHeaders(), raw)


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """botocore's retry back-off sleeps, recorded instead of slept."""
    slept: list[float] = []
    monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=slept.append))
    return slept


def moto_market(
    url: str, clock: ManualClock, *, attempts: int = 3
) -> tuple[AwsMarket, EC2Client, Stubber]:
    ec2 = server_client(url, attempts=attempts)
    pricing, pstub = stub_pricing()
    market = AwsMarket(
        ec2_clients={REGION: ec2},
        pricing_client=pricing,
        instance_types=TYPES,
        placement="off",
        clock=clock,
    )
    return market, ec2, pstub


# -- moto server ---------------------------------------------------------------


def test_moto_snapshot_has_one_pool_per_zone_offering(moto_server: str) -> None:
    market, ec2, _ = moto_market(moto_server, ManualClock(T0))
    assert isinstance(market, PriceSource)
    snap = market.snapshot()
    offerings = ec2.describe_instance_type_offerings(
        LocationType="availability-zone",
        Filters=[{"Name": "instance-type", "Values": list(TYPES)}],
    )["InstanceTypeOfferings"]
    expected = {f"aws/{REGION}/{o['Location']}/{o['InstanceType']}" for o in offerings}
    assert {p.pool.key for p in snap.pools} == expected
    assert {p.pool.key for p in snap.pools} == {p.key for p in market.pools()}
    assert not snap.stale and snap.source == "aws"
    for p in snap.pools:
        assert p.on_demand_usd_per_hour == ON_DEMAND[p.pool.instance_type]
        assert p.observed_at == T0
        assert p.placement_score is None  # placement="off"
        assert p.committed_1y_usd_per_hour is None  # moto has no GPU RI offerings


def test_moto_instance_types_carry_gpu_info_from_describe_instance_types(moto_server: str) -> None:
    market, ec2, _ = moto_market(moto_server, ManualClock(T0))
    raw: dict[str, InstanceTypeInfoTypeDef] = {
        t["InstanceType"]: t
        for t in ec2.describe_instance_types(InstanceTypes=list(TYPES))["InstanceTypes"]
    }
    got = {t.name: t for t in market.instance_types()}
    assert set(got) == set(TYPES)
    for name, it in got.items():
        gpus = sum(g["Count"] for g in raw[name]["GpuInfo"]["Gpus"])
        assert it.gpus == gpus and it.units == gpus
        assert it.vcpus == raw[name]["VCpuInfo"]["DefaultVCpus"]
        assert it.memory_gib == raw[name]["MemoryInfo"]["SizeInMiB"] / 1024


def test_moto_spot_history_rows_become_as_of_prices(moto_server: str) -> None:
    clock = ManualClock(T0)
    ec2 = server_client(moto_server)
    raw = ec2.describe_spot_price_history(
        InstanceTypes=list(TYPES), ProductDescriptions=["Linux/UNIX"]
    )["SpotPriceHistory"]
    assert raw, "moto returns one dummy row per offered zone and type"
    skipped = SkippedRows()
    zones = [z["ZoneName"] for z in ec2.describe_availability_zones()["AvailabilityZones"]]
    points = fetch_spot_history(ec2, REGION, TYPES, zones, T0 - timedelta(days=7), T0, skipped)
    assert skipped.total == 0
    assert len(points) == len(raw)
    hist = SpotHistory.build(T0 - timedelta(days=7), T0, points)
    for row in raw:
        got = hist.price_at(row["AvailabilityZone"], row["InstanceType"], clock.now())
        assert got is not None and got.usd_per_hour == float(row["SpotPrice"])


def test_throttled_call_is_retried_by_botocore_then_succeeds(
    moto_server: str, sleeps: list[float]
) -> None:
    market, ec2, _ = moto_market(moto_server, ManualClock(T0), attempts=3)
    faults = Faults(ec2, "DescribeSpotPriceHistory", "Throttling", 400, times=1)
    snap = market.snapshot()
    assert not snap.stale and snap.pools
    assert faults.sent == 2  # the throttled attempt, then the retry botocore made
    assert len(sleeps) == 1  # one jittered back-off between them


def test_keeps_last_good_snapshot_marked_stale_when_throttling_outlasts_retries(
    moto_server: str, sleeps: list[float]
) -> None:
    clock = ManualClock(T0)
    market, ec2, _ = moto_market(moto_server, clock, attempts=2)
    good = market.snapshot()
    faults = Faults(ec2, "DescribeSpotPriceHistory", "RequestLimitExceeded", 503, times=None)
    clock.advance(ttl.SPOT_PRICE_TTL_S + 1)
    stale = market.snapshot()
    assert faults.sent == 3  # the first try and max_attempts=2 retries, then botocore gave up
    assert stale.stale and not good.stale
    assert stale.pools == good.pools  # same prices, same observed_at (T0)
    assert stale.at == clock.now()


def test_no_good_answer_ever_raises_stale_data_error(moto_server: str, sleeps: list[float]) -> None:
    market, ec2, _ = moto_market(moto_server, ManualClock(T0), attempts=0)
    Faults(ec2, "DescribeSpotPriceHistory", "Throttling", 400, times=None)
    with pytest.raises(StaleDataError) as info:
        market.snapshot()
    assert isinstance(info.value.__cause__, ThrottledError)


def test_auth_failure_fails_fast_and_is_not_masked_as_stale(
    moto_server: str, sleeps: list[float]
) -> None:
    clock = ManualClock(T0)
    market, ec2, _ = moto_market(moto_server, clock)
    market.snapshot()  # a good snapshot exists: still no stale fallback for auth
    faults = Faults(ec2, "DescribeSpotPriceHistory", "UnauthorizedOperation", 403, times=None)
    clock.advance(ttl.SPOT_PRICE_TTL_S + 1)
    with pytest.raises(AuthError):
        market.snapshot()
    assert faults.sent == 1  # botocore does not retry auth failures either
    assert sleeps == []


def test_a_stale_instance_type_list_kept_outside_a_snapshot_is_not_hidden_from_the_next(
    moto_server: str, sleeps: list[float]
) -> None:
    # instance_types() keeps the old list when its refresh fails; that stale
    # mark is cleared when the next snapshot starts. Nothing is hidden: a failed
    # refresh does not renew the cached list's age, so the snapshot refreshes it
    # again and says stale if that fails too, fresh only if it succeeded.
    clock = ManualClock(T0)
    ec2 = server_client(moto_server, attempts=1)
    market = AwsMarket(
        ec2_clients={REGION: ec2},
        pricing_client=None,
        instance_types=TYPES,
        placement="off",
        clock=clock,
    )
    assert not market.snapshot().stale
    clock.advance(ttl.INSTANCE_TYPES_TTL_S + 1)
    faults = Faults(ec2, "DescribeInstanceTypes", "RequestLimitExceeded", 503, times=None)
    assert {t.name for t in market.instance_types()} == set(TYPES)  # the old list, kept
    tried = faults.sent
    assert tried >= 1
    still_failing = market.snapshot()
    assert faults.sent > tried  # the snapshot asked again rather than trust the old list
    assert still_failing.stale and still_failing.pools
    faults.left = 0  # AWS answers again
    tried = faults.sent
    answered = market.snapshot()
    assert faults.sent == tried + 1 and not answered.stale


# -- Stubber: a whole market without moto --------------------------------------

ZONES = (("us-east-1a", "use1-az6"), ("us-east-1b", "use1-az1"))


class StubbedAws:
    """EC2, placement and Pricing clients answered by Stubbers, one region,
    one instance type (g5.xlarge), two zones."""

    itype = "g5.xlarge"

    def __init__(self) -> None:
        self.ec2 = offline_client()
        self.placement = offline_client()
        self.pricing = offline_pricing()
        self.s_ec2, self.s_place, self.s_price = (
            Stubber(self.ec2),
            Stubber(self.placement),
            Stubber(self.pricing),
        )
        for s in (self.s_ec2, self.s_place, self.s_price):
            s.activate()

    def market(
        self,
        clock: ManualClock,
        *,
        placement: PlacementMode = "zone",
        placement_target_capacity: int = 1,
        advisor_buckets: Mapping[tuple[str, str], int] | None = None,
    ) -> AwsMarket:
        return AwsMarket(
            ec2_clients={REGION: self.ec2},
            pricing_client=self.pricing,
            placement_client=self.placement,
            instance_types=[self.itype],
            clock=clock,
            placement=placement,
            placement_target_capacity=placement_target_capacity,
            advisor_buckets=advisor_buckets,
        )

    def queue_catalog(self) -> None:
        """Instance types and zones: what snapshot() asks first."""
        self.s_ec2.add_response(
            "describe_instance_types",
            {
                "InstanceTypes": [
                    {
                        "InstanceType": self.itype,
                        "VCpuInfo": {"DefaultVCpus": 4},
                        "MemoryInfo": {"SizeInMiB": 16384},
                        "GpuInfo": {
                            "Gpus": [
                                {
                                    "Name": "A10G",
                                    "Manufacturer": "NVIDIA",
                                    "Count": 1,
                                    "MemoryInfo": {"SizeInMiB": 24576},
                                }
                            ],
                            "TotalGpuMemoryInMiB": 24576,
                        },
                    }
                ]
            },
        )
        self.s_ec2.add_response(
            "describe_availability_zones",
            {
                "AvailabilityZones": [
                    {"ZoneName": n, "ZoneId": i, "RegionName": REGION, "State": "available"}
                    for n, i in ZONES
                ]
            },
        )

    def queue_price(self, usd: str = "1.006") -> None:
        self.s_price.add_response(
            "get_products", {"PriceList": [price_doc(self.itype, usd)], "FormatVersion": "aws_v1"}
        )

    def queue_scores(self, rows: list[dict[str, object]]) -> None:
        self.s_place.add_response("get_spot_placement_scores", {"SpotPlacementScores": rows})

    def queue_region(
        self, spot_rows: list[dict[str, object]], reserved: list[dict[str, object]]
    ) -> None:
        """Offerings, reserved offerings, then spot history, for the region."""
        self.s_ec2.add_response(
            "describe_instance_type_offerings",
            {
                "InstanceTypeOfferings": [
                    {"InstanceType": self.itype, "LocationType": "availability-zone", "Location": n}
                    for n, _ in ZONES
                ]
            },
        )
        self.s_ec2.add_response(
            "describe_reserved_instances_offerings", {"ReservedInstancesOfferings": reserved}
        )
        self.queue_spot(spot_rows)

    def queue_spot(self, rows: list[dict[str, object]]) -> None:
        self.s_ec2.add_response("describe_spot_price_history", {"SpotPriceHistory": rows})

    def all_answered(self) -> None:
        for s in (self.s_ec2, self.s_place, self.s_price):
            s.assert_no_pending_responses()


def spot_row(zone: str, usd: str, at: datetime, itype: str = "g5.xlarge") -> dict[str, object]:
    return {
        "AvailabilityZone": zone,
        "InstanceType": itype,
        "ProductDescription": "Linux/UNIX",
        "SpotPrice": usd,
        "Timestamp": at,
    }


def ri(years: int, fixed: float, hourly: float, offering_type: str) -> dict[str, object]:
    return {
        "InstanceType": "g5.xlarge",
        "Duration": {1: 31_536_000, 3: 94_608_000}[years],
        "FixedPrice": fixed,
        "UsagePrice": 0.0,
        "CurrencyCode": "USD",
        "OfferingType": offering_type,
        "RecurringCharges": [{"Frequency": "Hourly", "Amount": hourly}] if hourly else [],
    }


def full_round(aws: StubbedAws) -> None:
    aws.queue_catalog()
    aws.queue_price()
    aws.queue_scores(
        [
            {"Region": REGION, "AvailabilityZoneId": "use1-az6", "Score": 9},
            {"Region": REGION, "AvailabilityZoneId": "use1-az1", "Score": 3},
        ]
    )
    aws.queue_region(
        [
            spot_row("us-east-1a", "0.40", T0 - timedelta(days=3)),
            spot_row("us-east-1a", "0.45", T0 - timedelta(hours=2)),
            spot_row("us-east-1b", "0.50", T0 - timedelta(days=1)),
        ],
        [
            ri(1, 0.0, 0.634, "No Upfront"),
            ri(1, 5256.0, 0.0, "All Upfront"),
            ri(3, 10512.0, 0.1, "Partial Upfront"),
        ],
    )


def test_stubbed_snapshot_joins_prices_scores_and_reserved_terms() -> None:
    aws = StubbedAws()
    full_round(aws)
    snap = aws.market(ManualClock(T0)).snapshot()
    aws.all_answered()
    a, b = (
        snap.get(f"aws/{REGION}/us-east-1a/g5.xlarge"),
        snap.get(f"aws/{REGION}/us-east-1b/g5.xlarge"),
    )
    assert (a.spot_usd_per_hour, b.spot_usd_per_hour) == (0.45, 0.50)  # latest change as of T0
    assert (a.placement_score, b.placement_score) == (9, 3)  # zone ids mapped to names
    assert a.on_demand_usd_per_hour == 1.006
    # 1y: min(No Upfront 0.634/h, All Upfront 5256 $ / 8760 h = 0.60/h)
    assert a.committed_1y_usd_per_hour == pytest.approx(5256.0 / 8760)
    # 3y: 10512 $ / 26280 h + 0.10/h recurring
    assert a.committed_3y_usd_per_hour == pytest.approx(10512.0 / 26280 + 0.1)
    assert a.hazard.source is HazardSource.ASSUMED and a.hazard.confidence < 0.1
    assert a.instance.gpu_model == "A10G" and a.instance.gpu_memory_gib == 24.0


def test_snapshot_at_a_past_time_uses_the_price_then_in_force() -> None:
    aws = StubbedAws()
    full_round(aws)
    market = aws.market(ManualClock(T0))
    past = market.snapshot(T0 - timedelta(hours=5))
    a = past.get(f"aws/{REGION}/us-east-1a/g5.xlarge")
    assert a.spot_usd_per_hour == 0.40  # the 0.45 change came 2 h before T0
    assert a.placement_score is None  # placement scores exist only for now
    assert a.observed_at == T0 - timedelta(hours=5)
    with pytest.raises(InputError, match="spot history"):
        market.snapshot(T0 - timedelta(days=8))
    with pytest.raises(InputError, match="not after now"):
        market.snapshot(T0 + timedelta(hours=1))


def test_components_are_refetched_only_after_their_ttl() -> None:
    aws = StubbedAws()
    full_round(aws)
    clock = ManualClock(T0)
    market = aws.market(clock)
    first = market.snapshot()
    clock.advance(ttl.SPOT_PRICE_TTL_S - 1)
    assert market.snapshot().pools == first.pools  # no call: Stubber would fail
    aws.all_answered()
    clock.advance(2)  # spot TTL passed; placement, prices, catalog still fresh
    aws.queue_spot([spot_row("us-east-1a", "0.47", T0), spot_row("us-east-1b", "0.50", T0)])
    snap = market.snapshot()
    aws.all_answered()
    assert snap.get(f"aws/{REGION}/us-east-1a/g5.xlarge").spot_usd_per_hour == 0.47
    assert not snap.stale


def test_throttled_pricing_after_ttl_keeps_old_prices_marked_stale() -> None:
    aws = StubbedAws()
    full_round(aws)
    clock = ManualClock(T0)
    market = aws.market(clock, placement="off")
    good = market.snapshot()
    clock.advance(ttl.ON_DEMAND_PRICE_TTL_S + 1)
    # Zones, offerings, reserved and spot (TTL <= 12 h) are refetched; instance
    # types (24 h) are not; pricing is throttled.
    aws.s_ec2.add_response(
        "describe_availability_zones",
        {
            "AvailabilityZones": [
                {"ZoneName": n, "ZoneId": i, "RegionName": REGION, "State": "available"}
                for n, i in ZONES
            ]
        },
    )
    aws.s_price.add_client_error("get_products", "ThrottlingException", http_status_code=400)
    aws.s_ec2.add_response(
        "describe_instance_type_offerings",
        {
            "InstanceTypeOfferings": [
                {"InstanceType": "g5.xlarge", "LocationType": "availability-zone", "Location": n}
                for n, _ in ZONES
            ]
        },
    )
    aws.s_ec2.add_response(
        "describe_reserved_instances_offerings",
        {"ReservedInstancesOfferings": [ri(1, 5256.0, 0.0, "All Upfront")]},
    )
    aws.queue_spot([spot_row("us-east-1a", "0.45", T0), spot_row("us-east-1b", "0.50", T0)])
    snap = market.snapshot()
    assert snap.stale and not good.stale
    assert [p.on_demand_usd_per_hour for p in snap.pools] == [1.006, 1.006]


def test_pricing_auth_failure_raises_auth_error_even_with_a_good_snapshot() -> None:
    aws = StubbedAws()
    full_round(aws)
    clock = ManualClock(T0)
    market = aws.market(clock)
    market.snapshot()
    clock.advance(ttl.INSTANCE_TYPES_TTL_S + 1)
    aws.queue_catalog()
    aws.s_price.add_client_error("get_products", "AccessDeniedException", http_status_code=400)
    with pytest.raises(AuthError) as info:
        market.snapshot()
    assert "AccessDeniedException" in str(info.value)


def test_pricing_never_answered_falls_back_to_catalog_prices_marked_stale() -> None:
    aws = StubbedAws()
    aws.queue_catalog()
    aws.s_price.add_client_error("get_products", "ServiceUnavailable", http_status_code=503)
    aws.queue_scores([])
    aws.queue_region([spot_row("us-east-1a", "0.45", T0)], [])
    snap = aws.market(ManualClock(T0)).snapshot()
    assert snap.stale
    assert {p.on_demand_usd_per_hour for p in snap.pools} == {
        catalog.list_price("aws", REGION, "g5.xlarge")
    }


# -- Stubber: pagination and validation of single readers ----------------------


def test_spot_history_follows_next_token_and_counts_bad_rows() -> None:
    ec2 = offline_client()
    start, end = T0 - timedelta(days=1), T0
    base = {
        "InstanceTypes": ["g5.xlarge"],
        "ProductDescriptions": ["Linux/UNIX"],
        "StartTime": start,
        "EndTime": end,
    }
    with Stubber(ec2) as stub:
        stub.add_response(
            "describe_spot_price_history",
            {
                "SpotPriceHistory": [
                    spot_row("us-east-1a", "0.40", T0 - timedelta(hours=3)),
                    spot_row("us-east-1a", "-1", T0 - timedelta(hours=2)),  # negative
                ],
                "NextToken": "page-2",
            },
            expected_params=base,
        )
        stub.add_response(
            "describe_spot_price_history",
            {
                "SpotPriceHistory": [
                    spot_row("us-east-1a", "0.42", T0 - timedelta(hours=1)),
                    spot_row("us-east-9z", "0.10", T0 - timedelta(hours=1)),  # unknown zone
                    spot_row("us-east-1a", "nan", T0 - timedelta(minutes=30)),  # not finite
                ]
            },
            expected_params={**base, "NextToken": "page-2"},
        )
        skipped = SkippedRows()
        points = fetch_spot_history(ec2, REGION, ["g5.xlarge"], ["us-east-1a"], start, end, skipped)
        stub.assert_no_pending_responses()
    assert [p.usd_per_hour for p in sorted(points)] == [0.40, 0.42]
    assert skipped.total == 3
    assert set(skipped.by_reason()) == {
        "ec2:DescribeSpotPriceHistory: price is negative: '-1'",
        "ec2:DescribeSpotPriceHistory: unknown zone for us-east-1",
        "ec2:DescribeSpotPriceHistory: price is not finite: 'nan'",
    }


def test_placement_scores_follow_next_token_and_skip_out_of_range_scores() -> None:
    aws = StubbedAws()
    aws.queue_catalog()
    aws.queue_price()
    expected = {
        "InstanceTypes": ["g5.xlarge"],
        "TargetCapacity": 4,
        "TargetCapacityUnitType": "units",
        "SingleAvailabilityZone": True,
        "RegionNames": [REGION],
    }
    aws.s_place.add_response(
        "get_spot_placement_scores",
        {
            "SpotPlacementScores": [
                {"Region": REGION, "AvailabilityZoneId": "use1-az6", "Score": 7}
            ],
            "NextToken": "t2",
        },
        expected_params=expected,
    )
    aws.s_place.add_response(
        "get_spot_placement_scores",
        {
            "SpotPlacementScores": [
                {"Region": REGION, "AvailabilityZoneId": "use1-az1", "Score": 11},
                {"Region": REGION, "AvailabilityZoneId": "use1-az99", "Score": 5},
            ]
        },
        expected_params={**expected, "NextToken": "t2"},
    )
    aws.queue_region([], [])
    market = aws.market(ManualClock(T0), placement_target_capacity=4)
    snap = market.snapshot()
    aws.all_answered()
    scores = {p.pool.zone: p.placement_score for p in snap.pools}
    assert scores == {"us-east-1a": 7, "us-east-1b": None}
    assert market.skipped.counts[("ec2:GetSpotPlacementScores", "score not an integer 1-10")] == 1
    assert market.skipped.counts[("ec2:GetSpotPlacementScores", "unknown zone id")] == 1


def test_region_placement_scores_apply_to_every_zone_of_the_region() -> None:
    aws = StubbedAws()
    aws.queue_catalog()
    aws.queue_price()
    aws.s_place.add_response(
        "get_spot_placement_scores",
        {"SpotPlacementScores": [{"Region": REGION, "Score": 6}]},
        expected_params={
            "InstanceTypes": ["g5.xlarge"],
            "TargetCapacity": 1,
            "TargetCapacityUnitType": "units",
            "SingleAvailabilityZone": False,
            "RegionNames": [REGION],
        },
    )
    aws.queue_region([], [])
    snap = aws.market(ManualClock(T0), placement="region").snapshot()
    assert [p.placement_score for p in snap.pools] == [6, 6]


def test_get_products_follows_next_token_and_skips_bad_products() -> None:
    aws = StubbedAws()
    aws.queue_catalog()
    aws.s_price.add_response(
        "get_products",
        {"PriceList": [price_doc("g5.xlarge", "abc"), "{not json"], "NextToken": "n2"},
    )
    aws.s_price.add_response(
        "get_products",
        {"PriceList": [price_doc("g5.xlarge", "1.1")]},
        expected_params={
            "ServiceCode": "AmazonEC2",
            "FormatVersion": "aws_v1",
            "Filters": [
                {"Type": "TERM_MATCH", "Field": f, "Value": v}
                for f, v in (
                    ("instanceType", "g5.xlarge"),
                    ("regionCode", REGION),
                    ("operatingSystem", "Linux"),
                    ("tenancy", "Shared"),
                    ("preInstalledSw", "NA"),
                    ("capacitystatus", "Used"),
                    ("licenseModel", "No License required"),
                )
            ],
            "NextToken": "n2",
        },
    )
    aws.queue_scores([])
    aws.queue_region([], [])
    market = aws.market(ManualClock(T0))
    snap = market.snapshot()
    aws.all_answered()
    assert {p.on_demand_usd_per_hour for p in snap.pools} == {1.1}
    assert (
        sum(n for (op, _), n in market.skipped.counts.items() if op == "pricing:GetProducts") == 2
    )


def test_spot_above_on_demand_is_dropped_and_counted_once() -> None:
    aws = StubbedAws()
    aws.queue_catalog()
    aws.queue_price("1.006")
    aws.queue_scores([])
    aws.queue_region([spot_row("us-east-1a", "5.0", T0 - timedelta(hours=1))], [])
    clock = ManualClock(T0)
    market = aws.market(clock)
    for _ in range(2):
        pool = market.snapshot().get(f"aws/{REGION}/us-east-1a/g5.xlarge")
        assert pool.spot_usd_per_hour is None and not pool.spot_available
    assert market.skipped.total == 1


def test_reserved_offerings_effective_price_and_skips() -> None:
    ec2 = offline_client()
    odd = {**ri(1, 100.0, 0.0, "All Upfront"), "Duration": 12345}
    other = {**ri(1, 1.0, 0.0, "All Upfront"), "InstanceType": "g5.2xlarge"}
    with Stubber(ec2) as stub:
        stub.add_response(
            "describe_reserved_instances_offerings",
            {"ReservedInstancesOfferings": [ri(1, 0.0, 0.7, "No Upfront"), odd, other]},
        )
        skipped = SkippedRows()
        got = fetch_reserved(ec2, REGION, ["g5.xlarge"], skipped)
    assert got == {("g5.xlarge", 1): 0.7}
    assert skipped.total == 2


def test_on_demand_product_rejects_zero_and_wrong_type() -> None:
    doc = json.loads(price_doc("g5.xlarge", "0.0000000000"))
    with pytest.raises(ValueError, match="zero"):
        parse_on_demand_product(doc, region=REGION, instance_type="g5.xlarge")
    with pytest.raises(ValueError, match="product is for"):
        parse_on_demand_product(doc, region=REGION, instance_type="p5.48xlarge")


def test_unknown_instance_type_is_an_input_error(moto_server: str) -> None:
    market = AwsMarket(
        ec2_clients={REGION: server_client(moto_server)},
        pricing_client=None,
        instance_types=["g5.xlarge", "zz9.nonsense"],
        clock=ManualClock(T0),
    )
    with pytest.raises(InputError, match=r"zz9\.nonsense"):
        market.instance_types()


# -- error translation, retry configuration, factory, hazard -------------------


@pytest.mark.parametrize(
    ("code", "status", "expected"),
    [
        pytest.param("Throttling", 400, ThrottledError, id="throttling"),
        pytest.param("RequestLimitExceeded", 503, ThrottledError, id="ec2-limit"),
        pytest.param("UnauthorizedOperation", 403, AuthError, id="unauthorized"),
        pytest.param("AuthFailure", 401, AuthError, id="auth-failure"),
        pytest.param("InvalidClientTokenId", 403, AuthError, id="bad-key"),
        pytest.param("ExpiredToken", 400, AuthError, id="expired"),
        pytest.param("AccessDenied", 403, AuthError, id="denied"),
        pytest.param("InsufficientInstanceCapacity", 500, CapacityUnavailableError, id="ice"),
        pytest.param("VcpuLimitExceeded", 400, QuotaExceededError, id="quota"),
        pytest.param("InternalError", 500, TransientError, id="5xx-code"),
        pytest.param("SomethingNew", 502, TransientError, id="5xx-status"),
        pytest.param("InvalidInstanceType", 400, InputError, id="invalid"),
    ],
)
def test_client_errors_translate_into_the_error_tree(
    code: str, status: int, expected: type[Exception]
) -> None:
    err = ClientError(
        {
            "Error": {"Code": code, "Message": "m"},
            "ResponseMetadata": {
                "RequestId": "r",
                "HostId": "h",
                "HTTPStatusCode": status,
                "HTTPHeaders": {},
                "RetryAttempts": 0,
            },
        },
        "DescribeSpotPriceHistory",
    )
    with pytest.raises(expected) as info, aws_errors.aws_call("ec2:DescribeSpotPriceHistory"):
        raise err
    assert type(info.value) is expected
    assert info.value.__cause__ is err


@pytest.mark.parametrize("mode", ["adaptive", "standard"])
def test_from_settings_sets_botocore_retry_mode_on_every_client(mode: RetryMode) -> None:
    market = AwsMarket.from_settings(
        regions=["us-east-1", "us-west-2"],
        retry_mode=mode,
        max_attempts=7,
        endpoint_url="http://127.0.0.1:9",  # never contacted
        instance_types=["g5.xlarge"],
    )
    clients = [*market.ec2_clients.values(), market.pricing_client]
    assert len(clients) == 3
    for c in clients:
        assert isinstance(c, BaseClient)
        # botocore stores 7 retries as 8 attempts in all, the first try included
        # (vars: botocore-stubs do not declare Config's option attributes).
        assert vars(c.meta.config)["retries"] == {"mode": mode, "total_max_attempts": 8}
    pricing = clients[-1]
    assert isinstance(pricing, BaseClient)
    assert pricing.meta.region_name == "us-east-1"  # the Pricing API endpoint


def test_client_config_rejects_unknown_retry_mode() -> None:
    with pytest.raises(ValueError, match="retry_mode"):
        client_config(retry_mode="legacy")  # type: ignore[arg-type]


def test_open_aws_market_parses_cli_lists_and_rejects_bad_names() -> None:
    ec2 = offline_client()
    m = open_aws_market(
        regions="us-east-1", instance_types="g5.xlarge, g4dn.xlarge", ec2_clients={REGION: ec2}
    )
    assert m.requested_types == ("g4dn.xlarge", "g5.xlarge") and m.regions == (REGION,)
    with pytest.raises(InputError, match="--instance-types"):
        open_aws_market(instance_types="G5 XL", ec2_clients={REGION: ec2})
    with pytest.raises(InputError, match="--regions"):
        open_aws_market(regions="us-west-2", ec2_clients={REGION: ec2})


def test_hazard_prior_from_advisor_bucket_else_assumed() -> None:
    aws = StubbedAws()
    full_round(aws)
    snap = aws.market(ManualClock(T0), advisor_buckets={(REGION, "g5.xlarge"): 1}).snapshot()
    h = snap.pools[0].hazard
    assert h.source is HazardSource.ADVISOR and h == advisor_hazard(1)
    # Bucket 1 is 5-10 % of a month's instances reclaimed: midpoint 7.5 %, so
    # 92.5 % survive 730 hours.
    assert math.exp(-h.rate_per_hour * 730) == pytest.approx(0.925)
    assert assumed_hazard().rate_per_hour > h.rate_per_hour


# -- the manifest of API calls stays honest ------------------------------------


def _api_names_in_code() -> set[str]:
    """Every boto3 method named in markets/aws and the CloudWatch demand
    reader (direct calls and paginators),
    as IAM action names, via botocore's own method -> API mapping."""
    clients: dict[str, BaseClient] = {
        "ec2": offline_client(),
        "pricing": offline_pricing(),
        "sqs": boto3.client("sqs", region_name=REGION, **CREDS),
        "ssm": boto3.client("ssm", region_name=REGION, **CREDS),
        "secretsmanager": boto3.client("secretsmanager", region_name=REGION, **CREDS),
        "savingsplans": boto3.client("savingsplans", region_name=REGION, **CREDS),
        "cloudwatch": boto3.client("cloudwatch", region_name=REGION, **CREDS),
        "servicequotas": boto3.client("service-quotas", region_name=REGION, **CREDS),
    }
    mapping = {
        (s, method): api
        for s, c in clients.items()
        for method, api in c.meta.method_to_api_mapping.items()
    }
    found: set[str] = set()
    root = REPO / "markets" / "aws"
    # the CloudWatch reader makes its call through markets.aws's client
    for path in [*root.glob("*.py"), REPO / "markets" / "signals" / "cloudwatch.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                names.append(node.func.attr)
                if node.func.attr == "get_paginator" and node.args:
                    arg = node.args[0]
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                        names.append(arg.value)
            for name in names:
                found |= {f"{s}:{api}" for (s, m), api in mapping.items() if m == name}
    return found


def test_api_call_manifest_matches_the_code() -> None:
    # the reserved-ahead calls are named apart: not the daemon's (no IAM grant)
    assert _api_names_in_code() == AWS_API_CALLS | AWS_BLOCK_API_CALLS
    assert not AWS_BLOCK_API_CALLS & AWS_API_CALLS


def test_api_call_manifest_matches_the_calls_a_snapshot_makes() -> None:
    aws = StubbedAws()
    full_round(aws)
    made: Counter[str] = Counter()

    def record(event_name: str, **_kwargs: object) -> None:
        _, service, action = event_name.split(".")
        made[f"{service}:{action}"] += 1

    for c in (aws.ec2, aws.placement, aws.pricing):
        c.meta.events.register("before-parameter-build.*.*", record)
    aws.market(ManualClock(T0)).snapshot()
    assert set(made) == AWS_MARKET_API_CALLS


@pytest.fixture(autouse=True)
def _no_real_aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Never reach real AWS from a test, whatever the environment holds."""
    for var in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    yield


def test_the_market_reads_current_placement_scores_per_pool_for_reactions() -> None:
    # The lifecycle's PlacementReader: every offered pool keyed by its pool
    # key, the score of its zone; a second read within the TTL asks nothing
    # (the Stubber would fail on an unqueued call).
    aws = StubbedAws()
    full_round(aws)
    clock = ManualClock(T0)
    market = aws.market(clock)
    market.snapshot()
    aws.all_answered()
    assert isinstance(market, PlacementReader)
    scores = market.placement_scores()
    assert scores == {
        f"aws/{REGION}/us-east-1a/g5.xlarge": 9,
        f"aws/{REGION}/us-east-1b/g5.xlarge": 3,
    }
    clock.advance(ttl.SPOT_PLACEMENT_SCORE_TTL_S - 1)
    assert market.placement_scores() == scores
    assert aws.market(clock, placement="off").placement_scores() == {}


def test_the_aws_snapshot_prices_spot_at_its_regime_with_a_volatility_margin() -> None:
    # us-east-1a moved 0.40 -> 0.45 two hours ago; 1b has held 0.50 for a day.
    # Both carry their movement (markets.price_analytics), as the replay
    # market's pools do, and a plan prices spot at the regime plus a margin.
    aws = StubbedAws()
    full_round(aws)
    snap = aws.market(ManualClock(T0)).snapshot()
    a = snap.get(f"aws/{REGION}/us-east-1a/g5.xlarge").spot_risk
    b = snap.get(f"aws/{REGION}/us-east-1b/g5.xlarge").spot_risk
    assert a is not None and b is not None
    assert a.weekly_volatility > 0 and a.margin_usd_per_hour > 0
    assert a.planning_usd_per_hour > 0.45  # never below the price in force
    assert b.weekly_volatility == 0 and b.planning_usd_per_hour == pytest.approx(0.50)
