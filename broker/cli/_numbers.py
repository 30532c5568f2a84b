"""Number options: ``markets.numbers.Bounded`` as a click parameter type.

Owns: ``ranged(...)`` (a click type for one finite number in a range) and
``NumberOption``. A value out of range, NaN, ``inf`` or text that is not a
number is a click usage error naming the option and the range (exit 2,
one line), in the same words a file field gets.

Must not: decide a range (the command does), or read files.
"""

from __future__ import annotations

import click

from markets.numbers import Bounded, NumberError

__all__ = ["NumberOption", "ranged"]


class NumberOption(click.ParamType[float | int, object]):
    """One finite number in ``bounds`` (an int when ``bounds.integer``)."""

    def __init__(self, bounds: Bounded) -> None:
        self.bounds = bounds
        self.name = "integer" if bounds.integer else "number"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> float | int:
        try:
            return self.bounds.check(value)
        except NumberError as e:
            self.fail(f"expected {e}, got {value!r}", param, ctx)

    def get_metavar(self, param: click.Parameter, ctx: click.Context) -> str:
        return "INTEGER" if self.bounds.integer else "FLOAT"


def ranged(
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    integer: bool = False,
    unit: str = "",
) -> NumberOption:
    """A click type for a number in ``[ge|gt, le|lt]`` (both edges required)."""
    return NumberOption(Bounded(ge=ge, gt=gt, le=le, lt=lt, integer=integer, unit=unit))
