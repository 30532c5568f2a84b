"""How a ``LaunchRequest`` becomes an EC2 ``RunInstances`` call, and how an
EC2 instance description becomes an ``Instance``.

Owns: the per-region launch settings (``RegionLaunch``: a launch template, or
an AMI, plus subnets per zone and security groups), the tags Spotfolio puts
on what it launches (``fleet.OWNER_TAG`` and friends, plus ``LAUNCH_KEY_TAG``,
``TIER_TAG`` and ``UNITS_TAG`` defined here), ``run_instances_params`` and
``instance_from_ec2``.

Why ``RunInstances`` rather than ``CreateFleet`` (type ``instant``): the
broker launches one pool at a time (the optimizer already chose the zone and
type, and the lifecycle manager picks the next pool itself), so CreateFleet's
diversification is not needed; RunInstances raises capacity errors as errors
(an instant fleet reports them inside a 200 reply, partially fulfilled), and
its ``ClientToken`` semantics are documented ("Ensuring idempotency in Amazon
EC2 API requests": the same token returns the same reservation; a token is
valid for at least 24 hours after the instance terminates; a different
parameter with the same token is ``IdempotentParameterMismatch``).
``MinCount = MaxCount = count`` makes a launch all-or-nothing: half a gang is
no use to a training job.

Must not: call AWS (``markets.aws.provider`` does) or decide what to launch.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, cast

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from markets import catalog
from markets.clock import ensure_utc
from markets.cloud_fleet import (
    GENERATION_TAG,
    OWNER_TAG,
    POOL_TAG,
    WORKLOAD_TAG,
    Instance,
    InstanceState,
    LaunchRequest,
)
from markets.model import Pool, Tier

if TYPE_CHECKING:
    from mypy_boto3_ec2.literals import InstanceTypeType
    from mypy_boto3_ec2.type_defs import (
        InstanceTypeDef,
        LaunchTemplateSpecificationTypeDef,
        RunInstancesRequestTypeDef,
        TagTypeDef,
    )

__all__ = [
    "LAUNCH_KEY_TAG",
    "LIVE_STATES",
    "TIER_TAG",
    "UNITS_TAG",
    "RegionLaunch",
    "instance_from_ec2",
    "launch_tags",
    "run_instances_params",
    "units_from_catalog",
]

log = logging.getLogger(__name__)

# Tags beyond the fleet-wide ones: the launch's idempotency key (after a crash
# the daemon finds what a key launched by listing this tag), the tier asked
# for (committed and on-demand look the same to EC2) and the capacity units
# (so the fleet reads right even if the catalog changes).
LAUNCH_KEY_TAG = "spotfolio:launch-key"
TIER_TAG = "spotfolio:tier"
UNITS_TAG = "spotfolio:units"

# EC2 instance states that still hold (or may soon hold) capacity. A stopped
# instance of ours is listed as STOPPING: it costs its volumes and the broker
# should end it.
LIVE_STATES: Mapping[str, InstanceState] = {
    "pending": InstanceState.PENDING,
    "running": InstanceState.RUNNING,
    "stopping": InstanceState.STOPPING,
    "stopped": InstanceState.STOPPING,
}

_AMI = re.compile(r"^ami-[0-9a-f]{8,17}$")
_SUBNET = re.compile(r"^subnet-[0-9a-f]{8,17}$")
_SG = re.compile(r"^sg-[0-9a-f]{8,17}$")
_LT_ID = re.compile(r"^lt-[0-9a-f]{17}$")
# CreateLaunchTemplate: 3-128 characters of letters, digits, ( ) . - / _
_LT_NAME = re.compile(r"^[A-Za-z0-9().\-/_]{3,128}$")


class RegionLaunch(BaseModel):
    """What every instance launched in one region is built from.

    Exactly one of ``launch_template_name``, ``launch_template_id`` or
    ``image_id``. ``subnets`` maps a zone to its subnet; when it is empty EC2
    uses the default VPC's subnet of the zone asked for.

    YAML example::

        us-east-1:
          launch_template_name: spotfolio-gpu
          subnets: {us-east-1a: subnet-0123456789abcdef0}
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    launch_template_name: str | None = Field(default=None, pattern=_LT_NAME.pattern)
    launch_template_id: str | None = Field(default=None, pattern=_LT_ID.pattern)
    launch_template_version: str = Field(default="$Default", pattern=r"^(\$Default|\$Latest|\d+)$")
    image_id: str | None = Field(default=None, pattern=_AMI.pattern)
    subnets: dict[str, str] = Field(default_factory=dict)
    security_group_ids: tuple[str, ...] = ()
    instance_profile_arn: str | None = Field(default=None, pattern=r"^arn:aws[\w-]*:iam::\d{12}:")

    @field_validator("subnets")
    @classmethod
    def _subnet_ids(cls, v: dict[str, str]) -> dict[str, str]:
        bad = sorted(s for s in v.values() if not _SUBNET.match(s))
        if bad:
            raise ValueError(f"subnet ids look like subnet-0123456789abcdef0, got {bad}")
        return v

    @field_validator("security_group_ids")
    @classmethod
    def _sg_ids(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = sorted(s for s in v if not _SG.match(s))
        if bad:
            raise ValueError(f"security group ids look like sg-0123456789abcdef0, got {bad}")
        return v

    @model_validator(mode="after")
    def _one_source(self) -> RegionLaunch:
        given = [self.launch_template_name, self.launch_template_id, self.image_id]
        if sum(x is not None for x in given) != 1:
            raise ValueError("exactly one of launch_template_name, launch_template_id or image_id")
        return self


def units_from_catalog(instance_type: str) -> int | None:
    """Capacity units of a type the embedded catalog knows, else ``None``."""
    try:
        return catalog.instance_type(instance_type).units
    except catalog.UnknownInstanceTypeError:
        return None


def launch_tags(request: LaunchRequest, units: int) -> dict[str, str]:
    """Every tag put on the instances (and volumes) ``request`` launches."""
    return {
        OWNER_TAG: request.owner,
        WORKLOAD_TAG: request.workload,
        POOL_TAG: request.pool_key,
        GENERATION_TAG: str(request.plan_generation),
        LAUNCH_KEY_TAG: request.idempotency_key,
        TIER_TAG: request.tier.value,
        UNITS_TAG: str(units),
    }


def run_instances_params(
    request: LaunchRequest, pool: Pool, settings: RegionLaunch, units: int
) -> RunInstancesRequestTypeDef:
    """Keyword arguments of ``ec2.run_instances`` for ``request`` in ``pool``.

    Raises ``KeyError`` naming the zone when ``settings.subnets`` is given
    but has no subnet for the pool's zone (the caller says which option)."""
    tags: list[TagTypeDef] = [
        {"Key": k, "Value": v} for k, v in launch_tags(request, units).items()
    ]
    params: RunInstancesRequestTypeDef = {
        "ClientToken": request.idempotency_key,
        "MinCount": request.count,
        "MaxCount": request.count,
        # boto3-stubs spell today's type names as a Literal; a pool's type is
        # a plain string that EC2 itself validates.
        "InstanceType": cast("InstanceTypeType", pool.instance_type),
        "Placement": {"AvailabilityZone": pool.zone},
        "TagSpecifications": [
            {"ResourceType": "instance", "Tags": tags},
            {"ResourceType": "volume", "Tags": tags},
        ],
    }
    if settings.image_id is not None:
        params["ImageId"] = settings.image_id
    else:
        template: LaunchTemplateSpecificationTypeDef = {"Version": settings.launch_template_version}
        if settings.launch_template_id is not None:
            template["LaunchTemplateId"] = settings.launch_template_id
        else:
            template["LaunchTemplateName"] = str(settings.launch_template_name)
        params["LaunchTemplate"] = template
    if settings.subnets:
        params["SubnetId"] = settings.subnets[pool.zone]
    if settings.security_group_ids:
        params["SecurityGroupIds"] = list(settings.security_group_ids)
    if settings.instance_profile_arn is not None:
        params["IamInstanceProfile"] = {"Arn": settings.instance_profile_arn}
    if request.tier is Tier.SPOT:
        # one-time + terminate: an interrupted instance is gone, and the
        # broker (not a persistent spot request) decides what replaces it.
        params["InstanceMarketOptions"] = {
            "MarketType": "spot",
            "SpotOptions": {
                "SpotInstanceType": "one-time",
                "InstanceInterruptionBehavior": "terminate",
            },
        }
    return params


def _tier(item: InstanceTypeDef, tags: Mapping[str, str]) -> Tier:
    if item.get("InstanceLifecycle") == "spot":
        return Tier.SPOT  # EC2's own word wins over our tag
    return Tier.COMMITTED if tags.get(TIER_TAG) == Tier.COMMITTED.value else Tier.ON_DEMAND


def _units(
    instance_id: str, itype: str, tags: Mapping[str, str], fallback: Callable[[str], int | None]
) -> int:
    text = tags.get(UNITS_TAG, "")
    if text.isdigit() and int(text) > 0:
        return int(text)
    units = fallback(itype)
    if units is None:
        log.warning(
            "instance %s: no %s tag and type %s unknown: counted as 1 unit",
            instance_id,
            UNITS_TAG,
            itype,
        )
        return 1
    return units


def instance_from_ec2(
    item: InstanceTypeDef,
    region: str,
    units_for: Callable[[str], int | None] = units_from_catalog,
) -> Instance | None:
    """The ``Instance`` for one ``DescribeInstances`` item, or ``None`` when
    it no longer holds capacity (shutting-down, terminated)."""
    state = LIVE_STATES.get(str(item.get("State", {}).get("Name", "")))
    if state is None:
        return None
    tags = {str(t["Key"]): str(t.get("Value", "")) for t in item.get("Tags", [])}
    itype = str(item["InstanceType"])
    zone = str(item.get("Placement", {}).get("AvailabilityZone", ""))
    pool = Pool.from_key(f"aws/{region}/{zone}/{itype}")
    return Instance(
        instance_id=str(item["InstanceId"]),
        pool_key=pool.key,
        tier=_tier(item, tags),
        workload=tags.get(WORKLOAD_TAG, ""),
        state=state,
        units=_units(str(item["InstanceId"]), itype, tags, units_for),
        launched_at=ensure_utc(item["LaunchTime"]),
        tags=tags,
    )
