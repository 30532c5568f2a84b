"""Settings and SDK clients of the AWS provider.

Owns: ``AwsProviderSettings`` (validated at the edge: a bad option becomes an
``InputError`` naming it), ``ProviderClients`` / ``build_provider_clients``
(EC2 per region and SQS, with botocore's retry configuration) and
``fail_fast_on_capacity`` (keeps botocore from retrying a launch that failed
for capacity).

Why that last one: EC2 answers ``InsufficientInstanceCapacity`` as a server
error (HTTP 500), and botocore's standard retry mode retries every 500 with
exponential back-off (up to ~30 s at our ``DEFAULT_MAX_ATTEMPTS``). Inside a
120 s interruption window the right move is the next pool at once, so
RunInstances is not retried on a capacity code.

Must not: launch, list or parse anything.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from markets.aws.errors import LAUNCH_CAPACITY_CODES, aws_call
from markets.aws.launch import RegionLaunch
from markets.aws.notices import (
    DEFAULT_VISIBILITY_TIMEOUT_S,
    DEFAULT_WAIT_TIME_S,
    MAX_VISIBILITY_TIMEOUT_S,
    MAX_WAIT_TIME_S,
    SqsApi,
)
from markets.aws.options import REGION_PATTERN, TYPE_PATTERN
from markets.aws.sdk import DEFAULT_MAX_ATTEMPTS, RetryMode, client_config
from markets.errors import InputError

if TYPE_CHECKING:
    from typing import Unpack

    import boto3
    from botocore.client import BaseClient
    from mypy_boto3_ec2.paginator import DescribeInstancesPaginator
    from mypy_boto3_ec2.type_defs import (
        ReservationResponseTypeDef,
        RunInstancesRequestTypeDef,
        TerminateInstancesRequestTypeDef,
        TerminateInstancesResultTypeDef,
    )

__all__ = [
    "AwsProviderSettings",
    "Ec2ProviderApi",
    "ProviderClients",
    "build_provider_clients",
    "fail_fast_on_capacity",
    "queue_account",
    "queue_region",
    "settings_from_options",
]

# https://sqs.<region>.amazonaws.com/<account>/<name> (also .amazonaws.com.cn)
_QUEUE_URL = re.compile(
    r"^https://sqs\.([a-z]{2}(?:-[a-z]+)+-\d+)\.amazonaws\.com(?:\.cn)?/\d{12}/"
)
_QUEUE_ACCOUNT = re.compile(r"/(\d{12})/[^/]+/?$")
# EC2 tag values: up to 256 characters (EC2 User Guide, "Tag restrictions").
_MAX_TAG_VALUE = 256


class Ec2ProviderApi(Protocol):
    """The EC2 client methods the provider calls (a boto3 EC2 client fits);
    ``DescribeInstances`` goes through ``get_paginator``. The shapes are
    boto3-stubs', named for the type checker only."""

    def get_paginator(
        self, operation_name: Literal["describe_instances"]
    ) -> DescribeInstancesPaginator: ...

    def run_instances(
        self, **kwargs: Unpack[RunInstancesRequestTypeDef]
    ) -> ReservationResponseTypeDef: ...

    def terminate_instances(
        self, **kwargs: Unpack[TerminateInstancesRequestTypeDef]
    ) -> TerminateInstancesResultTypeDef: ...


