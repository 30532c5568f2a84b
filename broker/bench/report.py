"""The bench report: markdown tables per setting and quadrant, and PNG charts.

Owns: ``markdown(result)`` (the text of ``spotfolio bench --out report.md``)
and ``write_report(result, path)`` (the markdown plus ``<stem>_deadline.png``
and ``<stem>_fleet.png`` beside it). matplotlib is imported only to draw.

Must not: compute metrics (the settings' ``summarize`` did) or run anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4f}" if abs(v) < 10 else f"{v:.1f}"
    return str(v)


def _table(policies: dict[str, dict[str, Any]], cols: tuple[tuple[str, str], ...]) -> list[str]:
    lines = ["| policy | " + " | ".join(label for _, label in cols) + " |"]
    lines.append("|---|" + "---:|" * len(cols))
    for name, m in policies.items():
        lines.append(f"| {name} | " + " | ".join(_fmt(m.get(k)) for k, _ in cols) + " |")
    return lines


def markdown(result: dict[str, Any], charts: dict[str, str] | None = None) -> str:
    """The report as markdown (charts: setting -> PNG file name to link)."""
    charts = charts or {}
    out = [
        "# Spotfolio benchmark",
        "",
        f"Source: `{result.get('source')}`; windows: {result.get('windows')}; "
        f"seed: {result.get('seed')}.",
        "",
        "## Targets",
        "",
        "| setting | metric | target | measured | met |",
        "|---|---|---|---:|---|",
    ]
    for t in result.get("targets", []):
        met = {True: "yes", False: "**no**", None: "-"}[t["met"]]
        target = f"{t['op']} {t['limit']}"
        out.append(f"| {t['setting']} | {t['metric']} | {target} | {_fmt(t['value'])} | {met} |")
    d = result.get("deadline") or {}
    if d.get("policies"):
        out += ["", "## Deadline jobs (benchmarks.md section 1)", ""]
        setting = d.get("setting", {})
        out.append(
            f"{d.get('windows')} windows; k = {setting.get('price_ratio')}, "
            f"d = {setting.get('changeover_hours')} h, C = {setting.get('compute_hours')} h, "
            f"job fractions {setting.get('job_fractions')}."
        )
        out += ["", *_table(d["policies"], _DEADLINE_COLS), ""]
        gap = d.get("gap_closure_vs_greedy", {})
        out.append("Gap-closure vs greedy: " + ", ".join(f"{k} {_fmt(v)}" for k, v in gap.items()))
        for q, block in (d.get("quadrants") or {}).items():
            out += ["", f"### {q} ({block['windows']} windows)", ""]
            out += _table(block["policies"], _DEADLINE_COLS)
            qgap = block.get("gap_closure_vs_greedy", {})
            out += ["", "Gap-closure: " + ", ".join(f"{k} {_fmt(v)}" for k, v in qgap.items())]
        if "deadline" in charts:
            out += ["", f"![deadline]({charts['deadline']})"]
    f = result.get("fleet") or {}
    if f.get("policies"):
        out += ["", "## Serving fleets (benchmarks.md section 2)", ""]
        setting = f.get("setting", {})
        out.append(
            f"{f.get('windows')} fleet-days; N = {setting.get('replicas')}, cold start "
            f"{setting.get('cold_start_s')} s, notice (s) {setting.get('notice_s')}."
        )
        out += ["", *_table(f["policies"], _FLEET_COLS)]
        for g, block in (f.get("groups") or {}).items():
            out += ["", f"### {g} ({block['windows']} fleet-days)", ""]
            out += _table(block["policies"], _FLEET_COLS)
        if "fleet" in charts:
            out += ["", f"![fleet]({charts['fleet']})"]
    p = result.get("portfolio") or {}
    out += ["", "## Portfolios (benchmarks.md section 3)", ""]
    if p.get("policies"):
        cols = tuple((k, k) for k in next(iter(p["policies"].values())))
        out += _table(p["policies"], cols)
    else:
        out.append("Not plugged in yet (`broker.bench.runner.SETTINGS['portfolio']`).")
    m = result.get("machinery") or {}
    out += ["", "## Machinery", "", "```", _pretty(m), "```", ""]
    return "\n".join(out)


def _pretty(obj: Any) -> str:
    import json

    return json.dumps(obj, indent=2, default=str)


def _deadline_chart(result: dict[str, Any], path: Path) -> bool:
    quads = (result.get("deadline") or {}).get("quadrants") or {}
    if not quads:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(next(iter(quads.values()))["policies"])
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / max(len(names), 1)
    for k, name in enumerate(names):
        vals = [q["policies"][name]["mean_cost_vs_on_demand"] for q in quads.values()]
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


def _fleet_chart(result: dict[str, Any], path: Path) -> bool:
    pol = (result.get("fleet") or {}).get("policies") or {}
    if not pol:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for k, (name, m) in enumerate(pol.items()):
        short = 100.0 * (1.0 - m["availability"])
        ax.scatter(m["cost_vs_on_demand"], short, s=40)
        # alternate label sides: rules close in cost would overprint
        ax.annotate(
            name,
            (m["cost_vs_on_demand"], short),
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


def write_report(result: dict[str, Any], path: str | Path) -> list[Path]:
    """Write the markdown at ``path`` and its charts beside it; returns the files."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    written = []
    charts: dict[str, str] = {}
    for setting, draw in (("deadline", _deadline_chart), ("fleet", _fleet_chart)):
        png = path.with_name(f"{path.stem}_{setting}.png")
        if draw(result, png):
            charts[setting] = png.name
            written.append(png)
    path.write_text(markdown(result, charts))
    written.insert(0, path)
    return written
