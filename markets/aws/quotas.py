"""EC2's running-instance vCPU limits, read from Service Quotas.

Owns: ``ServiceQuotasApi`` (the one call used: ``GetServiceQuota``) and
``fetch_ec2_quotas`` (a region's on-demand and spot vCPU limits of the
instance-family groups asked for, as ``Quota`` values). ``GetServiceQuota``
answers the applied value, or the default where none was ever requested;
a code the region does not have (``NoSuchResourceException``) is left out:
no limit known is no limit kept to, and a launch refused for quota is still
handled (``ErrorKind.QUOTA``). IAM: ``servicequotas:GetServiceQuota`` only.

Must not: decide anything, cache (``AwsMarket`` caches with
``markets.ttl.QUOTA_TTL_S``) or retry (botocore does).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from botocore.exceptions import ClientError

from markets.aws.errors import aws_call
from markets.errors import InputError
from markets.model import Provider, Quota, QuotaUnit, Tier
from markets.quotas import AWS_GROUPS

__all__ = ["ServiceQuotasApi", "fetch_ec2_quotas"]

_SERVICE = "ec2"
_ABSENT = frozenset({"NoSuchResourceException"})


class ServiceQuotasApi(Protocol):
    """The Service Quotas client method the adapter calls (a boto3 client fits)."""

    def get_service_quota(self, *, ServiceCode: str, QuotaCode: str) -> Any: ...


def _value(resp: object, code: str) -> float | None:
    quota = resp.get("Quota") if isinstance(resp, dict) else None
    value = quota.get("Value") if isinstance(quota, dict) else None
    if value is None:
        return None
    if not isinstance(value, int | float) or value < 0 or value != value:
        raise InputError(
            f"servicequotas:GetServiceQuota {code}", "Quota.Value", "a number >= 0", got=value
        )
    return float(value)


def fetch_ec2_quotas(
    client: ServiceQuotasApi, region: str, groups: Iterable[str]
) -> tuple[Quota, ...]:
    """The on-demand and spot vCPU limits of ``groups`` (``markets.quotas.AWS_GROUPS``
    names) in ``region``."""
    out: list[Quota] = []
    for group in sorted(set(groups)):
        _families, od_code, spot_code = AWS_GROUPS[group]
        for tier, code in ((Tier.ON_DEMAND, od_code), (Tier.SPOT, spot_code)):
            with aws_call("servicequotas:GetServiceQuota"):
                try:
                    resp = client.get_service_quota(ServiceCode=_SERVICE, QuotaCode=code)
                except ClientError as e:
                    if e.response.get("Error", {}).get("Code") in _ABSENT:
                        continue  # not a quota of this region
                    raise
            value = _value(resp, code)
            if value is None:
                continue
            out.append(
                Quota(
                    provider=Provider.AWS,
                    region=region,
                    group=group,
                    tier=tier,
                    limit=value,
                    unit=QuotaUnit.VCPUS,
                    code=code,
                )
            )
    return tuple(out)