class AwsProviderSettings(BaseModel):
    """Everything the AWS provider is configured with.

    YAML example (the daemon's ``provider:`` section)::

        owner: team-ml-prod
        queue_url: https://sqs.us-east-1.amazonaws.com/123456789012/spotfolio-notices
        launch:
          us-east-1:
            launch_template_name: spotfolio-gpu
            subnets: {us-east-1a: subnet-0123456789abcdef0}
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    owner: str = Field(min_length=1, max_length=_MAX_TAG_VALUE)
    # The account notices must come from (markets.aws.envelope.check_origin);
    # unset: STS GetCallerIdentity at start (it needs no IAM permission).
    account_id: str | None = Field(default=None, pattern=r"^\d{12}$")
    launch: dict[str, RegionLaunch] = Field(min_length=1)
    queue_url: str | None = None
    queue_region: str | None = Field(default=None, pattern=REGION_PATTERN.pattern)
    notice_wait_s: int = Field(default=DEFAULT_WAIT_TIME_S, ge=0, le=MAX_WAIT_TIME_S)
    notice_visibility_timeout_s: int = Field(
        default=DEFAULT_VISIBILITY_TIMEOUT_S, ge=0, le=MAX_VISIBILITY_TIMEOUT_S
    )
    # Capacity units per instance type, for types the catalog lacks.
    units: dict[str, int] = Field(default_factory=dict)
    # On-demand launches go into a held Capacity Block or ODCR of the pool
    # when one is active with room (``markets.aws.blocks.launch_target``);
    # needs ec2:DescribeCapacityReservations. Buying one is never done here.
    use_reservations: bool = False
    retry_mode: RetryMode = "adaptive"
    max_attempts: int = Field(default=DEFAULT_MAX_ATTEMPTS, ge=0, le=20)

    @field_validator("launch")
    @classmethod
    def _regions(cls, v: dict[str, RegionLaunch]) -> dict[str, RegionLaunch]:
        for region, settings in v.items():
            if not REGION_PATTERN.match(region):
                raise ValueError(f"region names look like us-east-1, got {region!r}")
            strays = sorted(z for z in settings.subnets if not z.startswith(region))
            if strays:
                raise ValueError(f"{region}: subnets for zones of another region: {strays}")
        return v

    @field_validator("units")
    @classmethod
    def _units(cls, v: dict[str, int]) -> dict[str, int]:
        bad = sorted(t for t, n in v.items() if not TYPE_PATTERN.match(t) or n < 1)
        if bad:
            raise ValueError(f"instance type -> units >= 1 expected, bad entries: {bad}")
        return v

    @property
    def regions(self) -> tuple[str, ...]:
        return tuple(sorted(self.launch))


def settings_from_options(options: Mapping[str, object]) -> AwsProviderSettings:
    """Validate provider options; the first problem becomes an ``InputError``
    naming the option (``provider.launch.us-east-1.image_id``)."""
    try:
        return AwsProviderSettings.model_validate(dict(options))
    except ValidationError as e:
        first = e.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or None
        raise InputError(
            "provider options", field, str(first["msg"]), got=first.get("input")
        ) from e


def queue_account(queue_url: str) -> str | None:
    """The account in a queue URL (``<endpoint>/<account>/<name>``, also
    for a local endpoint), else ``None``."""
    m = _QUEUE_ACCOUNT.search(queue_url)
    return m.group(1) if m else None


def queue_region(queue_url: str, fallback: str) -> str:
    """The region in an SQS queue URL, else ``fallback`` (a local endpoint)."""
    m = _QUEUE_URL.match(queue_url)
    return m.group(1) if m else fallback


def fail_fast_on_capacity(client: BaseClient) -> None:
    """Stop botocore retrying RunInstances when EC2 says the pool has no
    capacity. Registered first on ``needs-retry.ec2.RunInstances``: botocore
    takes the first non-``None`` answer, and ``False`` means "do not retry"."""

    def _no_retry(response: object = None, **_: object) -> bool | None:
        # botocore passes (http response, parsed reply) or None.
        if not isinstance(response, tuple) or len(response) < 2:
            return None
        parsed = response[1]
        error = parsed.get("Error", {}) if isinstance(parsed, dict) else {}
        code = error.get("Code", "") if isinstance(error, dict) else ""
        return False if code in LAUNCH_CAPACITY_CODES else None

    # botocore-stubs type every event handler as returning None; a
    # needs-retry handler's answer is the retry decision.
    client.meta.events.register_first(
        "needs-retry.ec2.RunInstances", cast("Callable[..., None]", _no_retry)
    )


@dataclass(frozen=True)
class ProviderClients:
    ec2: Mapping[str, Ec2ProviderApi]
    sqs: SqsApi | None
    account_id: str | None = None  # the credentials' account, when notices are read


def build_provider_clients(
    settings: AwsProviderSettings,
    *,
    session: boto3.Session | None = None,
    profile: str | None = None,
    endpoint_url: str | None = None,
) -> ProviderClients:
    """boto3 clients for every launch region (and the queue's region), with
    the retry configuration; credentials from the default chain or
    ``profile``. ``endpoint_url`` points them all at one endpoint (moto)."""
    import boto3

    cfg = client_config(retry_mode=settings.retry_mode, max_attempts=settings.max_attempts)
    sess = session or boto3.Session(profile_name=profile)
    ec2: dict[str, Ec2ProviderApi] = {}
    for region in settings.regions:
        client = sess.client("ec2", region_name=region, config=cfg, endpoint_url=endpoint_url)
        fail_fast_on_capacity(client)
        ec2[region] = client
    sqs: SqsApi | None = None
    account_id = settings.account_id
    if settings.queue_url:
        region = settings.queue_region or queue_region(settings.queue_url, settings.regions[0])
        sqs = sess.client("sqs", region_name=region, config=cfg, endpoint_url=endpoint_url)
        if account_id is None:
            sts = sess.client("sts", region_name=region, config=cfg, endpoint_url=endpoint_url)
            with aws_call("sts:GetCallerIdentity"):
                account_id = str(sts.get_caller_identity()["Account"])
    return ProviderClients(ec2=ec2, sqs=sqs, account_id=account_id)
