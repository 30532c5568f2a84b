"""The what-if report's content, read once from the JSON document.

Owns: ``Column``, ``Table`` and ``Section`` (what every format shows: headings,
tables of raw values with a kind per column, each with the prose that follows
it, and lines of prose) and ``sections(doc)``, which reads a
``spotfolio.whatif/1`` document (``broker.cli.whatif``'s docstring) into them,
in the report's order: as billed (``as_billed``, with a bill: the bill's own
dollars, each day reconciled, every saving against it first and on-demand
second), what is owned, what to do (``advice``, when the document has it),
the scenarios, the risk band (``risk``, when present), the stressed market,
the committed sweep, the data used, and the optimizer's reasons.
Blocks absent from the document are left out.

What to do reads ``advice`` in ``broker.whatif.advice.Advice.to_dict``'s
shape: the commitments to buy (or the line "buy no commitment"), the first
week's whole instances per pool and tier (most and mean per hour and
instance-hours, the pools of most instance-hours first; ``sections(doc,
pools=None)`` lists them all, else the first ``POOL_ROWS`` and a line
counting the rest; the hourly counts stay in the JSON), the cost per workload
and per team, and the totals reconciled (each defined, and the two equations
between them); then the risk band's one line (``risk_line``). The risk band's
own section reads ``risk`` generically (objects of P10/P50/P90).

Must not: format a number in a table (the renderers do, by ``Column.kind``;
prose lines spell theirs in whole dollars, the same in every format),
compute a figure the document does not hold (beyond the stressed total's
change against x1's), or import the computation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from broker.cli.report.money import full_usd
from broker.jsondoc import at, obj

__all__ = [
    "POOL_ROWS",
    "Cell",
    "Column",
    "Kind",
    "Section",
    "Table",
    "quantile_bands",
    "risk_line",
    "rows",
    "sections",
]

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
    notes: tuple[str, ...] = ()  # prose shown right after the table
    empty: str = "(none)"  # shown instead of a table without rows

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


# With a bill (``as_billed``), the saving against it comes first.
AS_BILLED_SAVING = Column("savings_vs_as_billed", "vs billed", "share")


def scenario_table(doc: Mapping[str, object]) -> Table:
    found = rows(doc.get("scenarios"))
    billed = any("savings_vs_as_billed" in s for s in found)
    cols: tuple[Column, ...] = SCENARIO_COLUMNS
    if billed:
        i = [c.key for c in cols].index("savings_vs_on_demand")
        cols = (*cols[:i], AS_BILLED_SAVING,
                Column("savings_vs_on_demand", "vs on-demand", "share"), *cols[i + 1:])  # fmt: skip
    out = []
    for s in found:
        tiers = obj(s.get("cost_by_tier_usd"))
        savings = (_num(s.get("savings_vs_as_billed")),) if billed else ()
        out.append((
            _cell(s.get("name")), _num(s.get("total_cost_usd")), _num(tiers.get("committed")),
            _num(tiers.get("on_demand")), _num(tiers.get("spot")), _num(s.get("work_ahead_usd")),
            *savings, _num(s.get("savings_vs_on_demand")), _num(s.get("unmet_unit_hours")),
            _num(s.get("expected_revocations")), _num(s.get("break_glass_usd")),
            _num(s.get("catch_up_usd")), _num(s.get("planned_cost_usd")),
        ))  # fmt: skip
    return Table("scenarios", "", cols, tuple(out))


_AS_BILLED_TOTALS = (
    ("effective_cost_usd", "as billed (EffectiveCost)"),
    ("billed_cost_usd", "invoiced (BilledCost)"),
    ("amortisation_usd", "amortisation (effective - billed)"),
    ("replay_usd", "the same usage at the replay's prices"),
    ("unpriced_usd", "lines the market does not price"),
)
_DAY_COLUMNS = (
    Column("day", "day"),
    Column("effective_cost_usd", "as billed", "usd"),
    Column("billed_cost_usd", "invoiced", "usd"),
    Column("amortisation_usd", "amortised", "usd"),
    Column("replay_usd", "replay", "usd"),
    Column("difference_usd", "replay - billed", "usd"),
)


def _as_billed(doc: Mapping[str, object]) -> Section | None:
    """``as_billed`` (``broker.whatif.as_billed.AsBilled.to_dict``): its
    totals, each day reconciled, and every scenario's saving against it
    first and against on-demand second."""
    ab = obj(doc.get("as_billed"))
    if not ab:
        return None
    totals = Table("as_billed", "", (Column("what", "what"), Column("usd", "USD", "usd")),
                   tuple((label, _num(ab.get(k))) for k, label in _AS_BILLED_TOTALS))  # fmt: skip
    days = Table("as_billed_days", "each day reconciled", _DAY_COLUMNS,
                 tuple(tuple(_cell(d.get(c.key)) for c in _DAY_COLUMNS)
                       for d in rows(ab.get("days"))))  # fmt: skip
    lines = ["Savings, against as-billed first and on-demand second:"]
    for s in rows(doc.get("scenarios")):
        if s.get("name") == "as_billed":
            continue
        usd, vs_billed = _num(s.get("saving_vs_as_billed_usd")), _num(s.get("savings_vs_as_billed"))
        vs_od, total = _num(s.get("savings_vs_on_demand")), _num(s.get("total_cost_usd"))
        if usd is None or vs_billed is None or vs_od is None or total is None:
            continue
        verb = "saves" if usd >= 0 else "costs"
        lines.append(f"  {s.get('name')}: {full_usd(total)}, {verb} {full_usd(abs(usd))} "
                     f"({abs(vs_billed):.1%}) against as-billed, "
                     f"{vs_od:.1%} against on-demand")  # fmt: skip
    return Section("as_billed", "As billed: the bill itself", (totals, days), tuple(lines))


def _kind_of(key: str, value: object) -> Kind:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "text"
    k = key.lower()
    if "usd" in k or k.endswith("_cost") or "saving_usd" in k:
        return "usd"
    if any(
        w in k for w in ("share", "utilisation", "utilization", "occupancy", "fraction", "coverage")
    ):
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


POOL_ROWS = 12  # first-week pools a terminal or a page of Markdown shows


def _signed(usd: float) -> str:
    return f"{'-' if usd < 0 else '+'} {full_usd(abs(usd))}"


def _buy_table(advice: Mapping[str, object]) -> Table:
    source = str(advice.get("commitments_from") or "period plan")
    cols: tuple[Column, ...] = (
            Column("instance_type", "instance type"), Column("family", "family"),
            Column("provider", "provider"), Column("region", "region"),
            Column("size", "buy"), Column("term_years", "term (y)", "amount"),
            Column("payment", "payment"), Column("obligation_usd", "obligation", "usd"),
            Column("monthly_saving_usd", "saving/mo", "usd"),
            Column("breakeven_utilisation", "break-even", "share"),
            Column("utilisation", "expected", "share"))  # fmt: skip
    found = rows(advice.get("commitments"))
    if any("upfront_usd" in c for c in found):  # the lookback rule's figures
        cols = (*cols, Column("upfront_usd", "upfront", "usd"),
                Column("hourly_usd", "hourly", "usd"),
                Column("utilisation_p10", "use P10", "share"),
                Column("utilisation_p50", "use P50", "share"),
                Column("utilisation_p90", "use P90", "share"),
                Column("net_saving_term_usd", "net/term", "usd"),
                Column("payback_month", "payback mo", "amount"),
                Column("lookback_days", "lookback d", "amount"))  # fmt: skip
    body = tuple(tuple(_cell(c.get(k.key)) for k in cols) for c in found)
    return Table("advice_commitments", f"commitments to buy ({source})", cols, body,
                 empty=f"buy no commitment ({source})")  # fmt: skip


def _rule_table(advice: Mapping[str, object]) -> Table | None:
    """The lookback rule on each scope the plan would buy: sized or refused."""
    rule = obj(advice.get("commitment_rule"))
    if not rule:
        return None
    cols = (Column("group", "scope"), Column("usage_days", "usage days", "amount"),
            Column("plan_count", "plan buys", "amount"), Column("owned", "owned", "amount"),
            Column("count_7d", "7 d", "amount"), Column("count_30d", "30 d", "amount"),
            Column("count_60d", "60 d", "amount"), Column("count", "recommended", "amount"),
            Column("reason", "refused because"))  # fmt: skip
    body: list[tuple[Cell, ...]] = []
    for r in rows(rule.get("sized")):
        by = obj(r.get("count_by_lookback_days"))
        body.append((_cell(r.get("group")), _num(r.get("usage_days")), _num(r.get("plan_count")),
                     _num(r.get("owned")), _num(by.get("7")), _num(by.get("30")),
                     _num(by.get("60")), _num(r.get("count")), None))  # fmt: skip
    for r in rows(rule.get("refused")):
        body.append((_cell(r.get("group")), _num(r.get("usage_days")), None, None, None, None,
                     None, 0, _cell(r.get("reason"))))  # fmt: skip
    notes = (f"rule: {rule.get('rule')} (AWS Cost Explorer's 7/30/60-day lookbacks).",)
    return Table("advice_lookback", "the lookback rule, per scope", cols, tuple(body), notes)


def _pool_table(advice: Mapping[str, object], limit: int | None) -> Table:
    week = obj(advice.get("first_week"))
    pools = sorted(rows(week.get("pools")), key=lambda p: -(_num(p.get("instance_hours")) or 0.0))
    cols = (Column("tier", "tier"), Column("pool_key", "pool"),
            Column("max_instances", "most", "amount"), Column("mean_instances", "mean", "amount"),
            Column("instance_hours", "inst-h", "amount"))  # fmt: skip
    shown = pools if limit is None else pools[:limit]
    # the 168 hourly counts stay in the JSON: a cell holds one number
    body = tuple(tuple(_cell(p.get(c.key)) for c in cols) for p in shown)
    heading = f"first {week.get('hours')} h, whole instances (most / mean per hour)"
    if len(shown) < len(pools):
        heading += f": the {len(shown)} pools of most instance-hours"
    more = len(pools) - len(shown)
    notes = (f"{more} more pools in --json (advice.first_week)",) if more else ()
    return Table("advice_first_week", heading, cols, body, notes=notes)


def _cost_table(advice: Mapping[str, object], key: str, label: str) -> Table:
    cols = (Column("name", label), *((Column("team", "team"),) if label == "workload" else ()),
            Column("total_usd", "billed", "usd"),
            Column("unused_commitment_usd", "unused committed", "usd"),
            Column("unmet_unit_hours", "unmet u-h", "amount"))  # fmt: skip
    body = tuple(tuple(_cell(r.get(c.key)) for c in cols) for r in rows(advice.get(key)))
    return Table(f"advice_{key}", f"cost by {label}", cols, body)


_TOTALS = (("objective_usd", "objective"), ("period_planned_usd", "period plan"),
           ("planned_usd", "planned"), ("billed_usd", "billed"))  # fmt: skip
_EQUATIONS = (("objective_less_planned", "objective", "period plan"),
              ("billed_less_planned", "billed", "planned"))  # fmt: skip


def _totals_table(advice: Mapping[str, object]) -> Table:
    rec = obj(advice.get("reconciliation"))
    defs = obj(rec.get("definitions"))
    cols = (Column("total", "total"), Column("usd", "USD", "usd"))
    body = tuple((label, _num(rec.get(key))) for key, label in _TOTALS if key in rec)
    notes = [f"{label} {_fmt(rec.get(key), 'usd')}: {defs[key]}"
             for key, label in _TOTALS if key in defs]  # fmt: skip
    for key, head, base in _EQUATIONS:
        if key in rec:
            terms = [f" {_signed(_num(p.get('usd')) or 0.0)} {p.get('what')}"
                     for p in rows(rec.get(key))]  # fmt: skip
            notes.append(f"{head} = {base}" + "".join(terms))
    return Table("advice_totals", "the totals reconciled", cols, body, notes=tuple(notes))


def risk_line(risk: Mapping[str, object]) -> str | None:
    """The risk band in one line (``None`` without one)."""
    c, u = obj(risk.get("cost_usd")), obj(risk.get("unmet_unit_hours"))
    if not c:
        return None

    def band(q: Mapping[str, object], fmt: str) -> str:
        return " / ".join(f"{k.upper()} {_fmt(q.get(k), fmt)}" for k in ("p10", "p50", "p90"))

    line = (f"risk over {risk.get('scenarios', risk.get('samples'))} sampled spot and demand "
            f"scenarios (seed {risk.get('seed')}): cost {band(c, 'usd')}")  # fmt: skip
    if u:
        line += f"; unmet {band(u, 'uh')} unit-hours"
    rank = _num(risk.get("billed_rank"))
    if rank is not None:
        line += f"; {rank:.0%} of the samples cost less than the recorded bill"
    return line


def _fmt(value: object, kind: str) -> str:
    x = _num(value)
    if x is None:
        return "-"
    return full_usd(x) if kind == "usd" else f"{x:,.1f}"


def _what_to_do(doc: Mapping[str, object], pools: int | None) -> Section | None:
    """``advice`` (``broker.whatif.advice.Advice.to_dict``'s shape) and the
    risk band's one line (module docstring)."""
    advice = obj(doc.get("advice"))
    if not advice:
        return None
    rule = _rule_table(advice)
    tables = (_buy_table(advice), *(() if rule is None else (rule,)), _pool_table(advice, pools),
              _cost_table(advice, "cost_by_workload", "workload"),
              _cost_table(advice, "cost_by_team", "team"), _totals_table(advice))  # fmt: skip
    lines = [f"no commitment for {r.get('group')}: {r.get('reason')}"
             + (f" ({r.get('days_needed')} more day(s) of usage)" if r.get("days_needed") else "")
             for r in rows(obj(advice.get("commitment_rule")).get("refused"))]  # fmt: skip
    line = risk_line(obj(doc.get("risk")))
    return Section("advice", "What to do", tables, tuple(lines) + ((line,) if line else ()))


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


def _quotas(doc: Mapping[str, object]) -> Section | None:
    q = doc.get("quota")
    if not isinstance(q, Mapping):
        return None
    table = _generic_table("quota", "keeping to the quotas", rows(q.get("scenarios")))
    return Section("quota", "What the quotas cost", (table,), _strings(q.get("lines")))


def _blocks(doc: Mapping[str, object]) -> Section | None:
    b = doc.get("blocks")
    if not isinstance(b, Mapping):
        return None
    table = _generic_table("blocks", "offered and held", rows(b.get("offered")))
    return Section("blocks", "Reserved-ahead blocks for the deadline jobs", (table,),
                   _strings(b.get("advice")))  # fmt: skip


def _strings(value: object) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def title(doc: Mapping[str, object]) -> str:
    text = (f"What-if over {doc.get('hours')} h from {doc.get('start')} "
            f"on market {doc.get('market')}")  # fmt: skip
    return text + (" (STALE market data)" if doc.get("stale") else "")


def sections(doc: Mapping[str, object], pools: int | None = POOL_ROWS) -> list[Section]:
    """The report's sections in order (module docstring); ``pools``: the
    first-week pools What to do lists (``None``: all)."""
    out: list[Section | None] = [_as_billed(doc), _owned(doc), _what_to_do(doc, pools)]
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
    out += [_risk(doc.get("risk")), _stress(doc), _sweep(doc), _quotas(doc), _blocks(doc)]
    data = _strings(doc.get("usage_summary")) + _strings(doc.get("recorded_data"))
    if data:
        out.append(Section("data", "Data used", (), data))
    reasons = _strings(doc.get("explanation"))
    if reasons:
        out.append(Section("explanation", "Spotfolio's plan, in its words", (), reasons))
    return [s for s in out if s is not None]
