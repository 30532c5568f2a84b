"""Inline SVG charts for the HTML report: no script, no external file.

Owns: ``nice_ticks`` (round axis values), ``stacked_bars`` (stacks per
category with a label over each bar and one under it), ``line_chart`` (points
joined, each labelled), ``band_chart`` (P10-P90 bars with the P50 marked) and
``hbars`` (horizontal bars, a value label each). Every chart is one ``<svg>``
element with an ``id``, a ``<title>`` and ``role="img"``; text is escaped.

Must not: read a document (``htmlpage`` hands it numbers and labels) or
format money (it takes the formatter).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from html import escape

__all__ = ["PALETTE", "band_chart", "hbars", "line_chart", "nice_ticks", "stacked_bars"]

Fmt = Callable[[float], str]
# colour-blind-safe (Okabe-Ito)
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442")
_W, _H = 720, 340
_LEFT, _RIGHT, _TOP, _BOTTOM = 70, 20, 40, 70


def nice_ticks(hi: float, n: int = 5) -> list[float]:
    """0 to at least ``hi`` in about ``n`` steps of 1, 2 or 5 x 10^k."""
    if hi <= 0 or not math.isfinite(hi):
        return [0.0, 1.0]
    raw = hi / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    return [i * step for i in range(math.ceil(hi / step - 1e-9) + 1)]


def _text(
    x: float,
    y: float,
    s: str,
    *,
    anchor: str = "middle",
    size: int = 11,
    cls: str = "",
    rotate: float | None = None,
) -> str:
    rot = f' transform="rotate({rotate:g} {x:.1f} {y:.1f})"' if rotate is not None else ""
    c = f' class="{cls}"' if cls else ""
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}"'
        f"{c}{rot}>{escape(s)}</text>"
    )


def _open(chart_id: str, title: str, w: int = _W, h: int = _H) -> list[str]:
    return [
        f'<svg id="{escape(chart_id)}" class="chart" role="img" width="{w}" height="{h}" '
        f'viewBox="0 0 {w} {h}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
        _text(w / 2, 20, title, size=14, cls="chart-title"),
    ]


def _y_axis(ticks: list[float], y_of: Callable[[float], float], fmt: Fmt, w: int) -> list[str]:
    out = []
    for t in ticks:
        y = y_of(t)
        out.append(
            f'<line x1="{_LEFT}" x2="{w - _RIGHT}" y1="{y:.1f}" y2="{y:.1f}" '
            'stroke="#ddd" stroke-width="1"/>'
        )
        out.append(_text(_LEFT - 6, y + 4, fmt(t), anchor="end", cls="tick"))
    return out


def _legend(labels: Sequence[str], w: int, h: int) -> list[str]:
    out, x = [], float(_LEFT)
    for i, label in enumerate(labels):
        out.append(
            f'<rect x="{x:.1f}" y="{h - 16}" width="10" height="10" '
            f'fill="{PALETTE[i % len(PALETTE)]}"/>'
        )
        out.append(_text(x + 14, h - 7, label, anchor="start", cls="legend"))
        x += 24 + 7 * len(label)
    return out


def stacked_bars(
    chart_id: str,
    title: str,
    categories: Sequence[str],
    stacks: Sequence[tuple[str, Sequence[float]]],
    fmt: Fmt,
    *,
    over: Sequence[str] = (),
    under: Sequence[str] = (),
    rotate_labels: bool = False,
) -> str:
    """A bar per category, ``stacks`` (label, a value per category) piled up;
    ``over[i]`` is written above bar i (its total), ``under[i]`` inside its top
    (a saving); the category names below (rotated when many)."""
    w, h = _W, _H
    totals = [sum(s[1][i] for s in stacks) for i in range(len(categories))]
    ticks = nice_ticks(max(totals, default=0.0) * (1.08 if over else 1.0))
    plot_h = h - _TOP - _BOTTOM

    def y_of(v: float) -> float:
        return _TOP + plot_h * (1 - v / ticks[-1])

    out = _open(chart_id, title, w, h) + _y_axis(ticks, y_of, fmt, w)
    n = max(len(categories), 1)
    slot = (w - _LEFT - _RIGHT) / n
    bar = max(slot * 0.6, 1.0)
    for i, cat in enumerate(categories):
        x = _LEFT + i * slot + (slot - bar) / 2
        base = 0.0
        for k, (label, values) in enumerate(stacks):
            v = values[i]
            if v > 0:
                y0, y1 = y_of(base), y_of(base + v)
                out.append(
                    f'<rect class="bar" x="{x:.1f}" y="{y1:.1f}" width="{bar:.1f}" '
                    f'height="{max(y0 - y1, 0.0):.1f}" '
                    f'fill="{PALETTE[k % len(PALETTE)]}">'
                    f"<title>{escape(f'{cat} {label}: {fmt(v)}')}</title>"
                    "</rect>"
                )
            base += v
        cx = x + bar / 2
        if i < len(over) and over[i]:
            out.append(_text(cx, y_of(totals[i]) - 5, over[i], cls="bar-total"))
        if i < len(under) and under[i]:
            out.append(_text(cx, y_of(totals[i]) + 14, under[i], cls="bar-note", size=10))
        if rotate_labels:
            if n <= 40 or i % math.ceil(n / 40) == 0:
                out.append(_text(cx, h - _BOTTOM + 12, cat, anchor="end", size=9, rotate=-45))
        else:
            out.append(_text(cx, h - _BOTTOM + 16, cat, cls="category"))
    out += _legend([s[0] for s in stacks], w, h)
    return "\n".join([*out, "</svg>"])


def line_chart(
    chart_id: str,
    title: str,
    xs: Sequence[float],
    ys: Sequence[float],
    x_fmt: Fmt,
    y_fmt: Fmt,
    *,
    x_label: str,
    labels: Sequence[str] = (),
) -> str:
    """Points (x, y) joined in x order, each with ``labels[i]`` above it; the
    y axis starts at zero, so differences are not exaggerated."""
    w, h = _W, _H
    ticks = nice_ticks(max(ys, default=0.0) * 1.1)
    plot_h, plot_w = h - _TOP - _BOTTOM, w - _LEFT - _RIGHT - 40
    lo, hi = min(xs, default=0.0), max(xs, default=1.0)
    span = hi - lo or 1.0

    def x_of(v: float) -> float:
        return _LEFT + 20 + plot_w * (v - lo) / span

    def y_of(v: float) -> float:
        return _TOP + plot_h * (1 - v / ticks[-1])

    out = _open(chart_id, title, w, h) + _y_axis(ticks, y_of, y_fmt, w)
    pts = sorted(zip(xs, ys, list(labels) + [""] * (len(xs) - len(labels)), strict=True))
    path = " ".join(f"{x_of(x):.1f},{y_of(y):.1f}" for x, y, _ in pts)
    out.append(f'<polyline points="{path}" fill="none" stroke="{PALETTE[0]}" stroke-width="2"/>')
    for x, y, label in pts:
        out.append(
            f'<circle class="point" cx="{x_of(x):.1f}" cy="{y_of(y):.1f}" r="4" '
            f'fill="{PALETTE[0]}"><title>{escape(f"{x_fmt(x)}: {y_fmt(y)}")}</title>'
            "</circle>"
        )
        if label:
            out.append(_text(x_of(x), y_of(y) - 9, label, cls="point-label"))
        out.append(_text(x_of(x), h - _BOTTOM + 16, x_fmt(x), cls="category"))
    out.append(_text(w / 2, h - _BOTTOM + 36, x_label, cls="axis-label"))
    return "\n".join([*out, "</svg>"])


def band_chart(
    chart_id: str, title: str, bands: Sequence[tuple[str, float, float, float]], fmt: Fmt
) -> str:
    """A row per quantity: a bar from P10 to P90, a tick at P50, the three
    values written beside it; one shared axis from zero."""
    row_h = 34
    w, h = _W, _TOP + row_h * max(len(bands), 1) + 40
    left = 200
    ticks = nice_ticks(max((b[3] for b in bands), default=0.0) * 1.05)
    span = ticks[-1] or 1.0
    plot_w = w - left - 40

    def x_of(v: float) -> float:
        return left + plot_w * v / span

    out = _open(chart_id, title, w, h)
    for t in ticks:
        out.append(
            f'<line x1="{x_of(t):.1f}" x2="{x_of(t):.1f}" y1="{_TOP}" y2="{h - 30}" stroke="#ddd"/>'
        )
        out.append(_text(x_of(t), h - 16, fmt(t), cls="tick"))
    for i, (label, p10, p50, p90) in enumerate(bands):
        y = _TOP + i * row_h + 8
        out.append(_text(left - 8, y + 12, label, anchor="end", cls="band-label"))
        out.append(
            f'<rect class="band" x="{x_of(p10):.1f}" y="{y:.1f}" '
            f'width="{max(x_of(p90) - x_of(p10), 1.0):.1f}" height="16" '
            f'fill="{PALETTE[4]}"><title>{escape(f"P10 {fmt(p10)}, P90 {fmt(p90)}")}'
            "</title></rect>"
        )
        out.append(
            f'<line class="median" x1="{x_of(p50):.1f}" x2="{x_of(p50):.1f}" '
            f'y1="{y - 3:.1f}" y2="{y + 19:.1f}" stroke="#000" stroke-width="2"/>'
        )
        out.append(
            _text(
                x_of(p90) + 6,
                y + 12,
                f"{fmt(p10)} / {fmt(p50)} / {fmt(p90)}",
                anchor="start",
                size=10,
            )
        )
    return "\n".join([*out, "</svg>"])


def hbars(chart_id: str, title: str, bars: Sequence[tuple[str, float, str]]) -> str:
    """A horizontal bar per (label, value, text written after the bar)."""
    row_h = 22
    w, h = _W, _TOP + row_h * max(len(bars), 1) + 10
    left = 190
    hi = max((b[1] for b in bars), default=0.0) or 1.0
    plot_w = w - left - 170
    out = _open(chart_id, title, w, h)
    for i, (label, value, note) in enumerate(bars):
        y = _TOP + i * row_h
        bw = plot_w * value / hi
        out.append(_text(left - 8, y + 13, label, anchor="end", cls="bar-label"))
        out.append(
            f'<rect class="bar" x="{left}" y="{y + 2}" width="{max(bw, 1.0):.1f}" '
            f'height="{row_h - 6}" fill="{PALETTE[2]}"><title>{escape(note)}</title>'
            "</rect>"
        )
        out.append(_text(left + bw + 6, y + 13, note, anchor="start", size=10))
    return "\n".join([*out, "</svg>"])
