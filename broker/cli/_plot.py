"""The what-if chart: cost by tier per scenario, and the committed sweep.

Owns: ``check_plot_path`` (``--plot``'s format and directory, checked before
the run so a typo fails in a second, not after an hour of planning) and
``plot_whatif`` (the chart, written whole or not at all through
``broker.atomic``). matplotlib is imported only when a chart is asked for.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from broker.atomic import atomic_output
from markets.errors import InputError
from markets.extras import needs_extra

if TYPE_CHECKING:
    from broker.whatif.run import WhatIfResult


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
        raise InputError("--plot", None, f"an image file name ending in .png (or {known})",
                         got=str(path))  # fmt: skip
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise InputError("--plot", None, "a file in an existing, writable directory",
                         got=str(path))  # fmt: skip
    return fmt


def plot_whatif(result: WhatIfResult, path: Path) -> None:
    fmt = check_plot_path(path)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ncols = 2 if result.sweep else 1
    fig, axes = plt.subplots(1, ncols, figsize=(6 * ncols, 4), squeeze=False)
    ax = axes[0][0]
    names = [s.name for s in result.scenarios]
    bottom = [0.0] * len(names)
    for tier in ("committed", "on_demand", "spot"):
        vals = [s.bill.by_tier_usd[tier] for s in result.scenarios]
        ax.bar(names, vals, bottom=bottom, label=tier)
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    ax.set_ylabel("USD over the horizon")
    ax.set_title("cost by tier")
    ax.legend()
    ax.tick_params(axis="x", rotation=20)
    if result.sweep:
        ax2 = axes[0][1]
        ax2.plot([p.share_of_peak * 100 for p in result.sweep],
                 [p.scenario.bill.total_usd for p in result.sweep], marker="o")  # fmt: skip
        ax2.set_xlabel("committed, % of peak serving demand")
        ax2.set_ylabel("USD over the horizon")
        ax2.set_title("committed sweep")
    fig.tight_layout()
    try:
        with atomic_output(path) as tmp:
            fig.savefig(tmp, format=fmt)
    except OSError as e:
        raise InputError("--plot", None, f"a writable PNG path ({e})", got=str(path)) from e
    finally:
        plt.close(fig)
