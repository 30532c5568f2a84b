"""Billing exports generated from the specs' column definitions, for tests.

``write_focus`` writes a FOCUS export (1.0: instance type in ``x_UsageType``
and the charge description, ``PricingCategory`` ``Commitment-Based``; 1.2:
``SkuPriceDetails`` too, ``Committed``), ``write_cur`` an AWS CUR 2.0 export,
each as CSV (optionally gzipped) or Parquet, generated inside DuckDB so a few
million lines take seconds. Every ``Fleet`` entry runs ``instances``
instances every hour of ``hours`` from ``START``, one line per instance and
hour (as AWS's hourly exports do); a day's tax line, a storage line and an
idle commitment line are added to every export, so readers must tell usage
from the rest.

Columns: FOCUS 1.2 column definitions (focus.finops.org, "Columns") with the
AWS ``x_`` columns of its FOCUS export; CUR 2.0: AWS Data Exports' table
dictionary ("line item", "pricing", "product", "resource tags" columns).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import duckdb

START = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Fleet:
    instance_type: str
    instances: int
    tier: str = "on_demand"  # on_demand | spot | committed
    workload: str | None = None  # the `workload` tag
    team: str | None = None  # the `team` tag
    region: str = "us-east-1"
    account: str = "111122223333"
    usd_per_hour: float = 3.06


def _fleet_table(con: duckdb.DuckDBPyConnection, fleet: list[Fleet]) -> None:
    con.execute(
        "CREATE OR REPLACE TEMP TABLE fleet (id INT, itype VARCHAR, n INT, tier VARCHAR, "
        "workload VARCHAR, team VARCHAR, region VARCHAR, account VARCHAR, price DOUBLE)"
    )
    con.executemany(
        "INSERT INTO fleet VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            [
                i,
                f.instance_type,
                f.instances,
                f.tier,
                f.workload,
                f.team,
                f.region,
                f.account,
                f.usd_per_hour,
            ]
            for i, f in enumerate(fleet)
        ],
    )


def _copy(con: duckdb.DuckDBPyConnection, select: str, path: Path, row_group: int) -> Path:
    lit = "'" + str(path).replace("'", "''") + "'"
    name = path.name.lower()
    if name.endswith(".parquet"):
        opts = f"FORMAT PARQUET, ROW_GROUP_SIZE {row_group}"
    elif name.endswith(".gz"):
        opts = "FORMAT CSV, HEADER, COMPRESSION GZIP"
    else:
        opts = "FORMAT CSV, HEADER"
    con.execute(f"COPY ({select}) TO {lit} ({opts})")
    return path


def _tags_json(workload: str, team: str) -> str:
    # FOCUS Tags: a key-value JSON object; keys only where the tag applies.
    return (
        f"CASE WHEN {workload} IS NULL AND {team} IS NULL THEN '{{}}' "
        f"WHEN {team} IS NULL THEN '{{\"workload\": \"' || {workload} || '\"}}' "
        f"WHEN {workload} IS NULL THEN '{{\"team\": \"' || {team} || '\"}}' "
        f'ELSE \'{{"workload": "\' || {workload} || \'", "team": "\' || {team} || \'"}}\' END'
    )


def write_focus(
    path: Path, fleet: list[Fleet], hours: int, *, version: str = "1.2", row_group: int = 122_880
) -> Path:
    """A FOCUS export of ``fleet`` over ``hours`` (CSV, .csv.gz or .parquet by suffix)."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET enable_progress_bar = false")
    _fleet_table(con, fleet)
    v12 = version != "1.0"
    committed = "'Committed'" if v12 else "'Commitment-Based'"
    fmt = "strftime({}, '%Y-%m-%dT%H:%M:%SZ')"
    t0 = f"TIMESTAMPTZ '{START.isoformat()}'"
    sku = (
        '\'{"InstanceType": "\' || itype || \'", "OperatingSystem": "Linux"}\' AS SkuPriceDetails,'
        if v12
        else ""
    )
    usage = f"""
        SELECT
            CAST(round(price * CASE tier WHEN 'spot' THEN 0.3 WHEN 'committed' THEN 0.6
                 ELSE 1 END, 6) AS DOUBLE) AS BilledCost,
            '999988887777' AS BillingAccountId, 'Example Org' AS BillingAccountName,
            'USD' AS BillingCurrency,
            {fmt.format(t0)} AS BillingPeriodStart,
            {fmt.format(t0 + " + INTERVAL 31 DAY")} AS BillingPeriodEnd,
            'Usage' AS ChargeCategory, CAST(NULL AS VARCHAR) AS ChargeClass,
            '$' || price || ' per On Demand Linux ' || itype || ' Instance Hour'
                AS ChargeDescription,
            'Usage-Based' AS ChargeFrequency,
            {fmt.format(t0 + " + h * INTERVAL 1 HOUR")} AS ChargePeriodStart,
            {fmt.format(t0 + " + (h + 1) * INTERVAL 1 HOUR")} AS ChargePeriodEnd,
            CASE WHEN tier = 'committed' THEN 'Usage' END AS CommitmentDiscountCategory,
            CASE WHEN tier = 'committed' THEN 'arn:aws:savingsplans::' || account
                 || ':savingsplan/sp-' || id END AS CommitmentDiscountId,
            CASE WHEN tier = 'committed' THEN 'Used' END AS CommitmentDiscountStatus,
            CASE WHEN tier = 'committed' THEN 'Savings Plan' END AS CommitmentDiscountType,
            1.0 AS ConsumedQuantity, 'Hours' AS ConsumedUnit,
            price AS ListUnitPrice,
            CAST(round(price * CASE tier WHEN 'spot' THEN 0.3 WHEN 'committed' THEN 0.6
                 ELSE 1 END, 6) AS DOUBLE) AS EffectiveCost,
            CASE tier WHEN 'spot' THEN 'Dynamic' WHEN 'committed' THEN {committed}
                 ELSE 'Standard' END AS PricingCategory,
            1.0 AS PricingQuantity, 'Hours' AS PricingUnit,
            'AWS' AS ProviderName, 'AWS' AS PublisherName, 'AWS' AS InvoiceIssuerName,
            region AS RegionId, region || 'a' AS AvailabilityZone,
            'i-' || lpad(CAST(id AS VARCHAR), 4, '0') || lpad(CAST(k AS VARCHAR), 8, '0')
                AS ResourceId,
            'Instance' AS ResourceType, 'Compute' AS ServiceCategory,
            'Amazon Elastic Compute Cloud' AS ServiceName,
            'SKU' || id AS SkuId, {sku}
            account AS SubAccountId, 'team account' AS SubAccountName,
            {_tags_json("workload", "team")} AS Tags,
            CASE tier WHEN 'spot' THEN 'USE1-SpotUsage:' ELSE 'USE1-BoxUsage:' END || itype
                AS x_UsageType,
            'AmazonEC2' AS x_ServiceCode
        FROM (SELECT f.*, unnest(range(f.n)) AS k FROM fleet f), range({int(hours)}) t(h)
    """
    extra = f"""
        SELECT 0.25 AS BilledCost, '999988887777', 'Example Org', 'USD',
            {fmt.format(t0)}, {fmt.format(t0 + " + INTERVAL 31 DAY")},
            cat, NULL, descr, 'Usage-Based',
            {fmt.format(t0 + " + d * INTERVAL 1 DAY")},
            {fmt.format(t0 + " + (d + 1) * INTERVAL 1 DAY")},
            NULL, cid, cstatus, ctype, qty, unit, 0.1, 0.25, pcat, qty, unit,
            'AWS', 'AWS', 'AWS', 'us-east-1', NULL, rid, rtype, 'Storage', svc,
            'SKUX', {"'{}'," if v12 else ""} '111122223333', 'team account', '{{}}',
            utype, 'AmazonEC2'
        FROM range({max(1, hours // 24)}) t(d),
        (VALUES
            ('Tax', 'Sales tax', NULL, NULL, NULL, NULL, NULL, 'Standard', NULL,
             NULL, 'Tax', NULL),
            ('Usage', 'EBS gp3 storage', NULL, NULL, NULL, 10.0, 'GB-Mo', 'Standard',
             'vol-1', 'Volume', 'Amazon Elastic Block Store', 'EBS:VolumeUsage.gp3'),
            ('Usage', 'Unused savings plan', 'arn:sp/idle', 'Unused', 'Savings Plan', 24.0,
             'Hours', {committed}, NULL, NULL, 'Amazon Elastic Compute Cloud', 'SP:idle')
        ) x(cat, descr, cid, cstatus, ctype, qty, unit, pcat, rid, rtype, svc, utype)
    """
    # the idle commitment spans a day: 24 of its hours
    return _copy(con, f"{usage} UNION ALL {extra}", path, row_group)


