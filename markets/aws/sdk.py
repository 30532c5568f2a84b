"""The narrow AWS SDK surface the market adapter uses, and how clients are built.

Owns: ``AWS_API_CALLS`` (the manifest of every AWS API action the adapter
calls; ``tests/unit/markets/aws/test_market.py`` keeps it equal to the calls in the code,
and the IAM policy is derived from it), the ``Ec2Api`` / ``PricingApi``
protocols that name only the client methods used, and ``client_config`` /
``build_clients`` (botocore retry configuration: throttling and 5xx are retried
by botocore, never by a loop of ours).

Must not: parse responses or hold market logic. boto3 is imported only inside
``build_clients`` so that importing the adapter stays cheap. The request and
reply shapes are boto3-stubs' (``mypy_boto3_ec2``, ``mypy_boto3_pricing``),
named for the type checker only: they are a development dependency.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, overload

from botocore.config import Config

if TYPE_CHECKING:
    from typing import Unpack

    import boto3
    from mypy_boto3_ec2.paginator import (
        DescribeInstanceTypeOfferingsPaginator,
        DescribeInstanceTypesPaginator,
        DescribeReservedInstancesOfferingsPaginator,
        DescribeSpotPriceHistoryPaginator,
        GetSpotPlacementScoresPaginator,
    )
    from mypy_boto3_ec2.type_defs import (
        DescribeAvailabilityZonesRequestTypeDef,
        DescribeAvailabilityZonesResultTypeDef,
    )
    from mypy_boto3_pricing.paginator import GetProductsPaginator

__all__ = [
    "AWS_API_CALLS",
    "AWS_BLOCK_API_CALLS",
    "AWS_COMMITMENT_API_CALLS",
    "AWS_MARKET_API_CALLS",
    "AWS_METRIC_API_CALLS",
    "AWS_PROVIDER_API_CALLS",
    "AWS_PROVIDER_IMPLIED_PERMISSIONS",
    "AWS_QUOTA_API_CALLS",
    "AWS_SECRET_API_CALLS",
    "DEFAULT_MAX_ATTEMPTS",
    "PRICING_REGION",
    "AwsClients",
    "Ec2Api",
    "PricingApi",
    "RetryMode",
    "build_clients",
    "client_config",
    "commitment_clients",
]

# Every AWS API action the adapters call, as IAM names them. A test compares
# AWS_API_CALLS with the calls found in markets/aws/*.py; the Terraform module
# derives the daemon's IAM policy from the two parts: the market's read-only
# calls, and the provider's (which launch, terminate and read notices).
AWS_MARKET_API_CALLS: frozenset[str] = frozenset(
    {
        "ec2:DescribeAvailabilityZones",
        "ec2:DescribeInstanceTypeOfferings",
        "ec2:DescribeInstanceTypes",
        "ec2:DescribeReservedInstancesOfferings",
        "ec2:DescribeSpotPriceHistory",
        "ec2:GetSpotPlacementScores",
        "pricing:GetProducts",
    }
)
AWS_PROVIDER_API_CALLS: frozenset[str] = frozenset(
    {
        "ec2:DescribeCapacityReservations",  # use_reservations: the held ones to launch into
        "ec2:DescribeInstances",
        "ec2:RunInstances",
        "ec2:TerminateInstances",
        "sqs:DeleteMessage",
        "sqs:ReceiveMessage",
    }
)
# Secret references in hook settings (``markets.aws.secrets``): read when a
# hook runs, each granted only on the parameters and secrets the deployment
# names (the Terraform module's ``secret_arns``).
AWS_SECRET_API_CALLS: frozenset[str] = frozenset(
    {"ssm:GetParameter", "secretsmanager:GetSecretValue"}
)
# What the account already owns (``markets.aws.commitments``): read-only.
AWS_COMMITMENT_API_CALLS: frozenset[str] = frozenset(
    {
        "ec2:DescribeReservedInstances",
        "savingsplans:DescribeSavingsPlans",
        "savingsplans:DescribeSavingsPlanRates",
    }
)
# The EC2 vCPU limits a plan keeps to (``markets.aws.quotas``): read-only.
AWS_QUOTA_API_CALLS: frozenset[str] = frozenset({"servicequotas:GetServiceQuota"})
# A serving workload's live demand from CloudWatch (``markets.signals.cloudwatch``,
# through ``cloudwatch_client`` here): read-only, granted in the regions the
# deployment names (the Terraform module's ``demand_metric_regions``).
AWS_METRIC_API_CALLS: frozenset[str] = frozenset({"cloudwatch:GetMetricData"})
# Reserved-ahead capacity offered (``markets.aws.blocks``): read by an
# operator's what-if and bought only on approval; not the daemon's, so not in
# ``AWS_API_CALLS`` or its IAM policy. Reading the held reservations
# (``ec2:DescribeCapacityReservations``) is the provider's, above.
AWS_BLOCK_API_CALLS: frozenset[str] = frozenset(
    {"ec2:DescribeCapacityBlockOfferings", "ec2:PurchaseCapacityBlock"}
)
AWS_API_CALLS: frozenset[str] = (
    AWS_MARKET_API_CALLS
    | AWS_PROVIDER_API_CALLS
    | AWS_SECRET_API_CALLS
    | AWS_COMMITMENT_API_CALLS
    | AWS_METRIC_API_CALLS
    | AWS_QUOTA_API_CALLS
)
# Permissions IAM checks although no call is named after them: RunInstances
# with TagSpecifications is also authorised as ec2:CreateTags (condition
# ec2:CreateAction = RunInstances; EC2 User Guide, "Grant permission to tag
# resources during creation"). A launch setting with an instance profile also
# needs iam:PassRole on its role.
AWS_PROVIDER_IMPLIED_PERMISSIONS: frozenset[str] = frozenset({"ec2:CreateTags"})

RetryMode = Literal["adaptive", "standard"]

# botocore's ``retries["max_attempts"]`` counts the retries *after* the first
# try (``total_max_attempts`` would count all of them). 5 retries of jittered
# exponential back-off (1, 2, 4, 8, 16 s at most) ride out a burst of throttling
# in about half a minute; past that, the caller gets a stale snapshot rather
# than a planning loop stuck for minutes.
DEFAULT_MAX_ATTEMPTS = 5

# The Price List Query API answers only in us-east-1 (also ap-south-1 and
# eu-central-1), whatever region is being priced (AWS Price List API docs).
PRICING_REGION = "us-east-1"


class Ec2Api(Protocol):
    """The EC2 client methods the adapter calls (a boto3 EC2 client fits).

    Paginated actions go through ``get_paginator``; the only direct call is
    ``describe_availability_zones`` (not paginated by AWS). The overloads keep
    the order of boto3-stubs' ``EC2Client`` (mypy matches overloads in order).
    """

    @overload
    def get_paginator(
        self, operation_name: Literal["describe_instance_type_offerings"]
    ) -> DescribeInstanceTypeOfferingsPaginator: ...

    @overload
    def get_paginator(
        self, operation_name: Literal["describe_instance_types"]
    ) -> DescribeInstanceTypesPaginator: ...

    @overload
    def get_paginator(
        self, operation_name: Literal["describe_reserved_instances_offerings"]
    ) -> DescribeReservedInstancesOfferingsPaginator: ...

    @overload
    def get_paginator(
        self, operation_name: Literal["describe_spot_price_history"]
    ) -> DescribeSpotPriceHistoryPaginator: ...

    @overload
    def get_paginator(
        self, operation_name: Literal["get_spot_placement_scores"]
    ) -> GetSpotPlacementScoresPaginator: ...

    def describe_availability_zones(
        self, **kwargs: Unpack[DescribeAvailabilityZonesRequestTypeDef]
    ) -> DescribeAvailabilityZonesResultTypeDef: ...


class PricingApi(Protocol):
    """The Price List Query API client methods the adapter calls."""

    def get_paginator(self, operation_name: Literal["get_products"]) -> GetProductsPaginator: ...


def client_config(
    *, retry_mode: RetryMode = "adaptive", max_attempts: int = DEFAULT_MAX_ATTEMPTS
) -> Config:
    """botocore ``Config`` whose retry handler absorbs throttling and 5xx.

    ``adaptive`` adds client-side rate limiting on top of ``standard``'s
    jittered exponential backoff: right for a daemon sharing an account's
    request budget with other tools.
    """
    if retry_mode not in ("adaptive", "standard"):
        raise ValueError(f"retry_mode must be 'adaptive' or 'standard', got {retry_mode!r}")
    if max_attempts < 0:
        raise ValueError(f"max_attempts (retries) must be >= 0, got {max_attempts}")
    return Config(retries={"mode": retry_mode, "max_attempts": max_attempts})


@dataclass(frozen=True)
class AwsClients:
    """The clients one ``AwsMarket`` uses: EC2 per region, and Pricing."""

    ec2: Mapping[str, Ec2Api]
    pricing: PricingApi | None
    service_quotas: Mapping[str, Any] | None = None  # per region (``markets.aws.quotas``)


def build_clients(
    regions: Sequence[str],
    *,
    retry_mode: RetryMode = "adaptive",
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    session: boto3.Session | None = None,
    profile: str | None = None,
    endpoint_url: str | None = None,
    quotas: bool = False,
) -> AwsClients:
    """boto3 clients with the retry configuration, credentials from the
    default chain (or ``profile``). ``endpoint_url`` points every client at
    one endpoint (a local moto server); ``quotas``: Service Quotas clients
    per region as well."""
    import boto3

    cfg = client_config(retry_mode=retry_mode, max_attempts=max_attempts)
    sess = session or boto3.Session(profile_name=profile)
    ec2: dict[str, Ec2Api] = {
        r: sess.client("ec2", region_name=r, config=cfg, endpoint_url=endpoint_url) for r in regions
    }
    pricing: PricingApi = sess.client(
        "pricing", region_name=PRICING_REGION, config=cfg, endpoint_url=endpoint_url
    )
    sq = None
    if quotas:
        sq = {r: sess.client("service-quotas", region_name=r, config=cfg,
                             endpoint_url=endpoint_url) for r in regions}  # fmt: skip
    return AwsClients(ec2=ec2, pricing=pricing, service_quotas=sq)


def commitment_clients(regions: Sequence[str]) -> tuple[dict[str, Any], Any]:
    """EC2 clients per region and one Savings Plans client (a global API),
    for ``markets.aws.commitments.AwsCommitments``; credentials from the
    default chain. Any: the reader names the calls it makes (its protocols)."""
    import boto3

    cfg = client_config()
    ec2 = {r: boto3.client("ec2", region_name=r, config=cfg) for r in regions}
    return ec2, boto3.client("savingsplans", region_name="us-east-1", config=cfg)


def cloudwatch_client(region: str, *, endpoint_url: str | None = None) -> Any:
    """A CloudWatch client in ``region`` with the retry configuration, for
    ``markets.signals.cloudwatch`` (its one call, ``GetMetricData``): boto3 is
    imported only in this package. Any: boto3-stubs' cloudwatch shapes are
    not a development dependency, and the reader names the call it makes."""
    import boto3

    return boto3.client(
        "cloudwatch", region_name=region, config=client_config(), endpoint_url=endpoint_url
    )


def s3_client() -> Any:
    """An S3 client with the retry configuration, for a sweep's inputs
    (``broker.scale.sweep_inputs``: ``PutObject`` by the client, ``GetObject`` by
    the workers; not the daemon's, so not in ``AWS_API_CALLS``). Region and
    endpoint from the default chain (``AWS_ENDPOINT_URL`` for a local server)."""
    import boto3

    return boto3.client("s3", config=client_config())
