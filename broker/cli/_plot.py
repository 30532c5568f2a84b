"""The what-if chart: cost by tier per scenario (totals and savings on the
bars), and the committed sweep; dollar axes as ``$80k``.

Owns: ``check_plot_path`` (``--plot``'s format and directory, checked before
the run so a typo fails in a second, not after an hour of planning) and
``plot_whatif`` (the chart of the what-if's JSON document, written whole or
not at all through ``broker.atomic``; the caller names the file written).
matplotlib is imported only when a chart is asked for.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

from broker.atomic import atomic_output
from broker.cli.report.money import short_usd
from broker.cli.report.sections import rows, scenario_table
from markets.errors import InputError
from markets.extras import needs_extra


def _formats() -> dict[str, str]:  # matplotlib's, so the plot extra is checked too
    with needs_extra("--plot"):
        from matplotlib.backend_bases import FigureCanvasBase
    formats: dict[str, str] = FigureCanvasBase.get_supported_filetypes()
    return formats


def check_plot_path(path: Path) -> str:
    """The image format ``path``'s suffix names (``png``), or an ``InputError``
    naming ``--plot``: an unknown format, a missing or unwritable directory."""
    fmt = path.suffix.lower().lstrip(".")
    formats = _formats()
    if fmt not in formats:
        known = ", ".join(sorted(formats))
        raise InputError(
            "--plot", None, f"an image file name ending in .png (or {known})", got=str(path)
        )
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise InputError("--plot", None, "a file in an existing, writable directory", got=str(path))
    return fmt


def plot_whatif(doc: Mapping[str, object], path: Path) -> None:
    """The chart of a ``spotfolio.whatif/1`` document: billed cost by tier
    per scenario, each bar's total and saving written on it, and the
    committed sweep's totals; dollar axes condensed (``$80k``)."""
    fmt = check_plot_path(path)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    money = FuncFormatter(lambda v, _pos: _plain(short_usd(v)))
    scen = scenario_table(doc)
    sweep = rows(doc.get("committed_sweep"))
    ncols = 2 if sweep else 1
    fig, axes = plt.subplots(1, ncols, figsize=(6.5 * ncols, 4.5), squeeze=False)
    ax = axes[0][0]
    names = scen.names()
    bottom = [0.0] * len(names)
    for key, tier in (("committed", "committed"), ("on_demand", "on-demand"), ("spot", "spot")):
        vals = [_finite(v) for v in scen.values(f"{key}_usd")]
        ax.bar(names, vals, bottom=bottom, label=tier)
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    top = max(bottom, default=0.0)
    totals, savings = scen.values("total_cost_usd"), scen.values("savings_vs_on_demand")
    ahead = scen.values("work_ahead_usd")
    for x, (total, saving, carried) in enumerate(zip(totals, savings, ahead, strict=True)):
        # a bar is what was paid; its label the total, net of work carried forward
        label = short_usd(total) if math.isfinite(total) else "cost unknown"
        label += f" net of {short_usd(carried)}" if carried > 0 else ""
        label += f"\nsaves {saving:.0%}" if saving > 0 else ""
        ax.annotate(
            _plain(label),
            (x, bottom[x]),
            xytext=(0, 3),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.set_ylim(0, top * 1.22 if top > 0 else 1)
    ax.yaxis.set_major_formatter(money)
    ax.set_ylabel(f"billed over {doc.get('hours')} h")
    ax.set_title("cost by tier (total, saving vs on-demand)")
    ax.legend(loc="upper right", fontsize=8)
    ax.tick_params(axis="x", rotation=20, labelsize=8)
    if sweep:
        ax2 = axes[0][1]
        xs = [_num(p.get("share_of_peak")) * 100 for p in sweep]
        ys = [_finite(_num(p.get("total_cost_usd"))) for p in sweep]
        ax2.plot(xs, ys, marker="o")
        for sx, sy in zip(xs, ys, strict=True):
            ax2.annotate(
                _plain(short_usd(sy)),
                (sx, sy),
                xytext=(0, 6),
                textcoords="offset points",
                ha="center",
                fontsize=8,
            )
        ax2.set_ylim(0, max(ys, default=0.0) * 1.15 or 1)
        ax2.yaxis.set_major_formatter(money)
        ax2.set_xticks(xs)
        ax2.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:.0f}%"))
        ax2.set_xlabel("committed, share of peak serving demand")
        ax2.set_ylabel(f"billed over {doc.get('hours')} h")
        ax2.set_title("committed sweep")
    fig.tight_layout()
    try:
        with atomic_output(path) as tmp:
            fig.savefig(tmp, format=fmt)
    except OSError as e:
        raise InputError("--plot", None, f"a writable PNG path ({e})", got=str(path)) from e
    finally:
        plt.close(fig)


def _plain(text: str) -> str:
    """``text`` with its dollar signs escaped: two ``$`` are mathtext to matplotlib."""
    return text.replace("$", r"\$")


def _finite(x: float) -> float:
    """A cost the chart can draw: NaN or an infinity (a tier some hour had no
    price for; the text report shows it as "-") draws as nothing."""
    return x if math.isfinite(x) else 0.0


def _num(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0
