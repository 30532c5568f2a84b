"""The HTML report rendered by headless Chromium (``tests/browser.py``): the
page requests nothing, raises no error, shows each section's heading, the
totals and one SVG chart per block, and paints them (the charts' colours are
in the screenshot)."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest

from broker.cli.report.htmlpage import CHART_IDS, render_html
from broker.cli.report.svg import PALETTE
from tests.browser import CHROMIUM, NO_CHROMIUM, Rendered, render_page
from tests.unit.broker.cli.report.sample import sample_doc

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
HEADINGS = (
    "What to do",
    "Scenarios, billed on the actual demand and market",
    "Risk band (P10 / P50 / P90)",
    "Committed sweep (share of peak serving demand)",
    "Charts",
    "Cost by tier",
    "Cost by tier over time",
    "Spot exposure by zone",
)


class _Page(HTMLParser):
    """Headings, SVG ids, element counts and the text of the rendered DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.headings: list[str] = []
        self.svg_ids: list[str] = []
        self.counts: dict[str, int] = {}
        self.text: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.counts[tag] = self.counts.get(tag, 0) + 1
        if tag == "svg":
            self.svg_ids.append(dict(attrs).get("id") or "")
        if tag in ("h2", "h3"):
            self._in = tag
            self.headings.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == self._in:
            self._in = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._in:
            self.headings[-1] += data


def page_of(rendered: Rendered) -> _Page:
    p = _Page()
    p.feed(rendered.dom)
    return p


def painted(shot: Path, colour: str) -> int:
    """Pixels of ``colour`` (``#RRGGBB``) in a screenshot."""
    import matplotlib.image

    img = matplotlib.image.imread(str(shot))[:, :, :3]
    want = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    close = abs(img - want).max(axis=2) < 2 / 255
    return int(close.sum())


def test_the_report_renders_its_sections_totals_and_charts(tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    page.write_text(render_html(sample_doc()), encoding="utf-8")
    got = render_page(page, tmp_path)
    assert got.resources == [] and got.errors == []
    p = page_of(got)
    for h in HEADINGS:
        assert h in p.headings, (h, p.headings)
    assert p.headings.index("What to do") < p.headings.index(
        "Scenarios, billed on the actual demand and market"
    )
    text = " ".join(p.text)
    assert "$36,600" in text and "$81,905" in text  # the totals, in the table
    assert "$36.6k" in text and "saves 55.3%" in text  # and on the bars
    assert set(CHART_IDS) <= set(p.svg_ids)
    assert p.counts.get("rect", 0) >= 12 and p.counts.get("circle", 0) == 2
    assert p.counts.get("script", 0) == 1  # the probe's only: the page has none
    # the screenshot is the page's first 2,400 px (tests/browser.py), which
    # What to do's tables now fill: the bars are painted without it
    doc = sample_doc()
    del doc["advice"]
    page.write_text(render_html(doc), encoding="utf-8")
    shot = render_page(page, tmp_path).screenshot
    for colour in PALETTE[:3]:  # committed, on-demand, spot bars
        assert painted(shot, colour) > 200, colour


def test_a_block_the_document_lacks_is_a_note_not_a_chart(tmp_path: Path) -> None:
    doc = sample_doc()
    for key in ("risk", "committed_sweep", "timeline", "spot_by_zone", "advice"):
        del doc[key]
    page = tmp_path / "r.html"
    page.write_text(render_html(doc), encoding="utf-8")
    got = render_page(page, tmp_path)
    assert got.errors == []
    p = page_of(got)
    assert p.svg_ids == ["chart-tiers"]
    text = " ".join(p.text)
    assert "No risk band in the document" in text and "--committed 0.4,0.6" in text
    assert "What to do" not in p.headings


def test_the_probe_sees_a_page_that_needs_the_network(tmp_path: Path) -> None:
    """The check above could fail: a page with an external image and style
    sheet is caught by the probe (hosts resolve to nothing here)."""
    page = tmp_path / "bad.html"
    page.write_text(
        '<!DOCTYPE html><html><head><link rel="stylesheet" '
        'href="https://cdn.example.com/a.css"></head><body>'
        '<img src="http://example.com/x.png"></body></html>'
    )
    got = render_page(page, tmp_path)
    assert len(got.resources) == 2 and len(got.errors) == 2
