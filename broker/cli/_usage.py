"""``whatif --usage``: a bill's hourly usage as the what-if's demand and workloads.

Owns: ``usage_inputs`` (read the exports with ``markets.usage``, convert
instance-hours to the planner's reference units with the market's instance
types, and give the same ``DemandSet`` a ``--demand`` file gives, plus the
workloads it plans) and ``UsageInputs``, which also carries what the bill
said beyond demand: usage already on commitments, unmapped usage, usage of
types the market does not offer, idle commitments and non-usage lines, for
the output.

Each usage workload becomes a serving workload (an hourly curve that must be
met, the only hourly-curve class), acceptable on the types it ran on that the
market offers; its demand in an hour is ``instances x units x throughput``,
the throughput the catalog's per-GPU factor (1.0 for a type it does not list),
stated as the workload's factor so the planner counts it the same way. With
``--policies``, every usage workload must be a serving workload of that file
(its contract then comes from the file).

Must not: plan or bill (``broker.whatif``), or read files itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd

from broker.cli._infer import Inference, infer
from broker.cli._owned import OwnedSource
from broker.planning.demand import DemandSet
from markets.catalog import CATALOG, throughput_factor
from markets.errors import InputError
from markets.model import InstanceType
from markets.usage import HourlyUsage, MappingRules, load_rules, read_usage
from policies.workloads.spec import WorkloadClass, WorkloadSet, parse_workloads

__all__ = ["UsageInputs", "usage_inputs", "usage_window"]


@dataclass(frozen=True, eq=False)
class UsageInputs:
    """The bill as the what-if's inputs, and what it said beyond them."""

    usage: HourlyUsage
    demand: DemandSet
    workloads: WorkloadSet
    covered_unit_hours: Mapping[str, float]  # per workload: ran on commitments already bought
    unit_hours: Mapping[str, float]  # per workload, the whole bill
    unplannable: Mapping[str, float] = field(default_factory=dict)  # type -> instance-hours
    # what is owned and where each came from (broker.cli._owned; the bill's
    # own commitments are ``usage.commitments``)
    owned_sources: tuple[OwnedSource, ...] = ()
    inferences: tuple[Inference, ...] = ()  # each workload's class, from its shape

    def to_dict(self) -> dict[str, object]:
        u = self.usage
        return {
            "source": u.source,
            "mapped_by": u.mapped_by,
            "files": [
                {"path": f.path, "format": f.format, "lines": f.lines,
                 "usage_lines": f.usage_lines}
                for f in u.files
            ],
            "start": u.start.isoformat(),
            "hours": u.hours,
            "workloads": {
                n: {"unit_hours": round(v, 3),
                    "covered_unit_hours": round(self.covered_unit_hours.get(n, 0.0), 3),
                    "instance_types": u.instance_types(n),
                    "from": u.names.get(n, n)}
                for n, v in self.unit_hours.items()
            },
            "instance_hours_by_tier": {k: round(v, 3) for k, v in u.by_tier().items()},
            "covered_instance_hours_by_commitment": {
                k: round(v, 3) for k, v in u.by_commitment().items()
            },
            "unmapped_instance_hours": {k: round(v, 3) for k, v in u.unmapped().items()},
            "unplannable_instance_hours": {k: round(v, 3) for k, v in self.unplannable.items()},
            "unused_commitment_hours": {
                k: round(v, 3) for k, v in u.unused_commitment_hours.items()
            },
            "inference": [i.to_dict() for i in self.inferences],
            "commitments": [c.to_dict() for c in u.commitments],
            "owned_sources": [o.to_dict() for o in self.owned_sources],
            "left_over": [
                {"what": x.what, "lines": x.lines, "hours": round(x.hours, 3),
                 "cost_usd": round(x.cost_usd, 2)}
                for x in u.left_over
            ],
        }  # fmt: skip

    def lines(self) -> list[str]:
        """The bill in a few lines, for the text output."""
        u = self.usage
        tiers = u.by_tier()
        total = sum(tiers.values()) or 1.0
        out = [
            f"usage: {u.source}, {sum(f.usage_lines for f in u.files):,} usage lines in "
            f"{len(u.files)} file(s) ({', '.join(sorted({f.format for f in u.files}))}), "
            f"{u.hours} h from {u.start.isoformat()}; workloads by {u.mapped_by}",
            "  instance-hours: "
            + ", ".join(f"{k} {v:,.0f} ({v / total:.0%})" for k, v in tiers.items()),
        ]
        for n, v in self.unit_hours.items():
            cov = self.covered_unit_hours.get(n, 0.0)
            out.append(
                f"  {n}: {v:,.0f} unit-hours, {cov:,.0f} already on commitments "
                f"({', '.join(u.instance_types(n))})"
            )
        if u.unmapped():
            out.append(
                f"  unmapped (no rule matched, planned as {u.unmatched!r}): "
                + ", ".join(f"{k} {v:,.0f} instance-hours" for k, v in u.unmapped().items())
            )
        if self.unplannable:
            out.append(
                "  not planned (the market does not offer the type): "
                + ", ".join(f"{k} {v:,.0f} instance-hours" for k, v in self.unplannable.items())
            )
        for i in self.inferences:
            out.append("  inferred: " + i.line())
        for o in self.owned_sources:
            out.append("  owned: " + _owned_line(o))
        for k, v in u.unused_commitment_hours.items():
            out.append(f"  idle commitment ({k}): {v:,.0f} hours unused")
        for x in u.left_over:
            if x.what != "unused commitment":
                out.append(f"  left out, {x.what}: {x.lines:,} lines, ${x.cost_usd:,.2f}")
        return out


