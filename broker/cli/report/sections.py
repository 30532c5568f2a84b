"""The what-if report's content, read once from the JSON document.

Owns: ``Column``, ``Table`` and ``Section`` (what every format shows: headings,
tables of raw values with a kind per column, and lines of prose) and
``sections(doc)``, which reads a ``spotfolio.whatif/1`` document
(``broker.cli.whatif``'s docstring) into them, in the report's order: what to
do (``advice``, when the document has it), the scenarios, the risk band
(``risk``, when present), the stressed market, the committed sweep, what is
owned, the data used, and the optimizer's reasons. Blocks absent from the
document are left out; ``advice`` and ``risk`` are read generically (lists of
lines or of objects, objects of P10/P50/P90), so the report renders them
however their producer grows them.

Must not: format a number (the renderers do, by ``Column.kind``), compute a
figure the document does not hold (beyond the stressed total's change
against x1's), or import the computation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from broker.jsondoc import at, obj

__all__ = ["Cell", "Column", "Kind", "Section", "Table", "quantile_bands", "rows", "sections"]

Kind = Literal["text", "usd", "share", "amount"]
Cell = str | float | int | None


@dataclass(frozen=True)
class Column:
    """``key``: the CSV header and JSON field; ``title``: the table's header."""

    key: str
    title: str
    kind: Kind = "text"


@dataclass(frozen=True)
class Table:
    name: str
    title: str
    columns: tuple[Column, ...]
    rows: tuple[tuple[Cell, ...], ...]

    def values(self, key: str) -> list[float]:
        """Column ``key``'s numbers, a row each (0.0 where a cell is not one)."""
        i = [c.key for c in self.columns].index(key)
        return [float(v) if isinstance(v, int | float) else 0.0 for v in (r[i] for r in self.rows)]

    def names(self) -> list[str]:
        """The first column, as text: the rows' names."""
        return [str(r[0]) for r in self.rows]


@dataclass(frozen=True)
class Section:
    key: str  # an anchor: "scenarios", "risk", ...
    heading: str
    tables: tuple[Table, ...] = ()
    lines: tuple[str, ...] = ()


def rows(value: object) -> list[Mapping[str, object]]:
    """A list of JSON objects read back (``[]`` when it is not one)."""
    return [obj(v) for v in value] if isinstance(value, list) else []


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _cell(value: object) -> Cell:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return value
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    return str(value)


SCENARIO_COLUMNS = (
    Column("name", "scenario"),
    Column("total_cost_usd", "total", "usd"),
    Column("committed_usd", "committed", "usd"),
    Column("on_demand_usd", "on-demand", "usd"),
    Column("spot_usd", "spot", "usd"),
    Column("work_ahead_usd", "carried fwd", "usd"),
    Column("savings_vs_on_demand", "saving", "share"),
    Column("unmet_unit_hours", "unmet u-h", "amount"),
    Column("expected_revocations", "revocations", "amount"),
    Column("break_glass_usd", "break-glass", "usd"),
    Column("catch_up_usd", "catch-up", "usd"),
    Column("planned_cost_usd", "planned", "usd"),
)


def scenario_table(doc: Mapping[str, object]) -> Table:
    out = []
    for s in rows(doc.get("scenarios")):
        tiers = obj(s.get("cost_by_tier_usd"))
        out.append((
            _cell(s.get("name")), _num(s.get("total_cost_usd")), _num(tiers.get("committed")),
            _num(tiers.get("on_demand")), _num(tiers.get("spot")), _num(s.get("work_ahead_usd")),
            _num(s.get("savings_vs_on_demand")), _num(s.get("unmet_unit_hours")),
            _num(s.get("expected_revocations")), _num(s.get("break_glass_usd")),
            _num(s.get("catch_up_usd")), _num(s.get("planned_cost_usd")),
        ))  # fmt: skip
    return Table("scenarios", "", SCENARIO_COLUMNS, tuple(out))


def _kind_of(key: str, value: object) -> Kind:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "text"
    k = key.lower()
    if "usd" in k or k.endswith("_cost") or "saving_usd" in k:
        return "usd"
    if any(w in k for w in ("share", "utilisation", "utilization", "occupancy", "fraction")):
        return "share"
    if k.startswith("savings") and float(value) <= 1:
        return "share"
    return "amount"


