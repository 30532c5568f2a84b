"""What a bill says of each commitment it names: reservations, savings plans, CUDs.

Owns: ``meta_select`` (per file, one row per commitment id, instance type and
region: the commitment's own columns and what ran on it), ``HOURLY_SQL`` (its
instance-hours per hour, from the reader's grouped lines) and
``bill_commitments`` (those rows as ``model.BillCommitment`` values), and
``to_owned`` (one as ``markets.commitments.OwnedCommitment``, what the planner
takes as sunk).

Columns read. FOCUS 1.x: ``CommitmentDiscountId``, ``CommitmentDiscountType``,
``CommitmentDiscountCategory`` (``Usage``: instances; ``Spend``: dollars),
``CommitmentDiscountName``, ``CommitmentDiscountStatus`` (``Unused`` lines are
its idle part), ``ProviderName``, ``EffectiveCost``; FOCUS has no term, start
or expiry: unknown from a FOCUS bill. CUR 2.0: ``reservation_reservation_a_r_n``,
``reservation_start_time`` / ``_end_time``, ``reservation_number_of_reservations``,
``reservation_effective_cost``, ``pricing_lease_contract_length``,
``pricing_purchase_option``; ``savings_plan_savings_plan_a_r_n``,
``savings_plan_offering_type`` (``ComputeSavingsPlans``,
``EC2InstanceSavingsPlans``), ``savings_plan_start_time`` / ``_end_time``,
``savings_plan_purchase_term``, ``savings_plan_payment_option``,
``savings_plan_region``, ``savings_plan_instance_type_family``,
``savings_plan_savings_plan_rate``, ``savings_plan_savings_plan_effective_cost``
and the ``SavingsPlanRecurringFee`` lines (the commitment per hour).

Must not: run queries itself (the reader does, in its connection), price or
decide anything.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from markets.clock import ensure_utc
from markets.commitments import CommitmentKind, OwnedCommitment, PaymentOption
from markets.model import Provider
from markets.usage.formats import Columns, Format
from markets.usage.model import BillCommitment

__all__ = ["HOURLY_SQL", "bill_commitments", "meta_select", "to_owned"]

_META = (
    "ctype",
    "category",
    "cname",
    "provider",
    "cstart",
    "cend",
    "term",
    "payment",
    "family",
    "scope_region",
    "rate",
    "count",
)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _col(types: Mapping[str, str], name: str) -> str:
    if name not in types:
        return "NULL"
    return f"nullif(trim(CAST({_q(name)} AS VARCHAR)), '')"


def _num(types: Mapping[str, str], name: str) -> str:
    return "NULL" if name not in types else f"TRY_CAST({_col(types, name)} AS DOUBLE)"


def _first(*exprs: str) -> str:
    real = [e for e in exprs if e != "NULL"]
    return f"coalesce({', '.join(real)})" if real else "NULL"


def _meta(fmt: Format, types: Mapping[str, str]) -> dict[str, str]:
    if fmt is Format.FOCUS:
        return {
            "ctype": _col(types, "CommitmentDiscountType"),
            "category": _col(types, "CommitmentDiscountCategory"),
            "cname": _col(types, "CommitmentDiscountName"),
            "provider": _first(_col(types, "ProviderName"), _col(types, "PublisherName")),
            **{k: "NULL" for k in ("cstart", "cend", "term", "payment", "family")},
            "scope_region": "NULL",
            "rate": "NULL",
            "count": "NULL",
            "eff": _first(_num(types, "EffectiveCost"), _num(types, "BilledCost"), "0.0"),
        }
    sp = _col(types, "savings_plan_savings_plan_a_r_n")
    is_sp = "FALSE" if sp == "NULL" else f"{sp} IS NOT NULL"
    return {
        "ctype": f"CASE WHEN {is_sp} THEN "
        f"{_first(_col(types, 'savings_plan_offering_type'), repr('Savings Plan'))} "
        "ELSE 'Reserved Instance' END",
        "category": f"CASE WHEN {is_sp} THEN 'Spend' ELSE 'Usage' END",
        "cname": "NULL",
        "provider": "'AWS'",
        "cstart": _first(
            _col(types, "savings_plan_start_time"), _col(types, "reservation_start_time")
        ),
        "cend": _first(_col(types, "savings_plan_end_time"), _col(types, "reservation_end_time")),
        "term": _first(
            _col(types, "savings_plan_purchase_term"), _col(types, "pricing_lease_contract_length")
        ),
        "payment": _first(
            _col(types, "savings_plan_payment_option"), _col(types, "pricing_purchase_option")
        ),
        "family": _col(types, "savings_plan_instance_type_family"),
        "scope_region": _col(types, "savings_plan_region"),
        "rate": _num(types, "savings_plan_savings_plan_rate"),
        "count": _num(types, "reservation_number_of_reservations"),
        "eff": _first(
            _num(types, "reservation_effective_cost"),
            _num(types, "savings_plan_savings_plan_effective_cost"),
            _num(types, "line_item_unblended_cost"),
            "0.0",
        ),
    }


def meta_select(fmt: Format, types: Mapping[str, str], cols: Columns, scan: str) -> str | None:
    """One row per (commitment id, instance type, region) of the file read by
    ``scan``: its columns (``_META``), the usage on it, its idle part, its fee
    lines' cost and hours, and the hours it was seen; ``None`` when the file
    names no commitment."""
    if cols.commitment_id == "NULL":
        return None
    m = _meta(fmt, types)
    texts = ", ".join(f"max(m_{k}) AS {k}" for k in _META)
    inner = ", ".join(f"{m[k]} AS m_{k}" for k in _META)
    return f"""
        SELECT cid, instance_type, region, {texts},
               coalesce(sum(ih) FILTER (kind = 'usage'), 0) AS used_ih,
               coalesce(sum(eff) FILTER (kind = 'usage'), 0) AS used_cost,
               coalesce(sum(ih) FILTER (kind = 'unused'), 0) AS unused_ih,
               coalesce(sum(eff) FILTER (kind = 'unused'), 0) AS unused_cost,
               coalesce(sum(cost) FILTER (kind = 'other'), 0) AS fee_cost,
               coalesce(sum(epoch(te) - epoch(ts)) FILTER (kind = 'other'), 0) / 3600
                   AS fee_hours,
               min(ts) AS first_seen, max(te) AS last_seen
        FROM (
            SELECT {cols.commitment_id} AS cid, {cols.kind} AS kind,
                   {cols.start} AS ts, {cols.end} AS te,
                   {cols.quantity} * ({cols.hours_per_unit}) AS ih,
                   CASE WHEN {cols.kind} = 'usage' THEN {cols.instance_type} END
                       AS instance_type,
                   CASE WHEN {cols.kind} = 'usage' THEN {cols.region} END AS region,
                   coalesce({m["eff"]}, 0.0) AS eff, coalesce({cols.cost}, 0.0) AS cost,
                   {inner}
            FROM {scan}
        )
        WHERE cid IS NOT NULL AND ts IS NOT NULL AND te IS NOT NULL
        GROUP BY ALL
    """


# The instance-hours on (or idle on) each commitment per hour, from the
# reader's grouped lines ``g`` (charge periods spread by overlap).
HOURLY_SQL = """
    WITH c AS (
        SELECT cid, ts, te, sum(ih) AS ih FROM g
        WHERE cid IS NOT NULL AND timed AND kind IN ('usage', 'unused')
        GROUP BY ALL
    ), h AS (
        SELECT *, unnest(range(date_trunc('hour', ts), te, INTERVAL 1 HOUR)) AS hour FROM c
    )
    SELECT cid, max(ih) AS peak FROM (
        SELECT cid, hour, sum(ih * (epoch(least(hour + INTERVAL 1 HOUR, te))
                                    - epoch(greatest(hour, ts))) / (epoch(te) - epoch(ts))) AS ih
        FROM h GROUP BY ALL
    ) GROUP BY cid
