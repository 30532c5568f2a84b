"""Your bill as input: billing exports read into hourly usage per workload.

Modules: ``formats`` (FOCUS 1.x and CUR 2.0: detection by columns, the
columns as SQL, per-row checks), ``rules`` (YAML mapping rules: line ->
workload), ``scan`` (the DuckDB scan of one file), ``reader`` (``read_usage``:
validate and aggregate in DuckDB), ``locate`` (a bad line's CSV line or
Parquet row group) and ``model`` (``HourlyUsage``, the result).

Needs the ``usage`` extra (DuckDB). Must not: know prices, plan or bill
(the what-if does, ``broker.cli._usage`` converts usage to its demand).
"""

from markets.usage.model import HourlyUsage, LeftOver, UsageFile
from markets.usage.reader import read_usage
from markets.usage.rules import UNMAPPED, MappingRules, load_rules

__all__ = [
    "UNMAPPED",
    "HourlyUsage",
    "LeftOver",
    "MappingRules",
    "UsageFile",
    "load_rules",
    "read_usage",
]