def _generic_table(name: str, title: str, items: Sequence[Mapping[str, object]]) -> Table:
    """A table of objects: the union of their keys, in first-seen order."""
    keys: list[str] = []
    for it in items:
        keys += [k for k in it if k not in keys]
    kinds: dict[str, Kind] = {}
    for k in keys:
        seen = [it.get(k) for it in items if it.get(k) is not None]
        kinds[k] = _kind_of(k, seen[0]) if seen else "text"
    cols = tuple(Column(k, k.replace("_usd", " $").replace("_", " "), kinds[k]) for k in keys)
    body = tuple(tuple(_cell(it.get(k)) for k in keys) for it in items)
    return Table(name, title, cols, body)


def _advice(value: object) -> Section | None:
    """``advice`` as lines and tables, whatever its shape (module docstring)."""
    if value is None:
        return None
    tables: list[Table] = []
    lines: list[str] = []

    def take(name: str, v: object) -> None:
        if isinstance(v, str):
            lines.append(v if not name else f"{name.replace('_', ' ')}: {v}")
        elif isinstance(v, list) and v and all(isinstance(x, Mapping) for x in v):
            tables.append(_generic_table(f"advice_{name}" if name else "advice",
                                         name.replace("_", " "), rows(v)))  # fmt: skip
        elif isinstance(v, list):
            lines.extend(str(x) for x in v)
        elif isinstance(v, Mapping):
            for k, sub in v.items():
                take(str(k) if not name else f"{name}.{k}", sub)
        elif v is not None:
            lines.append(f"{name.replace('_', ' ')}: {v}")

    take("", value)
    return Section("advice", "What to do", tuple(tables), tuple(lines))


