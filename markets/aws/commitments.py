"""Commitments the AWS account already owns: reserved instances and Savings Plans.

Owns: ``AwsCommitments`` (reads EC2 ``DescribeReservedInstances`` per region
and Savings Plans ``DescribeSavingsPlans`` + ``DescribeSavingsPlanRates``)
and the translation of their replies into ``markets.commitments``' values
(``OwnedCommitment``; ``SavingsPlanRate`` for what a plan charges per type).

Must not: price, plan or buy anything; retry (botocore's retry handler does,
``markets.aws.sdk.client_config``); hold a client it was not handed (tests
pass botocore ``Stubber`` clients: moto 5.2 implements neither
``DescribeReservedInstances`` nor the Savings Plans API).

Reply quirks: ``OfferingType`` is ``"No Upfront"`` / ``"Partial Upfront"`` /
``"All Upfront"`` (older RIs say ``"Heavy Utilization"`` etc.: all billed
hourly, read as no upfront); a regional RI has no ``AvailabilityZone``. Savings
Plans answer in strings: ``commitment`` and ``rate`` are decimal dollars,
``start``/``end`` ISO times; ``savingsPlanType`` is ``Compute`` or
``EC2Instance`` (``SageMaker`` and database plans do not cover EC2: skipped).
Only ``active`` commitments are returned.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from markets.aws.errors import aws_call
from markets.clock import ensure_utc
from markets.commitments import CommitmentKind, OwnedCommitment, PaymentOption
from markets.errors import InputError
from markets.model import Provider

__all__ = [
    "AwsCommitments",
    "Ec2CommitmentsApi",
    "SavingsPlanRate",
    "SavingsPlansApi",
]

_PAYMENT = {
    "no upfront": PaymentOption.NO_UPFRONT,
    "partial upfront": PaymentOption.PARTIAL_UPFRONT,
    "all upfront": PaymentOption.ALL_UPFRONT,
}
_SP_KIND = {
    "compute": CommitmentKind.SAVINGS_PLAN_COMPUTE,
    "ec2instance": CommitmentKind.SAVINGS_PLAN_EC2,
}


class Ec2CommitmentsApi(Protocol):
    """The EC2 client method read here (a boto3 EC2 client fits)."""

    def describe_reserved_instances(self, **kwargs: Any) -> Mapping[str, Any]: ...


class SavingsPlansApi(Protocol):
    """The Savings Plans client methods read here (a boto3 client fits)."""

    def describe_savings_plans(self, **kwargs: Any) -> Mapping[str, Any]: ...

    def describe_savings_plan_rates(self, **kwargs: Any) -> Mapping[str, Any]: ...


@dataclass(frozen=True, slots=True)
class SavingsPlanRate:
    """What one Savings Plan charges for one instance type in one region."""

    savings_plan_id: str
    instance_type: str
    region: str
    usd_per_hour: float


def _time(value: object, source: str, field: str) -> datetime:
    if isinstance(value, datetime):
        return ensure_utc(value)
    try:
        return ensure_utc(datetime.fromisoformat(str(value).replace("Z", "+00:00")))
    except ValueError:
        raise InputError(source, field, "an ISO 8601 time", got=value) from None


def _dollars(value: object, source: str, field: str) -> float:
    try:
        x = float(str(value))
    except ValueError:
        x = math.nan
    if not math.isfinite(x) or x < 0:
        raise InputError(source, field, "a decimal dollar amount >= 0", got=value)
    return x


class AwsCommitments:
    """Reads what the account owns. ``ec2`` per region; ``savings_plans``
    (a global API: one client) may be ``None`` to skip Savings Plans."""

    def __init__(
        self, ec2: Mapping[str, Ec2CommitmentsApi], savings_plans: SavingsPlansApi | None = None
    ) -> None:
        self._ec2 = ec2
        self._sp = savings_plans

    def reserved_instances(self) -> list[OwnedCommitment]:
        """Active reserved instances, one value per reservation."""
        out: list[OwnedCommitment] = []
        source = "aws ec2:DescribeReservedInstances"
        for region, client in sorted(self._ec2.items()):
            with aws_call("ec2:DescribeReservedInstances"):
                reply = client.describe_reserved_instances(
                    Filters=[{"Name": "state", "Values": ["active"]}]
                )
            for i, ri in enumerate(reply.get("ReservedInstances", [])):
                field = f"ReservedInstances[{i}]"
                if str(ri.get("State", "active")) != "active":
                    continue
                offering = str(ri.get("OfferingType", "")).lower()
                out.append(
                    OwnedCommitment(
                        id=str(ri["ReservedInstancesId"]),
                        provider=Provider.AWS,
                        kind=CommitmentKind.RESERVED,
                        start=_time(ri.get("Start"), source, f"{field}.Start"),
                        end=_time(ri.get("End"), source, f"{field}.End"),
                        payment=_PAYMENT.get(offering, PaymentOption.NO_UPFRONT),
                        region=region,
                        instance_type=str(ri["InstanceType"]),
                        count=int(ri.get("InstanceCount", 0)),
                    )
                )
        return out

    def savings_plans(self) -> list[OwnedCommitment]:
        """Active Compute and EC2 Instance Savings Plans."""
        sp_api = self._sp
        if sp_api is None:
            return []
        source = "aws savingsplans:DescribeSavingsPlans"
        out: list[OwnedCommitment] = []
        for i, sp in enumerate(
            self._pages(
                "savingsplans:DescribeSavingsPlans",
                lambda **kw: sp_api.describe_savings_plans(**kw),
                "savingsPlans",
                {"states": ["active"]},
            )
        ):
            kind = _SP_KIND.get(str(sp.get("savingsPlanType", "")).lower())
            if kind is None:
                continue
            field = f"savingsPlans[{i}]"
            ec2_sp = kind is CommitmentKind.SAVINGS_PLAN_EC2
            out.append(
                OwnedCommitment(
                    id=str(sp["savingsPlanId"]),
                    provider=Provider.AWS,
                    kind=kind,
                    start=_time(sp.get("start"), source, f"{field}.start"),
                    end=_time(sp.get("end"), source, f"{field}.end"),
                    payment=_PAYMENT.get(
                        str(sp.get("paymentOption", "")).lower(), PaymentOption.NO_UPFRONT
                    ),
                    region=str(sp["region"]) if ec2_sp and sp.get("region") else None,
                    family=str(sp["ec2InstanceFamily"]) if ec2_sp else None,
                    usd_per_hour=_dollars(sp.get("commitment"), source, f"{field}.commitment"),
                )
            )
        return out

    def rates(self, savings_plan_ids: Sequence[str]) -> list[SavingsPlanRate]:
        """Linux shared-tenancy EC2 rates of each plan, per type and region."""
        sp_api = self._sp
        if sp_api is None:
            return []
        source = "aws savingsplans:DescribeSavingsPlanRates"
        out: list[SavingsPlanRate] = []
        for plan_id in savings_plan_ids:
            rows = self._pages(
                "savingsplans:DescribeSavingsPlanRates",
                lambda **kw: sp_api.describe_savings_plan_rates(**kw),
                "searchResults",
                {
                    "savingsPlanId": plan_id,
                    "filters": [
                        {"name": "productDescription", "values": ["Linux/UNIX"]},
                        {"name": "tenancy", "values": ["shared"]},
                        {"name": "productType", "values": ["EC2"]},
                    ],
                },
            )
            for i, row in enumerate(rows):
                props = {str(p.get("name")): str(p.get("value")) for p in row.get("properties", [])}
                if "instanceType" not in props or "region" not in props:
                    continue
                out.append(
                    SavingsPlanRate(
                        plan_id,
                        props["instanceType"],
                        props["region"],
                        _dollars(row.get("rate"), source, f"searchResults[{i}].rate"),
                    )
                )
        return out

    def owned(self) -> list[OwnedCommitment]:
        """Every active commitment: reserved instances, then Savings Plans."""
        return [*self.reserved_instances(), *self.savings_plans()]

    def owned_with_rates(self) -> list[OwnedCommitment]:
        """``owned``, each Savings Plan carrying its own rates per (type,
        region) (``OwnedCommitment.rates``: the planner prices the plan's
        cover with them instead of the catalog's rule)."""
        owned = self.owned()
        plans = [c.id for c in owned if c.kind.is_savings_plan]
        by_plan: dict[str, list[tuple[str, str, float]]] = {}
        for r in self.rates(plans) if plans else []:
            by_plan.setdefault(r.savings_plan_id, []).append(
                (r.instance_type, r.region, r.usd_per_hour)
            )
        return [
            dataclasses.replace(c, rates=tuple(by_plan.get(c.id, ())))
            if c.kind.is_savings_plan
            else c
            for c in owned
        ]

    @staticmethod
    def _pages(
        operation: str, call: Any, key: str, request: Mapping[str, Any]
    ) -> list[Mapping[str, Any]]:
        """All pages of a ``nextToken``-paginated Savings Plans call."""
        rows: list[Mapping[str, Any]] = []
        token: str | None = None
        for _ in range(1000):  # a page holds up to 1,000 rows: far beyond any account
            kwargs = dict(request) if token is None else {**request, "nextToken": token}
            with aws_call(operation):
                reply = call(**kwargs)
            rows.extend(reply.get(key, []))
            token = reply.get("nextToken") or None
            if token is None:
                break
        return rows
