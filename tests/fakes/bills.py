"""Golden bills: one account's GPU fleet over N days, with a known right answer.

``golden(start, days)`` makes the lines of one account in us-east-1, tagged
``workload`` and ``team``; ``write_focus_bill`` writes them as FOCUS 1.2 CSV
(or Parquet), ``write_cur_bill`` as CUR 2.0 Parquet (or CSV). What is in it,
and so what a reader must find (``Truth``):

- ``web`` (team ``chat``): g5.xlarge serving, 12-22 instances by the hour of
  day, every hour; 8 of them on a 1-year no-upfront reserved instance
  (``RI_ID``), the rest on-demand.
- ``finetune`` (team ``research``): 4 x p4d.24xlarge on spot for 7 days from
  day 8 of every 30, at a spot price that moves by the hour (``spot_price``).
- ``nightly`` (team ``data``): 6 x p3.2xlarge from 01:00 to 07:00 UTC; 3 of
  them on a 1-year Compute Savings Plan (``SP_ID``, ``SP_USD_PER_HOUR``
  committed: idle outside the night, billed as unused).

FOCUS has no column for a commitment's term or expiry (they are unknown from
the bill); CUR 2.0 has them (``reservation_end_time``, ``savings_plan_end_time``,
``savings_plan_purchase_term``). Lines are one per (hour, workload, tier) with
the count of instances as the quantity.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

ACCOUNT = "111122223333"
REGION = "us-east-1"
RI_ID = f"arn:aws:ec2:{REGION}:{ACCOUNT}:reserved-instances/ri-g5-0001"
SP_ID = f"arn:aws:savingsplans::{ACCOUNT}:savingsplan/sp-compute-0001"
RI_COUNT = 8
RI_RATE = 0.63  # effective USD per g5.xlarge instance-hour (1y no upfront)
G5_OD = 1.006
P3_OD = 3.06
P4D_OD = 32.7726
SP_RATE = round(P3_OD * 0.72, 4)  # the plan's rate for p3.2xlarge
SP_COVERED = 3
SP_USD_PER_HOUR = round(SP_COVERED * SP_RATE, 4)
BURST_DAY, BURST_DAYS, CYCLE_DAYS = 8, 7, 30
NIGHT = range(1, 7)
START = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Truth:
    """What the bill says, for tests to check a reader against."""

    start: datetime
    hours: int
    ri_end: datetime
    sp_end: datetime
    effective_cost_usd: float
    spot_hours: int  # hours with p4d spot usage


def serving_count(hour: int) -> int:
    """g5.xlarge instances of ``web`` in hour ``hour`` of the day: 12-22."""
    return 17 + round(5 * math.sin(2 * math.pi * (hour - 6) / 24))


def spot_price(h: int) -> float:
    """The p4d.24xlarge spot price in the bill's hour ``h``."""
    return round(9.8 + 0.9 * math.sin(h / 7.0), 4)


