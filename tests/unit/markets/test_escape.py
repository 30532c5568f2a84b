"""``log_safe``: what a queue message puts in a log field cannot start a line
of its own, and a long field is cut."""

from __future__ import annotations

import pytest

from markets.escape import log_safe


@pytest.mark.parametrize(
    ("raw", "safe"),
    [
        pytest.param("abc\nFAKE decision", "abc\\x0aFAKE decision", id="newline"),
        pytest.param("a\r\nb", "a\\x0d\\x0ab", id="crlf"),
        pytest.param("\x1b[31mred", "\\x1b[31mred", id="ansi-escape"),
        pytest.param("a\u2028b\u2029c\x85d", "a\\u2028b\\u2029c\\x85d", id="unicode-separators"),
        pytest.param("\x00\x7f", "\\x00\\x7f", id="nul-and-del"),
        pytest.param("i-0abc arn:aws:ec2 ok", "i-0abc arn:aws:ec2 ok", id="printable-untouched"),
    ],
)
def test_control_characters_are_escaped(raw: str, safe: str) -> None:
    assert log_safe(raw) == safe
    assert len(log_safe(raw).splitlines()) == 1


def test_a_long_field_is_cut_and_says_by_how_much() -> None:
    assert log_safe("x" * 1000, 10) == "x" * 10 + "...(+990 chars)"
