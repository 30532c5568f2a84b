"""Billing export formats: which one a file is, and its columns as SQL.

Owns: ``detect`` (FOCUS 1.x or AWS CUR 2.0, judged by the column names) and
``Columns``, the SQL expressions (DuckDB dialect, over the file's own column
names) for what the usage reader needs: the charge period, the quantity in
instance-hours, whether a line is usage, which tier paid for it, the instance
type, tags, account, region, cost; and ``checks``, the per-row expectations
(column as written, expectation, SQL predicate of a bad row).

Must not: run queries or read files (``reader``), or map lines to workloads
(``rules``).

FOCUS (FinOps Open Cost and Usage Specification, 1.0 to 1.2; column names as
the spec's column definitions): ``ChargePeriodStart`` / ``ChargePeriodEnd``
(inclusive start, exclusive end), ``ConsumedQuantity`` in ``ConsumedUnit``,
``ChargeCategory`` (``Usage`` lines only), ``ChargeClass`` (``Correction``
lines are left out and counted), ``PricingCategory`` (``Dynamic`` is spot;
``Committed``, 1.0's ``Commitment-Based``, is a commitment),
``CommitmentDiscountId`` / ``Type`` / ``Status`` (a line with an id, status
``Used`` or none, ran on a commitment; ``Unused`` lines are the commitment's
idle part, reported, not usage), ``SkuPriceDetails`` (1.1+, key-value JSON),
``Tags`` (key-value JSON), ``RegionId`` (1.0 preview: ``Region``),
``SubAccountId``, ``ServiceName``, ``EffectiveCost`` / ``BilledCost`` and the
provider's ``x_`` columns.

CUR 2.0 (AWS Data Exports): ``line_item_usage_start_date`` / ``_end_date``,
``line_item_usage_amount`` with ``pricing_unit``, ``line_item_line_item_type``
(``Usage``; ``SavingsPlanCoveredUsage`` and ``DiscountedUsage`` ran on a
Savings Plan or a Reserved Instance; fees, negations, credits and taxes are
not usage), ``product_instance_type`` (else the ``product`` map's
``instance_type``, else the usage type after ``:``), ``resource_tags`` (a map;
user tags are keyed ``user_<key>``), ``line_item_usage_account_id``,
``product_region_code``, ``line_item_unblended_cost`` (a reserved or Savings
Plan covered line's effective cost from ``reservation_effective_cost`` /
``savings_plan_savings_plan_effective_cost``).

The instance type of a FOCUS line is the first of: ``SkuPriceDetails``'
``InstanceType`` (or ``x_InstanceType``, ``MachineType``); an ``x_`` column
naming the instance or machine type (``x_InstanceType``, ``x_MachineType``),
or the type after ``:`` in ``x_UsageType`` (AWS: ``BoxUsage:p3.2xlarge``); the
type named in ``ChargeDescription`` (AWS ``p3.2xlarge``, GCP ``a2-highgpu-1g``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["AWS_TYPE_RE", "GCP_TYPE_RE", "Check", "Columns", "Format", "columns_for", "detect"]

# An AWS instance type (family.size) or a GCP machine type (family-kind-n[g]),
# as named in a charge description or a usage type.
AWS_TYPE_RE = (
    r"([a-z][a-z0-9-]*[0-9][a-z0-9-]*\.(?:[0-9]*x?large|medium|small|micro|nano|metal[a-z0-9-]*))"
)
GCP_TYPE_RE = (
    r"([a-z][a-z0-9]*-(?:standard|highgpu|megagpu|ultragpu|edgegpu|highmem|highcpu)-[0-9]+g?)"
)
# Units of ConsumedUnit / pricing_unit that count time, and their hours.
_HOUR_UNITS = ("hours", "hour", "hrs", "hr", "h")
_SECOND_UNITS = ("seconds", "second", "secs", "sec", "s")


class Format(StrEnum):
    FOCUS = "FOCUS 1.x"
    CUR = "CUR 2.0"


FOCUS_REQUIRED = ("ChargePeriodStart", "ChargePeriodEnd", "ConsumedQuantity", "ConsumedUnit")
CUR_REQUIRED = (
    "line_item_usage_start_date",
    "line_item_usage_end_date",
    "line_item_usage_amount",
    "line_item_line_item_type",
)


def detect(names: list[str]) -> tuple[Format | None, tuple[str, ...]]:
    """The format a file's columns say, and the required columns it lacks
    (``None`` and FOCUS's missing ones when it is neither)."""
    have = set(names)
    cur_missing = tuple(c for c in CUR_REQUIRED if c not in have)
    if not cur_missing:
        return Format.CUR, ()
    focus_missing = tuple(c for c in FOCUS_REQUIRED if c not in have)
    if not focus_missing:
        return Format.FOCUS, ()
    if len(cur_missing) < len(CUR_REQUIRED) and len(cur_missing) < len(focus_missing):
        return None, cur_missing
    return None, focus_missing


@dataclass(frozen=True)
class Check:
    """A per-row expectation: the column as the file names it, what was
    expected, and the SQL predicate that is true on a bad row."""

    column: str
    expected: str
    bad_sql: str


@dataclass(frozen=True)
class Columns:
    """SQL expressions over one file's columns (see the module docstring).

    ``start`` / ``end`` are TIMESTAMPTZ (NULL when unparseable), ``quantity``
    DOUBLE; ``hours_per_unit`` the hours one ``quantity`` unit is (NULL for a
    unit that is not time), ``kind`` 'usage', 'unused' (an idle commitment) or
    'other'; ``tier`` 'committed', 'spot' or 'on_demand'; the rest VARCHAR."""

    format: Format
    start: str
    end: str
    quantity: str
    hours_per_unit: str
    kind: str
    tier: str
    commitment: str
    commitment_id: str
    instance_type: str
    region: str
    account: str
    project: str
    service: str
    tags: str
    cost: str
    checks: tuple[Check, ...]
    billed: str = "NULL"  # what was invoiced (FOCUS BilledCost); ``cost`` where absent

    def roles(self) -> dict[str, str]:
        return {
            "tags": self.tags,
            "account": self.account,
            "project": self.project,
            "instance_type": self.instance_type,
            "region": self.region,
            "service": self.service,
        }


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _text(types: Mapping[str, str], name: str) -> str:
    """A column as trimmed VARCHAR ('' -> NULL); NULL if the file lacks it."""
    if name not in types:
        return "NULL"
    return f"nullif(trim(CAST({_q(name)} AS VARCHAR)), '')"


def _json(types: Mapping[str, str], name: str) -> str:
    """A key-value column as JSON text, whether the file stores it as text
    (CSV, most Parquet) or as a MAP/STRUCT (CUR 2.0 Parquet)."""
    if name not in types:
        return "NULL"
    t = types[name].upper()
    if t.startswith(("MAP", "STRUCT")):
        return f"CAST(to_json({_q(name)}) AS VARCHAR)"
    return f"nullif(trim(CAST({_q(name)} AS VARCHAR)), '')"


def _time(types: Mapping[str, str], name: str) -> str:
    return f"TRY_CAST({_text(types, name)} AS TIMESTAMPTZ)"


def _number(types: Mapping[str, str], name: str) -> str:
    return f"TRY_CAST({_text(types, name)} AS DOUBLE)"


def _unit_hours(unit: str) -> str:
    hours = ", ".join(f"'{u}'" for u in _HOUR_UNITS)
    seconds = ", ".join(f"'{u}'" for u in _SECOND_UNITS)
    return (
        f"CASE WHEN lower({unit}) IN ({hours}) THEN 1.0 "
        f"WHEN lower({unit}) IN ({seconds}) THEN 1.0 / 3600 END"
    )


def _cur_effective(types: Mapping[str, str], lt: str) -> str:
    """A CUR 2.0 line's amortised cost (FOCUS's EffectiveCost): a reserved
    line's ``reservation_effective_cost``, a Savings Plan covered line's
    ``savings_plan_savings_plan_effective_cost``, else the unblended cost."""
    unblended = _first(_number(types, "line_item_unblended_cost"), "0.0")
    ri = _first(_number(types, "reservation_effective_cost"), unblended)
    sp = _first(_number(types, "savings_plan_savings_plan_effective_cost"), unblended)
    return (
        f"CASE WHEN {lt} = 'discountedusage' THEN {ri} "
        f"WHEN {lt} = 'savingsplancoveredusage' THEN {sp} ELSE {unblended} END"
    )


def _first(*exprs: str) -> str:
    real = [e for e in exprs if e != "NULL"]
    return f"coalesce({', '.join(real)})" if real else "NULL"


def _type_in(text: str) -> str:
    if text == "NULL":
        return "NULL"
    return _first(
        f"nullif(regexp_extract({text}, '{AWS_TYPE_RE}', 1), '')",
        f"nullif(regexp_extract({text}, '{GCP_TYPE_RE}', 1), '')",
    )


def _time_checks(types: Mapping[str, str], start: str, end: str) -> list[Check]:
    s, e = _time(types, start), _time(types, end)
    return [
        Check(start, "an ISO 8601 time", f"{s} IS NULL"),
        Check(end, "an ISO 8601 time", f"{e} IS NULL"),
        Check(end, f"a time after {start}", f"{e} <= {s}"),
    ]


def _quantity_checks(types: Mapping[str, str], name: str, usage: str) -> list[Check]:
    raw, num = _text(types, name), _number(types, name)
    return [
        Check(name, "a number", f"{raw} IS NOT NULL AND ({num} IS NULL OR NOT isfinite({num}))"),
        Check(name, "a quantity of at least 0 on a usage line", f"({usage}) AND {num} < 0"),
    ]


def columns_for(fmt: Format, types: Mapping[str, str]) -> Columns:
    """The expressions for a file of format ``fmt`` with ``types`` (column
    name -> DuckDB type)."""
    return _focus(types) if fmt is Format.FOCUS else _cur(types)


def _focus(types: Mapping[str, str]) -> Columns:
    lower = {n.lower(): n for n in types}
    x_type = _first(
        *(
            _text(types, lower[n])
            for n in ("x_instancetype", "x_instance_type", "x_machinetype", "x_machine_type")
            if n in lower
        ),
        *(_type_in(_text(types, lower[n])) for n in ("x_usagetype", "x_usage_type") if n in lower),
    )
    sku = _json(types, "SkuPriceDetails")
    sku_type = (
        "NULL"
        if sku == "NULL"
        # one JSON parse for the four keys (a list of paths)
        else "list_filter(json_extract_string("
        f"{sku}, ['$.InstanceType', '$.x_InstanceType', '$.MachineType', '$.x_MachineType']), "
        "lambda v: nullif(v, '') IS NOT NULL)[1]"
    )
    category = _text(types, "ChargeCategory")
    charge_class = _text(types, "ChargeClass")
    status = _text(types, "CommitmentDiscountStatus")
    commitment_id = _text(types, "CommitmentDiscountId")
    pricing = _text(types, "PricingCategory")
    unused = "FALSE" if status == "NULL" else f"coalesce(lower({status}) = 'unused', FALSE)"
    usage = "TRUE" if category == "NULL" else f"coalesce(lower({category}) = 'usage', FALSE)"
    correction = (
        "FALSE"
        if charge_class == "NULL"
        else f"coalesce(lower({charge_class}) = 'correction', FALSE)"
    )
    committed = " OR ".join(
        c
        for c in (
            f"{commitment_id} IS NOT NULL" if commitment_id != "NULL" else "",
            f"lower({pricing}) IN ('committed', 'commitment-based')" if pricing != "NULL" else "",
        )
        if c
    )
    spot = f"lower({pricing}) = 'dynamic'" if pricing != "NULL" else "FALSE"
    tier = (
        f"CASE WHEN {committed or 'FALSE'} THEN 'committed' WHEN {spot} THEN 'spot' "
        "ELSE 'on_demand' END"
    )
    project = _first(
        *(
            _text(types, lower[n])
            for n in ("x_projectid", "x_project_id", "x_project")
            if n in lower
        ),
        _text(types, "SubAccountId"),
    )
    is_usage = f"({usage} AND NOT {correction} AND NOT {unused})"
    return Columns(
        format=Format.FOCUS,
        start=_time(types, "ChargePeriodStart"),
        end=_time(types, "ChargePeriodEnd"),
        quantity=_number(types, "ConsumedQuantity"),
        hours_per_unit=_unit_hours(_text(types, "ConsumedUnit")),
        kind=f"CASE WHEN {is_usage} THEN 'usage' WHEN {usage} AND {unused} THEN 'unused' "
        "ELSE 'other' END",
        tier=tier,
        commitment=_first(
            _text(types, "CommitmentDiscountType"),
            f"CASE WHEN {committed or 'FALSE'} THEN 'commitment' END",
        ),
        commitment_id=commitment_id,
        instance_type=_first(sku_type, x_type, _type_in(_text(types, "ChargeDescription"))),
        region=_first(_text(types, "RegionId"), _text(types, "Region")),
        account=_text(types, "SubAccountId"),
        project=project,
        service=_text(types, "ServiceName"),
        tags=_json(types, "Tags"),
        cost=_first(_number(types, "EffectiveCost"), _number(types, "BilledCost"), "0.0"),
        billed=_number(types, "BilledCost"),
        checks=(
            *_time_checks(types, "ChargePeriodStart", "ChargePeriodEnd"),
            *_quantity_checks(types, "ConsumedQuantity", is_usage),
        ),
    )


def _cur(types: Mapping[str, str]) -> Columns:
    line_type = _text(types, "line_item_line_item_type")
    usage_type = _text(types, "line_item_usage_type")
    product = _json(types, "product")
    instance_type = _first(
        _text(types, "product_instance_type"),
        "NULL"
        if product == "NULL"
        else f"nullif(json_extract_string({product}, '$.instance_type'), '')",
        _type_in(usage_type),
    )
    lt = f"lower({line_type})"
    is_usage = f"coalesce({lt} IN ('usage', 'savingsplancoveredusage', 'discountedusage'), FALSE)"
    spot = _first(
        f"{usage_type} LIKE '%SpotUsage%'" if usage_type != "NULL" else "NULL",
        f"lower({_text(types, 'pricing_term')}) = 'spot'" if "pricing_term" in types else "NULL",
        "FALSE",
    )
    unit = _text(types, "pricing_unit")
    # Without pricing_unit, EC2's box and spot usage types are instance-hours.
    hours = (
        _unit_hours(unit)
        if unit != "NULL"
        else f"CASE WHEN {usage_type} SIMILAR TO '.*(Box|Spot|Dedicated)Usage.*' THEN 1.0 END"
    )
    return Columns(
        format=Format.CUR,
        start=_time(types, "line_item_usage_start_date"),
        end=_time(types, "line_item_usage_end_date"),
        quantity=_number(types, "line_item_usage_amount"),
        hours_per_unit=hours,
        kind=f"CASE WHEN {is_usage} THEN 'usage' ELSE 'other' END",
        tier=f"CASE WHEN {lt} = 'savingsplancoveredusage' OR {lt} = 'discountedusage' "
        f"THEN 'committed' WHEN {spot} THEN 'spot' ELSE 'on_demand' END",
        commitment=f"CASE WHEN {lt} = 'savingsplancoveredusage' THEN 'Savings Plan' "
        f"WHEN {lt} = 'discountedusage' THEN 'Reservation' END",
        commitment_id=_first(
            _text(types, "savings_plan_savings_plan_a_r_n"),
            _text(types, "reservation_reservation_a_r_n"),
        ),
        instance_type=instance_type,
        region=_first(_text(types, "product_region_code"), _text(types, "product_region")),
        account=_text(types, "line_item_usage_account_id"),
        project="NULL",
        service=_text(types, "line_item_product_code"),
        tags=_json(types, "resource_tags"),
        cost=_cur_effective(types, lt),
        billed=_number(types, "line_item_unblended_cost"),
        checks=(
            *_time_checks(types, "line_item_usage_start_date", "line_item_usage_end_date"),
            *_quantity_checks(types, "line_item_usage_amount", is_usage),
        ),
    )
