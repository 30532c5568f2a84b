"""A small FOCUS 1.2 CSV bill written line by line, for tests whose right
answer is worked out by hand: every ``Line`` runs ``count`` instances of one
type every hour of its days, one bill line an hour (``ConsumedQuantity`` the
instance-hours), at the effective and billed dollars per instance-hour it
states. A reserved instance paid all upfront bills $0 an hour and costs its
amortised rate (EffectiveCost); an unused commitment hour is a line of its own.

Columns: FOCUS 1.2 (focus.finops.org, "Columns"), the few the reader needs.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

START = datetime(2026, 1, 1, tzinfo=UTC)
COLUMNS = (
    "ChargePeriodStart",
    "ChargePeriodEnd",
    "ChargeCategory",
    "ConsumedQuantity",
    "ConsumedUnit",
    "PricingCategory",
    "CommitmentDiscountId",
    "CommitmentDiscountType",
    "CommitmentDiscountStatus",
    "RegionId",
    "ServiceName",
    "SkuPriceDetails",
    "BilledCost",
    "EffectiveCost",
    "Tags",
    "ProviderName",
    "SubAccountId",
)


@dataclass(frozen=True)
class Line:
    instance_type: str
    count: float
    effective_usd: float  # per instance-hour
    billed_usd: float | None = None  # per instance-hour; None: the effective price
    tier: str = "on_demand"  # on_demand | spot | reserved | savings_plan
    first_day: int = 0
    days: int = 3
    region: str = "us-east-1"
    tags: dict[str, str] = field(default_factory=dict)
    commitment_id: str | None = None
    unused: bool = False  # an unused commitment line (CommitmentDiscountStatus Unused)


def _z(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def write_bill(path: Path, lines: list[Line]) -> Path:
    """``lines`` as one FOCUS CSV at ``path``."""
    kinds = {"reserved": "Reservation", "savings_plan": "Savings Plan"}
    pricing = {"spot": "Dynamic", "reserved": "Committed", "savings_plan": "Committed"}
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for ln in lines:
            billed = ln.effective_usd if ln.billed_usd is None else ln.billed_usd
            committed = ln.tier in kinds
            for h in range(ln.first_day * 24, (ln.first_day + ln.days) * 24):
                t = START + timedelta(hours=h)
                w.writerow(
                    [
                        _z(t),
                        _z(t + timedelta(hours=1)),
                        "Usage",
                        ln.count,
                        "Hours",
                        pricing.get(ln.tier, "Standard"),
                        (ln.commitment_id or f"ri-{ln.instance_type}") if committed else "",
                        kinds.get(ln.tier, ""),
                        ("Unused" if ln.unused else "Used") if committed else "",
                        ln.region,
                        "Amazon Elastic Compute Cloud",
                        json.dumps({"InstanceType": ln.instance_type}),
                        round(ln.count * billed, 6),
                        round(ln.count * ln.effective_usd, 6),
                        json.dumps(ln.tags),
                        "AWS",
                        "111122223333",
                    ]
                )
    return path