"""


def _kind(provider: str, text: str, category: str | None) -> tuple[str | None, bool]:
    """The planner's kind of a commitment from the bill's words, and whether it
    is a spend-based CUD (planned as instances)."""
    t = text.lower().replace(" ", "").replace("_", "")
    spend = (category or "").lower() == "spend"
    if provider == Provider.GCP.value:
        return CommitmentKind.CUD.value, spend
    if "savingsplan" in t or "sp:" in t:
        if "sagemaker" in t or "database" in t:
            return None, False  # covers no EC2 instance
        ec2 = "ec2instance" in t or "instancesavings" in t
        return (
            CommitmentKind.SAVINGS_PLAN_EC2 if ec2 else CommitmentKind.SAVINGS_PLAN_COMPUTE
        ).value, False
    if "reserv" in t:
        return CommitmentKind.RESERVED.value, False
    if spend:
        return CommitmentKind.SAVINGS_PLAN_COMPUTE.value, False
    if category is not None and category.lower() == "usage":
        return CommitmentKind.RESERVED.value, False
    return None, False


def _provider(text: str | None, cid: str) -> str:
    t = (text or "").lower()
    if "google" in t or "gcp" in t or cid.startswith("projects/"):
        return Provider.GCP.value
    return Provider.AWS.value


def _term(text: str | None, start: datetime | None, end: datetime | None) -> int | None:
    if text:
        m = re.search(r"([13])\s*(?:yr|year|y\b)", text.lower())
        if m:
            return int(m.group(1))
    if start is not None and end is not None:
        years = round((end - start).days / 365)
        return years if years in (1, 3) else None
    return None


def _time(value: object) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return ensure_utc(value)
    try:
        return ensure_utc(datetime.fromisoformat(str(value).replace("Z", "+00:00")))
    except ValueError:
        return None


_PAYMENT = {
    "noupfront": PaymentOption.NO_UPFRONT,
    "partialupfront": PaymentOption.PARTIAL_UPFRONT,
    "allupfront": PaymentOption.ALL_UPFRONT,
}


def _payment(text: str | None) -> str | None:
    if not text:
        return None
    p = _PAYMENT.get(re.sub(r"[^a-z]", "", text.lower()))
    return None if p is None else p.value


def bill_commitments(
    rows: Sequence[Mapping[str, Any]], peaks: Mapping[str, float]
) -> tuple[BillCommitment, ...]:
    """The commitments of ``rows`` (``meta_select``'s, every file) with the
    hourly ``peaks`` (``HOURLY_SQL``), one value per id, by id."""
    by: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        by.setdefault(str(r["cid"]), []).append(r)
    out = []
    for cid in sorted(by):
        rs = by[cid]

        def top(key: str, rs: list[Mapping[str, Any]] = rs) -> Any:
            vals = [r[key] for r in rs if r[key] is not None]
            return max(vals, key=str) if vals else None

        covered: dict[tuple[str, str], tuple[float, float, float]] = {}
        for r in rs:
            if r["instance_type"] is None or not r["used_ih"]:
                continue
            k = (str(r["instance_type"]), str(r["region"] or ""))
            ih, cost, rate = covered.get(k, (0.0, 0.0, 0.0))
            covered[k] = (
                ih + float(r["used_ih"]),
                cost + float(r["used_cost"]),
                max(rate, float(r["rate"] or 0.0)),
            )
        provider = _provider(top("provider"), cid)
        billed_as = " / ".join(str(x) for x in (top("ctype"), top("cname")) if x) or "commitment"
        kind, spend = _kind(provider, billed_as, top("category"))
        first = min(ensure_utc(r["first_seen"]) for r in rs)
        last = max(ensure_utc(r["last_seen"]) for r in rs)
        used_ih = sum(float(r["used_ih"]) for r in rs)
        used_cost = sum(float(r["used_cost"]) for r in rs)
        unused_ih = sum(float(r["unused_ih"]) for r in rs)
        unused_cost = sum(float(r["unused_cost"]) for r in rs)
        fee_cost = sum(float(r["fee_cost"]) for r in rs)
        fee_hours = sum(float(r["fee_hours"]) for r in rs)
        seen = max((last - first).total_seconds() / 3600.0, 1.0)
        main = max(covered, key=lambda k: covered[k][0]) if covered else None
        itype, region = main if main is not None else (None, None)
        scope_region = top("scope_region")
        count = 0
        usd_per_hour = 0.0
        if kind is not None and kind.startswith("savings_plan"):
            usd_per_hour = (
                fee_cost / fee_hours if fee_hours > 0 else (used_cost + unused_cost) / seen
            )
            region = scope_region if kind == CommitmentKind.SAVINGS_PLAN_EC2.value else None
            if kind == CommitmentKind.SAVINGS_PLAN_EC2.value and region is None and main:
                region = main[1] or None
            itype = None
        else:
            stated = top("count")
            count = round(float(stated)) if stated else round(peaks.get(cid, 0.0))
        family = top("family")
        if family is None and kind == CommitmentKind.SAVINGS_PLAN_EC2.value and main:
            family = main[0].split(".")[0]
        start, end = _time(top("cstart")), _time(top("cend"))
        rates = tuple(
            (t, r, (v[2] or (v[1] / v[0] if v[0] > 0 else 0.0)))
            for (t, r), v in sorted(covered.items())
        )
        out.append(
            BillCommitment(
                id=cid,
                provider=provider,
                kind=kind,
                billed_as=billed_as,
                category=top("category"),
                region=region or None,
                instance_type=itype,
                family=family,
                count=count,
                usd_per_hour=usd_per_hour,
                rates=rates,
                term_years=_term(top("term"), start, end),
                start=start,
                end=end,
                payment=_payment(top("payment")),
                first_seen=first,
                last_seen=last,
                used_instance_hours=used_ih,
                used_cost_usd=used_cost,
                unused_instance_hours=unused_ih,
                unused_cost_usd=unused_cost
                + (max(0.0, fee_cost - used_cost) if fee_hours > 0 else 0.0),
                covered=tuple((t, r, v[0]) for (t, r), v in sorted(covered.items())),
                spend_based=spend,
            )
        )
    return tuple(out)


def commitment_key(cid: str) -> str:
    """The id a commitment goes by across sources: an ARN's or a resource
    path's last part (``arn:...:reserved-instances/abc`` -> ``abc``)."""
    return cid.rsplit("/", 1)[-1].strip()


def to_owned(c: BillCommitment, end_if_unknown: datetime) -> OwnedCommitment | None:
    """``c`` as an owned commitment (``None`` when its kind or scope is not one
    the planner models). An expiry the bill does not state is
    ``end_if_unknown``; a start it does not state, the first hour it is seen."""
    if c.kind is None:
        return None
    kind = CommitmentKind(c.kind)
    start = c.start or c.first_seen
    end = c.end or end_if_unknown
    if end <= start:
        end = start + timedelta(hours=1)
    if kind.is_savings_plan:
        if c.usd_per_hour <= 0:
            return None
        if kind is CommitmentKind.SAVINGS_PLAN_EC2 and (c.region is None or c.family is None):
            return None
    elif c.instance_type is None or c.region is None or c.count <= 0:
        return None
    return OwnedCommitment(
        id=c.id,
        provider=Provider(c.provider),
        kind=kind,
        start=start,
        end=end,
        payment=PaymentOption(c.payment) if c.payment else PaymentOption.NO_UPFRONT,
        region=c.region,
        instance_type=None if kind.is_savings_plan else c.instance_type,
        family=c.family,
        count=0 if kind.is_savings_plan else c.count,
        usd_per_hour=round(c.usd_per_hour, 6) if kind.is_savings_plan else 0.0,
        rates=c.rates if kind.is_savings_plan else (),
    )