def bursting(h: int) -> bool:
    day = (h // 24) % CYCLE_DAYS
    return BURST_DAY <= day < BURST_DAY + BURST_DAYS


def golden(start: datetime = START, days: int = 14) -> tuple[pd.DataFrame, Truth]:
    """The bill's lines (one frame, the generator's own columns) and its truth."""
    rows: list[dict[str, object]] = []

    def add(
        h: int,
        workload: str,
        team: str,
        itype: str,
        tier: str,
        n: float,
        cost: float,
        cid: str | None = None,
        status: str | None = None,
        rate: float = 0.0,
    ) -> None:
        rows.append(
            {
                "h": h,
                "workload": workload,
                "team": team,
                "itype": itype,
                "tier": tier,
                "n": n,
                "cost": round(cost, 6),
                "cid": cid,
                "status": status,
                "rate": rate,
            }
        )

    for h in range(days * 24):
        at = start + timedelta(hours=h)
        n = serving_count(at.hour)
        add(
            h,
            "web",
            "chat",
            "g5.xlarge",
            "ri",
            RI_COUNT,
            RI_COUNT * RI_RATE,
            RI_ID,
            "Used",
            RI_RATE,
        )
        add(h, "web", "chat", "g5.xlarge", "on_demand", n - RI_COUNT, (n - RI_COUNT) * G5_OD)
        if bursting(h):
            add(h, "finetune", "research", "p4d.24xlarge", "spot", 4, 4 * spot_price(h))
        if at.hour in NIGHT:
            add(
                h,
                "nightly",
                "data",
                "p3.2xlarge",
                "sp",
                SP_COVERED,
                SP_USD_PER_HOUR,
                SP_ID,
                "Used",
                SP_RATE,
            )
            add(h, "nightly", "data", "p3.2xlarge", "on_demand", 3, 3 * P3_OD)
        else:  # the plan's commitment idle this hour
            add(h, "", "", "p3.2xlarge", "sp_unused", 0, SP_USD_PER_HOUR, SP_ID, "Unused")
    frame = pd.DataFrame(rows)
    truth = Truth(
        start=start,
        hours=days * 24,
        ri_end=start + timedelta(days=200),
        sp_end=start + timedelta(days=300),
        effective_cost_usd=round(float(frame["cost"].sum()), 2),
        spot_hours=int(sum(bursting(h) for h in range(days * 24))),
    )
    return frame, truth


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _write(frame: pd.DataFrame, path: Path, tags_map: str | None = None) -> Path:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register("bill", frame)
    lit = "'" + str(path).replace("'", "''") + "'"
    opts = "FORMAT PARQUET" if path.name.endswith(".parquet") else "FORMAT CSV, HEADER"
    select = "SELECT * FROM bill"
    if tags_map is not None:
        select = f"SELECT * REPLACE ({tags_map} AS resource_tags) FROM bill"
    con.execute(f"COPY ({select}) TO {lit} ({opts})")
    con.close()
    return path


def write_focus_bill(path: Path, start: datetime = START, days: int = 14) -> Truth:
    """The golden bill as a FOCUS 1.2 export (CSV, or Parquet by suffix)."""
    lines, truth = golden(start, days)
    out = []
    records: list[Any] = list(lines.itertuples())
    for r in records:
        t0 = start + timedelta(hours=int(r.h))
        committed = r.tier in ("ri", "sp", "sp_unused")
        ri = r.tier == "ri"
        unused = r.tier == "sp_unused"
        tags = {} if unused else {"workload": r.workload, "team": r.team}
        desc = f"{r.itype} {'Spot' if r.tier == 'spot' else 'On Demand'} Linux Instance Hour"
        out.append(
            {
                "BilledCost": 0.0 if ri else r.cost,
                "BillingAccountId": ACCOUNT,
                "BillingCurrency": "USD",
                "ChargeCategory": "Usage",
                "ChargeClass": None,
                "ChargeDescription": desc,
                "ChargeFrequency": "Usage-Based",
                "ChargePeriodStart": _iso(t0),
                "ChargePeriodEnd": _iso(t0 + timedelta(hours=1)),
                "CommitmentDiscountCategory": ("Usage" if ri else "Spend") if committed else None,
                "CommitmentDiscountId": r.cid,
                "CommitmentDiscountName": (
                    None if not committed else "g5.xlarge reserved" if ri else "ComputeSavingsPlans"
                ),
                "CommitmentDiscountStatus": r.status,
                "CommitmentDiscountType": (
                    None if not committed else "Reserved Instance" if ri else "Savings Plan"
                ),
                "ConsumedQuantity": None if unused else float(r.n),
                "ConsumedUnit": "Hours",
                "EffectiveCost": r.cost,
                "ListUnitPrice": {"g5.xlarge": G5_OD, "p3.2xlarge": P3_OD, "p4d.24xlarge": P4D_OD}[
                    r.itype
                ],
                "PricingCategory": (
                    "Committed" if committed else "Dynamic" if r.tier == "spot" else "Standard"
                ),
                "PricingQuantity": 1.0 if unused else float(r.n),
                "PricingUnit": "Hours",
                "ProviderName": "AWS",
                "RegionId": REGION,
                "AvailabilityZone": f"{REGION}a",
                "ServiceName": "Amazon Elastic Compute Cloud",
                "ServiceCategory": "Compute",
                "SkuPriceDetails": json.dumps({"InstanceType": r.itype}),
                "SubAccountId": ACCOUNT,
                "Tags": json.dumps(tags),
                "x_UsageType": ("USE1-SpotUsage:" if r.tier == "spot" else "USE1-BoxUsage:")
                + str(r.itype),
            }
        )
    _write(pd.DataFrame(out), path)
    return truth


def write_cur_bill(path: Path, start: datetime = START, days: int = 14) -> Truth:
    """The golden bill as a CUR 2.0 export (Parquet, tags a map; or CSV)."""
    lines, truth = golden(start, days)
    out = []
    records: list[Any] = list(lines.itertuples())
    for r in records:
        t0 = start + timedelta(hours=int(r.h))
        ri, sp, idle = r.tier == "ri", r.tier == "sp", r.tier == "sp_unused"
        if idle:
            continue  # CUR states the commitment on its fee lines (below)
        line_type = "DiscountedUsage" if ri else "SavingsPlanCoveredUsage" if sp else "Usage"
        od = {"g5.xlarge": G5_OD, "p3.2xlarge": P3_OD, "p4d.24xlarge": P4D_OD}[r.itype]
        out.append(
            {
                "line_item_line_item_type": line_type,
                "line_item_usage_start_date": _iso(t0),
                "line_item_usage_end_date": _iso(t0 + timedelta(hours=1)),
                "line_item_usage_amount": float(r.n),
                "line_item_usage_type": (
                    "USE1-SpotUsage:" if r.tier == "spot" else "USE1-BoxUsage:"
                )
                + str(r.itype),
                "line_item_product_code": "AmazonEC2",
                "line_item_usage_account_id": ACCOUNT,
                "line_item_unblended_cost": 0.0 if ri else float(r.n) * od if sp else r.cost,
                "pricing_unit": "Hrs",
                "pricing_term": "Spot" if r.tier == "spot" else "Reserved" if ri else "OnDemand",
                "pricing_lease_contract_length": "1yr" if ri else None,
                "pricing_purchase_option": "No Upfront" if ri else None,
                "product_instance_type": r.itype,
                "product_region_code": REGION,
                "reservation_reservation_a_r_n": RI_ID if ri else None,
                "reservation_effective_cost": r.cost if ri else None,
                "reservation_start_time": _iso(truth.ri_end - timedelta(days=365)) if ri else None,
                "reservation_end_time": _iso(truth.ri_end) if ri else None,
                "reservation_number_of_reservations": float(RI_COUNT) if ri else None,
                "savings_plan_savings_plan_a_r_n": SP_ID if sp else None,
                "savings_plan_savings_plan_rate": SP_RATE if sp else None,
                "savings_plan_savings_plan_effective_cost": r.cost if sp else None,
                "savings_plan_start_time": _iso(truth.sp_end - timedelta(days=365)) if sp else None,
                "savings_plan_end_time": _iso(truth.sp_end) if sp else None,
                "savings_plan_offering_type": "ComputeSavingsPlans" if sp else None,
                "savings_plan_purchase_term": "1yr" if sp else None,
                "savings_plan_payment_option": "No Upfront" if sp else None,
                "savings_plan_region": None,
                "savings_plan_instance_type_family": None,
                "resource_tags": json.dumps({"user_workload": r.workload, "user_team": r.team}),
            }
        )
    # the plan's hourly fee: its commitment, used or not
    for h in range(days * 24):
        t0 = start + timedelta(hours=h)
        out.append(
            {
                **{k: None for k in out[0]},
                "line_item_line_item_type": "SavingsPlanRecurringFee",
                "line_item_usage_start_date": _iso(t0),
                "line_item_usage_end_date": _iso(t0 + timedelta(hours=1)),
                "line_item_usage_amount": 1.0,
                "pricing_unit": "Hrs",
                "line_item_usage_type": "ComputeSP:1yrNoUpfront",
                "line_item_product_code": "ComputeSavingsPlans",
                "line_item_usage_account_id": ACCOUNT,
                "line_item_unblended_cost": SP_USD_PER_HOUR,
                "savings_plan_savings_plan_a_r_n": SP_ID,
                "savings_plan_end_time": _iso(truth.sp_end),
                "savings_plan_offering_type": "ComputeSavingsPlans",
                "savings_plan_purchase_term": "1yr",
                "resource_tags": "{}",
            }
        )
    frame = pd.DataFrame(out)
    for c in frame.columns:
        if frame[c].isna().all():
            frame[c] = frame[c].astype("string")
    tags = (
        "CAST(json(resource_tags) AS MAP(VARCHAR, VARCHAR))"
        if path.name.endswith(".parquet")
        else None
    )
    _write(frame, path, tags)
    return truth