def write_cur(path: Path, fleet: list[Fleet], hours: int, *, row_group: int = 122_880) -> Path:
    """A CUR 2.0 export of ``fleet`` (CSV: tags as JSON text; Parquet: a map)."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET enable_progress_bar = false")
    _fleet_table(con, fleet)
    parquet = path.name.lower().endswith(".parquet")
    t0 = f"TIMESTAMPTZ '{START.isoformat()}'"
    fmt = "strftime({}, '%Y-%m-%dT%H:%M:%SZ')"
    if parquet:
        tags = (
            "map_from_entries(list_filter([{'key': 'user_workload', 'value': workload}, "
            "{'key': 'user_team', 'value': team}], lambda x: x.value IS NOT NULL))"
        )
    else:
        tags = _tags_json("workload", "team").replace('"workload"', '"user_workload"')
        tags = tags.replace('"team"', '"user_team"')
    usage = f"""
        SELECT
            'i-' || lpad(CAST(id AS VARCHAR), 4, '0') || lpad(CAST(k AS VARCHAR), 8, '0')
                AS line_item_resource_id,
            {fmt.format(t0 + " + h * INTERVAL 1 HOUR")} AS line_item_usage_start_date,
            {fmt.format(t0 + " + (h + 1) * INTERVAL 1 HOUR")} AS line_item_usage_end_date,
            1.0 AS line_item_usage_amount,
            CASE tier WHEN 'committed' THEN 'SavingsPlanCoveredUsage' ELSE 'Usage' END
                AS line_item_line_item_type,
            CASE tier WHEN 'spot' THEN 'USE1-SpotUsage:' ELSE 'USE1-BoxUsage:' END || itype
                AS line_item_usage_type,
            'AmazonEC2' AS line_item_product_code,
            account AS line_item_usage_account_id,
            CAST(round(price * CASE tier WHEN 'spot' THEN 0.3 ELSE 1 END, 6) AS DOUBLE)
                AS line_item_unblended_cost,
            'Hrs' AS pricing_unit,
            CASE tier WHEN 'spot' THEN 'Spot' ELSE 'OnDemand' END AS pricing_term,
            itype AS product_instance_type,
            region AS product_region_code,
            {tags} AS resource_tags
        FROM (SELECT f.*, unnest(range(f.n)) AS k FROM fleet f), range({int(hours)}) t(h)
    """
    empty = "map_from_entries([{'key': 'x', 'value': 'y'}][1:0])" if parquet else "'{}'"
    extra = f"""
        SELECT NULL, {fmt.format(t0 + " + d * INTERVAL 1 DAY")},
            {fmt.format(t0 + " + (d + 1) * INTERVAL 1 DAY")}, amt, ltype, utype,
            'AmazonEC2', '111122223333', cost, unit, NULL, NULL, 'us-east-1', {empty}
        FROM range({max(1, hours // 24)}) t(d),
        (VALUES ('Tax', 'Tax', 0.0, 1.5, NULL),
                ('SavingsPlanRecurringFee', 'ComputeSP:1yrNoUpfront', 24.0, 20.0, 'Hrs'),
                ('SavingsPlanNegation', 'USE1-BoxUsage:p3.2xlarge', 1.0, -3.06, 'Hrs'))
            x(ltype, utype, amt, cost, unit)
    """
    return _copy(con, f"{usage} UNION ALL {extra}", path, row_group)