def _owned_line(o: OwnedSource) -> str:
    """One owned commitment: its scope, rate, term, expiry and where they came from."""
    b = o.bill
    if b is None:
        return f"{o.id} (from {o.scope_from})"
    if b.kind is not None and b.kind.startswith("savings_plan"):
        scope = f"{b.kind} ${b.usd_per_hour:,.2f}/h" + (
            f" {b.family} {b.region}" if b.family else ""
        )
    else:
        scope = f"{b.kind or b.billed_as} {b.count} x {b.instance_type} {b.region}"
        if b.rates:
            scope += f" at ${b.rates[0][2]:,.4f}/h"
    term = "term unknown" if b.term_years is None else f"{b.term_years}-year"
    end = {
        "unknown": "expiry unknown (not in the bill; --account or --owned says)",
        "bill": f"expires {b.end:%Y-%m-%d}" if b.end else "",
        "account": "expiry from the account",
        "--owned": "as --owned says",
    }[o.expiry_from]
    used = b.utilisation
    return (
        f"{b.id}: {scope}, {term}, {end}; used {used:.0%} in the bill"
        if used is not None
        else f"{b.id}: {scope}, {term}, {end}"
    ) + ("" if o.planned else " (not planned: a kind the planner does not model)")


def _factor(instance_type: str) -> float:
    return throughput_factor(instance_type) if instance_type in CATALOG else 1.0


