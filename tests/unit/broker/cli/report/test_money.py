"""Condensed and full dollars, as the text and HTML reports print them."""

from __future__ import annotations

import pytest

from broker.cli.report.money import full_usd, short_usd


@pytest.mark.parametrize(
    ("usd", "text"),
    [
        pytest.param(81904.86, "$81.9k", id="thousands"),
        pytest.param(4181.63, "$4.18k", id="three-digits"),
        pytest.param(132629.39, "$133k", id="hundreds-of-thousands"),
        pytest.param(1234567.0, "$1.23M", id="millions"),
        pytest.param(999999.0, "$1M", id="rounds-up-to-the-next-unit"),
        pytest.param(512.0, "$512", id="hundreds"),
        pytest.param(5.5, "$5.5", id="units"),
        pytest.param(0.45, "$0.45", id="cents"),
        pytest.param(0.0, "$0", id="zero"),
        pytest.param(-589.14, "-$589", id="negative"),
        pytest.param(float("nan"), "-", id="nan"),
        pytest.param(None, "-", id="none"),
    ],
)
def test_short_usd_keeps_three_significant_digits(usd: float | None, text: str) -> None:
    assert short_usd(usd) == text


def test_signed_deltas_say_plus_and_minus() -> None:
    assert short_usd(589.14, signed=True) == "+$589"
    assert full_usd(-589.14, signed=True) == "-$589"


def test_full_usd_is_whole_dollars_with_separators() -> None:
    assert full_usd(81904.86) == "$81,905"
    assert full_usd(99.5) == "$99.50"
    assert full_usd(0.0) == "$0"
