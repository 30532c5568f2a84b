"""``--plot``'s chart: totals and savings written on the bars, the sweep's
totals on its points, dollar axes condensed (``$80k``), dollar signs shown
as such (two ``$`` in one label would be mathtext to matplotlib)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from broker.cli._plot import plot_whatif
from tests.unit.broker.cli.report.sample import sample_doc

pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")


def _figure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, doc: dict[str, Any]) -> Any:
    from matplotlib.figure import Figure

    saved: list[Figure] = []
    real = Figure.savefig

    def keep(self: Figure, *args: Any, **kwargs: Any) -> None:
        saved.append(self)
        real(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    png = tmp_path / "w.png"
    plot_whatif(doc, png)
    assert png.read_bytes()[:4] == b"\x89PNG"
    return saved[0]


def test_bars_carry_their_totals_and_savings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fig = _figure(tmp_path, monkeypatch, sample_doc())
    bars, sweep = fig.axes[0], fig.axes[1]
    labels = [t.get_text() for t in bars.texts]
    assert labels == [
        r"\$81.9k",
        "\\$74.5k\nsaves 9%",
        "\\$62.6k\nsaves 24%",
        "\\$36.6k\nsaves 55%",
    ]
    assert [t.get_text() for t in sweep.texts] == [r"\$45.8k", r"\$45.2k"]
    fig.canvas.draw()
    ticks = [t.get_text() for t in bars.get_yticklabels()]
    assert r"\$80k" in ticks and r"\$0" in ticks
    assert [t.get_text() for t in sweep.get_xticklabels()] == ["40%", "60%"]


def test_a_total_net_of_work_carried_forward_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = sample_doc()
    doc["scenarios"][0]["work_ahead_usd"] = 558.0
    del doc["committed_sweep"]
    fig = _figure(tmp_path, monkeypatch, doc)
    assert len(fig.axes) == 1
    assert fig.axes[0].texts[0].get_text() == r"\$81.9k net of \$558"