def quantile_bands(value: object, path: str = "") -> list[tuple[str, float, float, float]]:
    """Every object holding numbers ``p10``, ``p50``, ``p90`` under ``value``,
    as (its path, P10, P50, P90): the risk band's quantities."""
    out: list[tuple[str, float, float, float]] = []
    if isinstance(value, Mapping):
        q = [_num(value.get(k, value.get(k.upper()))) for k in ("p10", "p50", "p90")]
        if all(x is not None for x in q):
            p10, p50, p90 = (float(x) for x in q if x is not None)
            out.append((path or "value", p10, p50, p90))
            return out
        for k, v in value.items():
            out += quantile_bands(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            label = str(at(v, "name") or at(v, "scenario") or i)
            out += quantile_bands(v, f"{path}.{label}" if path else label)
    return out


def _risk(value: object) -> Section | None:
    if value is None:
        return None
    bands = quantile_bands(value)
    tables = []
    if bands:
        body = tuple((p, lo, mid, hi) for p, lo, mid, hi in bands)
        usd = tuple(r for r in body if "usd" in r[0] or "cost" in r[0])
        other = tuple(r for r in body if r not in usd)
        parts: tuple[tuple[str, str, tuple[tuple[str, float, float, float], ...], Kind], ...] = (
            ("risk_usd", "cost", usd, "usd"),
            ("risk_other", "other quantities", other, "amount"),
        )
        for name, title, part, kind in parts:
            if part:
                cols = (Column("quantity", "quantity"), Column("p10", "P10", kind),
                        Column("p50", "P50", kind), Column("p90", "P90", kind))  # fmt: skip
                tables.append(Table(name, title, cols, part))
    lines = [f"{k.replace('_', ' ')}: {v}" for k, v in obj(value).items()
             if isinstance(v, str | int | float) and not isinstance(v, bool)]  # fmt: skip
    return Section("risk", "Risk band (P10 / P50 / P90)", tuple(tables), tuple(lines))


def _stress(doc: Mapping[str, object]) -> Section | None:
    stress = obj(doc.get("stress"))
    found = rows(stress.get("scenarios"))
    if not found:
        return None
    cols = (Column("name", "scenario"), Column("x1_total_cost_usd", "x1 total", "usd"),
            Column("stressed_total_cost_usd", "stressed", "usd"),
            Column("change", "change", "share"),
            Column("x1_unmet_unit_hours", "x1 unmet u-h", "amount"),
            Column("stressed_unmet_unit_hours", "stressed unmet", "amount"),
            Column("x1_expected_revocations", "x1 revocations", "amount"),
            Column("stressed_expected_revocations", "stressed revocations", "amount"))  # fmt: skip
    body = tuple(tuple(_cell(_change(r) if c.key == "change" else r.get(c.key)) for c in cols)
                 for r in found)  # fmt: skip
    return Section("stress", f"Stressed market ({stress.get('label')}) beside x1",
                   (Table("stress", "", cols, body),))  # fmt: skip


def _change(row: Mapping[str, object]) -> float | None:
    """The stressed total against x1's, as a fraction (``+0.12``: 12 % dearer)."""
    x1, st = _num(row.get("x1_total_cost_usd")), _num(row.get("stressed_total_cost_usd"))
    return None if x1 is None or st is None or x1 <= 0 else st / x1 - 1


def _sweep(doc: Mapping[str, object]) -> Section | None:
    if "committed_sweep" not in doc:
        return None
    cols = (Column("share_of_peak", "share", "share"), Column("group", "group"),
            Column("instances", "instances", "amount"),
            Column("obligation_usd", "obligation", "usd"),
            Column("total_cost_usd", "total", "usd"),
            Column("delta_usd", "vs previous", "usd"), Column("verdict", "verdict"),
            Column("marginal_occupancy", "occupancy of added", "share"))  # fmt: skip
    body = tuple(tuple(_cell(p.get(c.key)) for c in cols) for p in rows(doc["committed_sweep"]))
    lines = []
    be, od_be = _num(doc.get("breakeven_occupancy")), _num(doc.get("breakeven_occupancy_on_demand"))
    if be is not None:
        line = f"A committed unit pays off when used more than {be:.0%} of hours"
        if od_be is not None:
            line += (f" against the spot/on-demand mix ({od_be:.0%} against on-demand alone); "
                     "the verdict is the billed totals'")  # fmt: skip
        lines.append(line + ".")
    return Section("sweep", "Committed sweep (share of peak serving demand)",
                   (Table("committed_sweep", "", cols, body),), tuple(lines))  # fmt: skip


def _owned(doc: Mapping[str, object]) -> Section | None:
    if "owned" not in doc:
        return None
    tables = [_generic_table("owned", "owned", rows(doc["owned"]))]
    buys = rows(doc.get("next_buy"))
    if buys:
        tables.append(_generic_table("next_buy", "buy next", buys))
    lines = () if buys else ("Buy next: nothing (what is owned covers what pays).",)
    return Section("owned", "Given what is owned", tuple(tables), lines)


def _strings(value: object) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def title(doc: Mapping[str, object]) -> str:
    text = (f"What-if over {doc.get('hours')} h from {doc.get('start')} "
            f"on market {doc.get('market')}")  # fmt: skip
    return text + (" (STALE market data)" if doc.get("stale") else "")


def sections(doc: Mapping[str, object]) -> list[Section]:
    """The report's sections in order (module docstring)."""
    out: list[Section | None] = [_advice(doc.get("advice"))]
    warn = [f"warning: {b.get('scenario')}: budgets leave {b.get('unmet_unit_hours')} "
            f"unit-hours unmet ({'; '.join(_strings(b.get('budgets')))}): not a saving"
            for b in rows(doc.get("budget_unmet"))]  # fmt: skip
    if any(isinstance(s.get("work_ahead_usd"), int | float) and s["work_ahead_usd"]
           for s in rows(doc.get("scenarios"))):  # fmt: skip
        warn.append(
            "total = committed + on-demand + spot - carried fwd: training and batch "
            "work done ahead of this period's share of a job, billed to the next."
        )
    out.append(Section("scenarios", "Scenarios, billed on the actual demand and market",
                       (scenario_table(doc),), tuple(warn)))  # fmt: skip
    out += [_risk(doc.get("risk")), _stress(doc), _sweep(doc), _owned(doc)]
    data = _strings(doc.get("usage_summary")) + _strings(doc.get("recorded_data"))
    if data:
        out.append(Section("data", "Data used", (), data))
    reasons = _strings(doc.get("explanation"))
    if reasons:
        out.append(Section("explanation", "Spotfolio's plan, in its words", (), reasons))
    return [s for s in out if s is not None]