def usage_inputs(
    path: Path,
    rules: Path | None,
    instance_types: Sequence[InstanceType],
    policies: WorkloadSet | None,
    policies_source: str = "--policies",
    *,
    start: datetime | None = None,
    days: int = 30,
) -> UsageInputs:
    """The bill at ``path`` (file or directory) as demand and workloads; see
    the module docstring. ``instance_types``: the market's."""
    mapping = load_rules(rules) if rules is not None else None
    usage = read_usage(path, mapping)
    offered = {t.name: t for t in instance_types}
    index = usage.index
    serving: dict[str, pd.Series] = {}
    covered: dict[str, float] = {}
    totals: dict[str, float] = {}
    accepted: dict[str, list[str]] = {}
    unplannable: dict[str, float] = {}
    for name in usage.workloads():
        units = np.zeros(usage.hours)
        cov = np.zeros(usage.hours)
        types = []
        for t in usage.instance_types(name):
            if t not in offered:
                unplannable[t] = unplannable.get(t, 0.0) + float(
                    usage.instance_hours(name, t).sum()
                )
                continue
            per = offered[t].units * _factor(t)
            units += usage.instance_hours(name, t) * per
            cov += usage.covered_instance_hours(name, t) * per
            types.append(t)
        if not types:
            continue
        serving[name] = pd.Series(units, index=index, name=name, dtype=float)
        covered[name] = float(cov.sum())
        totals[name] = float(units.sum())
        accepted[name] = types
    if not serving:
        raise InputError(
            str(path),
            None,
            "usage of instance types the market offers",
            got=f"only {', '.join(sorted(unplannable))}",
        )
    begin, used, _ = usage_window(usage, start, days)
    first = 0 if begin is None else int((pd.Timestamp(begin) - index[0]) // pd.Timedelta(hours=1))
    window = slice(max(0, first), max(0, first) + used * 24)
    f = usage.frame
    teams = {**usage.teams, **_teams(mapping)}
    said = _said(mapping)
    inferences = []
    for name, series in serving.items():
        rows = f[f["workload"] == name]
        ih = float(rows["instance_hours"].sum()) or 1.0
        spot = float(rows.loc[rows["tier"] == "spot", "instance_hours"].sum()) / ih
        physical = sum(usage.instance_hours(name, t) * offered[t].units for t in accepted[name])
        found = infer(
            name, series.to_numpy(dtype=float), window, spot,
            sorted({str(r) for r in f["region"].dropna()}),
            sorted({offered[t].provider.value for t in accepted[name]}),
            teams.get(name),
        )  # fmt: skip
        found = replace(found, peak_units=int(np.ceil(np.max(physical) - 1e-9)))
        inferences.append(_overridden(found, said.get(name, {}), used * 24))
    if policies is not None:
        workloads = policies
        known = {w.name for w in policies.of_class(WorkloadClass.SERVING)}
        for name in serving:
            if name not in known:
                raise InputError(
                    str(path),
                    f"workload {name}",
                    f"a serving workload of {policies_source} (add it there, or map the "
                    "usage to one with --usage-rules)",
                )
    else:
        workloads = _workloads(accepted, inferences)
        serving = {i.name: serving[i.name] for i in inferences if i.workload_class == "serving"}
    demand = DemandSet(serving=serving, index=index, source=str(path))
    return UsageInputs(usage, demand, workloads, covered, totals, unplannable,
                       inferences=tuple(inferences))  # fmt: skip


_GLOB = set("*?[")


def _teams(mapping: MappingRules | None) -> dict[str, str]:
    """Each workload's team, where a rule maps to it by one literal ``team``
    tag (``tags: {team: chat}``); a glob or two teams name none."""
    out: dict[str, set[str]] = {}
    for rule in () if mapping is None else mapping.rules:
        team = rule.tags.get("team")
        if team is not None and not _GLOB & set(team):
            out.setdefault(rule.workload, set()).add(team)
    return {w: next(iter(t)) for w, t in out.items() if len(t) == 1}


_SAID = ("workload_class", "deadline_hours", "team", "regions")


def _said(mapping: MappingRules | None) -> dict[str, dict[str, object]]:
    """Per workload, what its rules say of it (``class``, ``deadline_hours``,
    ``team``, ``regions``): the first rule naming the workload that says each."""
    out: dict[str, dict[str, object]] = {}
    for rule in () if mapping is None else mapping.rules:
        got = out.setdefault(rule.workload, {})
        for key in _SAID:
            v = getattr(rule, key)
            if v is not None and key not in got:
                got[key] = v
    return out


def _overridden(found: Inference, said: Mapping[str, object], hours: int) -> Inference:
    """``found`` with what the rules say over it, the reason saying so."""
    if not said:
        return found
    cls = str(said.get("workload_class", found.workload_class))
    deadline: float | None = None
    release = 0.0
    if cls != "serving":
        d = said.get("deadline_hours", found.deadline_hours)
        deadline = float(d) if isinstance(d, int | float) else float(hours)
        # the burst's first hour, unless the rule's deadline falls before it
        release = found.release_hours if found.release_hours < deadline else 0.0
    regions = said.get("regions")
    team = said.get("team", found.team)
    keys = ", ".join(k.replace("workload_", "") for k in _SAID if k in said)
    return replace(
        found,
        workload_class=cls,
        deadline_hours=deadline,
        release_hours=release,
        recurring=found.recurring if cls == found.workload_class else False,
        regions=tuple(str(r) for r in regions) if isinstance(regions, list) else found.regions,
        team=None if team is None else str(team),
        why=f"{found.why}; {keys} from --usage-rules",
    )


def _workloads(accepted: Mapping[str, list[str]], found: Sequence[Inference]) -> WorkloadSet:
    rows: list[dict[str, object]] = []
    for i in found:
        types = accepted[i.name]
        row: dict[str, object] = {
            "name": i.name, "class": i.workload_class, "instance_types": types,
            "throughput": {t: _factor(t) for t in types},
            "regions": list(i.regions), "providers": list(i.providers),
        }  # fmt: skip
        if i.team is not None:
            row["team"] = i.team
        if i.workload_class == "serving":
            # revocable as far as the bill shows it ran on spot; usage it never
            # ran there is not known to survive a revocation (--policies says)
            row["max_spot_share"] = (
                max(0.3, min(1.0, round(i.spot_share, 4))) if i.spot_share > 0 else 0.0
            )
        if i.workload_class == "training":
            row |= {"min_units": max(1, i.peak_units), "max_units": max(1, i.peak_units)}
            if i.spot_share >= 0.5:  # it ran on spot: its gang may run on spot
                row["min_on_non_revocable"] = False
        if i.workload_class != "serving":
            row |= {"unit_hours": round(i.unit_hours, 6), "deadline_hours": i.deadline_hours,
                    "release_hours": i.release_hours, "recurring": i.recurring}  # fmt: skip
        rows.append(row)
    data = {"workloads": rows}
    return parse_workloads(data, source="--usage", demand_supplied=True)


def usage_window(
    usage: HourlyUsage, start: datetime | None, days: int
) -> tuple[datetime | None, int, str | None]:
    """The what-if's start and days on a bill: without ``--start``, the bill's
    last ``days`` with at least a day before them as the forecast's history
    (the whole bill but its first day when it is shorter); and a note saying
    so (``None`` when nothing changed)."""
    if start is not None:
        return start, days, None
    whole = usage.hours // 24
    if whole < 2:
        raise InputError(
            usage.source,
            None,
            "at least 48 hours of usage (a day of history to forecast from, a day to replay)",
            got=f"{usage.hours} h",
        )
    used = min(days, whole - 1)
    begin = usage.start + timedelta(hours=usage.hours - used * 24)
    note = None
    if used < days:
        note = (
            f"--days {days}: the bill covers {usage.hours} h; replaying its last {used} "
            "day(s), the hours before them are the forecast's history"
        )
    return begin, used, note
