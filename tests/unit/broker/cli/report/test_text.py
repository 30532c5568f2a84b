"""The text report fits the width it is given: a wide table wraps (its name
column repeated) or, when even that cannot fit, turns vertical."""

from __future__ import annotations

import pytest

from broker.cli.report.sections import Column, Table
from broker.cli.report.text import layout, render_text
from tests.unit.broker.cli.report.sample import sample_doc


@pytest.mark.parametrize("width", [40, 60, 80, 100, 135])
def test_every_line_fits_the_width(width: int) -> None:
    text = render_text(sample_doc(), width)
    assert max(len(line) for line in text.splitlines()) <= width


def test_money_is_condensed() -> None:
    text = render_text(sample_doc(), 80)
    assert "$81.9k" in text and "$36.6k" in text and "81,904" not in text.split("==")[1]


def test_a_wide_table_wraps_repeating_the_name_column() -> None:
    text = render_text(sample_doc(), 80)
    lines = text[text.index("== Scenarios") : text.index("== Risk")].splitlines()
    heads = [line for line in lines if line.startswith("scenario ")]
    assert len(heads) == 2  # the scenarios table, in two blocks
    assert "total" in heads[0] and "planned" in heads[1]
    assert sum(line.startswith("spotfolio ") for line in lines) == 2


def test_the_advice_comes_first_and_absent_blocks_are_left_out() -> None:
    doc = sample_doc()
    text = render_text(doc, 80)
    assert text.index("== What to do") < text.index("== Scenarios")
    assert "== Risk band" in text and "$36.6k" in text.split("== Risk band")[1]
    for key in ("advice", "risk", "stress", "committed_sweep"):
        del doc[key]
    text = render_text(doc, 80)
    assert "What to do" not in text and "Risk band" not in text and "sweep" not in text


def test_a_table_too_wide_for_name_and_one_column_turns_vertical() -> None:
    t = Table(
        "t",
        "",
        (Column("name", "scenario"), Column("total_cost_usd", "total", "usd")),
        (("committed_quantile_with_a_long_name", 74450.58),),
    )
    lines = layout(t, 30)
    assert lines[0] == "scenario: committed_quantile_with_a_long_name"
    assert lines[1] == "  total: $74.5k"


def test_the_stressed_market_says_its_change_against_x1() -> None:
    text = render_text(sample_doc(), 135)
    row = next(
        line for line in text.split("== Stressed")[1].splitlines() if line.startswith("spotfolio")
    )
    assert "$36.6k" in row and "$41k" in row and "12.0%" in row  # 41,000 / 36,599.85 - 1


def test_missing_values_print_a_dash() -> None:
    t = Table("t", "", (Column("name", "n"), Column("delta_usd", "d", "usd")), (("a", None),))
    assert layout(t, 80)[1].split() == ["a", "-"]


def test_a_pool_key_wider_than_the_width_is_cut_after_its_slashes() -> None:
    key = "gcp/europe-west4/europe-west4-b/a2-highgpu-8g"  # 45 characters
    t = Table("t", "", (Column("tier", "tier"), Column("pool_key", "pool")), (("spot", key),))
    lines = layout(t, 40)
    assert max(len(line) for line in lines) <= 40
    assert lines[:2] == ["tier: spot", "  pool:"] and "".join(lines[2:]) == key
