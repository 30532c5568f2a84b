"""The bench report: markdown tables per setting and quadrant, and PNG charts.

Owns: ``markdown(result)``, the results page (docs/results.md is this page
for the full bench), and ``write_report(result, path)``: the page at ``path``,
or ``path/results.md`` for a directory (``spotfolio bench --out DIR``), plus
``<stem>_deadline.png`` and ``<stem>_fleet.png`` beside it. matplotlib is
imported only to draw.

Must not: compute metrics (the settings' ``summarize`` did) or run anything.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from broker.atomic import atomic_output
from broker.jsondoc import at, number, obj

__all__ = ["markdown", "write_report"]

_DEADLINE_COLS = (
    ("mean_cost_vs_on_demand", "mean cost / OD"),
    ("p75_cost_vs_on_demand", "p75 cost / OD"),
    ("mean_cost_vs_omniscient", "cost / omniscient"),
    ("deadline_misses", "misses"),
    ("spot_hours_vs_omniscient", "spot h / omniscient"),
    ("changeovers_per_window", "changeovers"),
)
_FLEET_COLS = (
    ("availability", "availability"),
    ("unserved_replica_hours", "unserved replica-h"),
    ("cost_vs_on_demand", "cost / OD"),
    ("cost_vs_omniscient", "cost / omniscient"),
)
_PORTFOLIO_COLS = (
    ("total_cost_usd", "total $"),
    ("cost_vs_hindsight", "cost / hindsight"),
    ("cost_vs_bound", "cost / bound"),
    ("unmet_serving_unit_hours", "unmet serving u-h"),
)
PAGE = "results.md"


def _fmt(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4f}" if abs(v) < 10 else f"{v:.1f}"
    return str(v)


def _table(policies: Mapping[str, object], cols: tuple[tuple[str, str], ...]) -> list[str]:
    lines = ["| policy | " + " | ".join(label for _, label in cols) + " |"]
    lines.append("|---|" + "---:|" * len(cols))
    for name, m in policies.items():
        lines.append(f"| {name} | " + " | ".join(_fmt(obj(m).get(k)) for k, _ in cols) + " |")
    return lines


def _met(value: object) -> str:
    return "yes" if value is True else "**no**" if value is False else "-"


def _names(v: object) -> str:
    return ", ".join(str(x) for x in v) if isinstance(v, list) and v else "none"


def _portfolio(p: Mapping[str, object]) -> list[str]:
    policies = obj(p["policies"])
    lines = _table(policies, _PORTFOLIO_COLS)
    seeds = p.get("seeds")
    if isinstance(seeds, list) and seeds:
        rows = [obj(s) for s in seeds]
        lines += ["", "Spotfolio against the hindsight plan, one market and demand per seed:", ""]
        lines.append("| seed | " + " | ".join(str(r.get("seed")) for r in rows) + " |")
        lines.append("|---|" + "---:|" * len(rows))
        for key, label in (("cost_vs_hindsight", "x hindsight"), ("cost_vs_bound", "x bound")):
            cells = [_fmt(obj(obj(r.get("policies")).get("spotfolio")).get(key)) for r in rows]
            lines.append(f"| Spotfolio {label} | " + " | ".join(cells) + " |")
    h = obj(p.get("hindsight"))
    if h:
        lines += [
            "",
            f"The hindsight MILP: {_fmt(h.get('total_cost_usd'))} $ billed, proven bound "
            f"{_fmt(h.get('lower_bound_usd'))} $ (gap {_fmt(h.get('gap'))}); policies billed "
            f"below the bound: {_names(h.get('below_bound'))}.",
        ]
    return lines


def markdown(result: Mapping[str, object], charts: dict[str, str] | None = None) -> str:
    """The results page (charts: setting -> PNG file name to link)."""
    charts = charts or {}
    out = [
        "# Results",
        "",
        "What `spotfolio bench` measured on "
        f"`{result.get('source')}` (`--windows {result.get('windows')}`, "
        f"`--seed {result.get('seed')}`). `spotfolio bench --out DIR` writes this "
        "page as `DIR/results.md`, its charts beside it. Costs and counts do not depend "
        "on machine load and are reproducible from the same code, data and seed; the "
        "timings under Machinery do depend on it. How each setting is built, and each "
        "baseline's published rule, is on [Benchmarks and sweeps](benchmarks.md).",
    ]
    d = obj(result.get("deadline"))
    if d.get("policies"):
        out += ["", "## Deadline jobs", ""]
        setting = obj(d.get("setting"))
        out.append(
            f"{d.get('windows')} windows; k = {setting.get('price_ratio')}, "
            f"d = {setting.get('changeover_hours')} h, C = {setting.get('compute_hours')} h, "
            f"job fractions {setting.get('job_fractions')}."
        )
        out += ["", *_table(obj(d["policies"]), _DEADLINE_COLS), ""]
        gap = obj(d.get("gap_closure_vs_greedy"))
        out.append(
            "Gap to the optimum left, as a share of greedy's "
            "(`(cost - omniscient) / (greedy - omniscient)`): "
            + ", ".join(f"{k} {_fmt(v)}" for k, v in gap.items())
        )
        for q, value in obj(d.get("quadrants")).items():
            block = obj(value)
            out += ["", f"### {q} ({block['windows']} windows)", ""]
            out += _table(obj(block["policies"]), _DEADLINE_COLS)
            qgap = obj(block.get("gap_closure_vs_greedy"))
            out += ["", "Gap left: " + ", ".join(f"{k} {_fmt(v)}" for k, v in qgap.items())]
        if "deadline" in charts:
            out += ["", f"![deadline]({charts['deadline']})"]
    f = obj(result.get("fleet"))
    if f.get("policies"):
        out += ["", "## Serving fleets", ""]
        setting = obj(f.get("setting"))
        out.append(
            f"{f.get('windows')} fleet-days; N = {setting.get('replicas')}, cold start "
            f"{setting.get('cold_start_s')} s, notice (s) {setting.get('notice_s')}."
        )
        out += ["", *_table(obj(f["policies"]), _FLEET_COLS)]
        for g, value in obj(f.get("groups")).items():
            block = obj(value)
            out += ["", f"### {g} ({block['windows']} fleet-days)", ""]
            out += _table(obj(block["policies"]), _FLEET_COLS)
        if "fleet" in charts:
            out += ["", f"![fleet]({charts['fleet']})"]
    p = obj(result.get("portfolio"))
    out += ["", "## Portfolios", ""]
    if p.get("policies"):
        out += _portfolio(p)
    else:
        out.append("Not run (`broker.bench.runner.SETTINGS['portfolio']` is unset).")
    out += [
        "",
        "## Targets",
        "",
        "| setting | metric | target | measured | met |",
        "|---|---|---|---:|---|",
    ]
    targets = result.get("targets")
    for row in targets if isinstance(targets, list) else []:
        t = obj(row)
        target = f"{t['op']} {t['limit']}"
        out.append(
            f"| {t['setting']} | {t['metric']} | {target} | {_fmt(t['value'])} | {_met(t['met'])} |"
        )
    m = obj(result.get("machinery"))
    out += ["", "## Machinery", "", "```json", json.dumps(m, indent=2, default=str), "```", ""]
    return "\n".join(out)


def _deadline_chart(result: Mapping[str, object], path: Path) -> bool:
    quads = obj(at(result, "deadline", "quadrants"))
    if not quads:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(obj(at(next(iter(quads.values())), "policies")))
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / max(len(names), 1)
    for k, name in enumerate(names):
        vals = [
            number(at(q, "policies", name, "mean_cost_vs_on_demand"), f"{name} cost")
            for q in quads.values()
        ]
        ax.bar([i + k * width for i in range(len(quads))], vals, width, label=name)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(quads))])
    ax.set_xticklabels([q.replace("/", "\n") for q in quads], fontsize=8)
    ax.set_ylabel("mean cost / on-demand")
    ax.set_title("Deadline jobs: cost per quadrant (lower is better)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _fleet_chart(result: Mapping[str, object], path: Path) -> bool:
    pol = obj(at(result, "fleet", "policies"))
    if not pol:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for k, (name, m) in enumerate(pol.items()):
        short = 100.0 * (1.0 - number(at(m, "availability"), f"{name} availability"))
        cost = number(at(m, "cost_vs_on_demand"), f"{name} cost")
        ax.scatter(cost, short, s=40)
        # alternate label sides: rules close in cost would overprint
        ax.annotate(
            name,
            (cost, short),
            xytext=(6, 8 if k % 2 else -12),
            textcoords="offset points",
            fontsize=8,
        )
    ax.axhline(0.5, linestyle=":", linewidth=1, label="target: short of N <= 0.5 %")
    ax.set_yscale("symlog", linthresh=0.1)
    ax.set_ylim(bottom=0.0)
    ax.set_xlabel("cost / on-demand")
    ax.set_ylabel("time with fewer than N ready (%)")
    ax.set_title("Serving fleets: time short of N vs cost (lower left is better)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_report(result: Mapping[str, object], path: str | Path) -> list[Path]:
    """Write the results page at ``path`` (a directory: ``path/results.md``) and
    its charts beside it; returns the files."""
    path = Path(path)
    if path.is_dir() or not path.suffix:
        path = path / PAGE
    path.parent.mkdir(parents=True, exist_ok=True)
    written = []
    charts: dict[str, str] = {}
    # Each file whole or not at all (a kill mid-write leaves the old one).
    for setting, draw in (("deadline", _deadline_chart), ("fleet", _fleet_chart)):
        png = path.with_name(f"{path.stem}_{setting}.png")
        with atomic_output(png) as tmp:
            drawn = draw(result, tmp)
        if drawn:
            charts[setting] = png.name
            written.append(png)
        else:
            png.unlink(missing_ok=True)
    with atomic_output(path) as tmp:
        tmp.write_text(markdown(result, charts))
    written.insert(0, path)
    return written
