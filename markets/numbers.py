"""Finite, bounded numbers: the one number type of every file field and option.

Owns: ``Bounded``, the range a number may take (a lower and an *upper* edge,
both required, either open or closed; ``integer`` for counts) and its check:
a boolean is not a number (``true`` is not $1/h), NaN and infinity are not
numbers, and a value outside the range is refused with the range in words.
The same ``Bounded`` is the pydantic type of a field
(``Annotated[float, Bounded(gt=0, le=DAY_S)]``) and, through
``broker.cli``'s option type, the type of a command-line option, so a file and
an option refuse a value with the same words.

Why an upper edge on everything: memory and solver numerics scale with some
numbers (hours of demand, units, throughput factors, trace gaps), and a
number far beyond any real use (``hours: 1e9``, ``throughput: 1e308``) ends
in a huge allocation, a solver crash or an int64 overflow instead of a clear
line. The edges are generous: a real input never meets one.

Must not: know what a field means (its owner picks the range), or print.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

__all__ = [
    "DAY_S",
    "MAX_COUNT",
    "MAX_HOURS",
    "MAX_UNITS",
    "MAX_USD",
    "MAX_USD_PER_HOUR",
    "WEEK_S",
    "Bounded",
    "NumberError",
]

DAY_S = 86_400.0
WEEK_S = 7 * DAY_S
# A planning or billing horizon: ten years of hours is beyond any real use and
# keeps an hourly array of it small (87,600 floats).
MAX_HOURS = 87_600
# Capacity units (GPUs, vCPUs) of one workload or one hour of demand: a
# million GPUs is far beyond any fleet; the solver's numerics stay sane.
MAX_UNITS = 1e6
# Dollars (budgets, caps, penalties, prices per hour): a trillion is beyond
# any account and far from float64's precision limit for cents.
MAX_USD = 1e12
# A price per unit-hour (or per instance-hour): a million dollars is beyond
# any offer, and keeps products of prices, hours and units far from overflow.
MAX_USD_PER_HOUR = 1e6
# Counts (seeds, attempts, instances): fit in a signed 32-bit integer, so
# numpy and the solver never overflow.
MAX_COUNT = 2**31 - 1


class NumberError(ValueError):
    """A value that is not a number in its range; ``str()`` is the expectation."""


def _edge(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


@dataclass(frozen=True)
class Bounded:
    """The closed or open range ``[ge|gt, le|lt]`` of a finite number.

    Exactly one lower and one upper edge; ``integer`` asks for a whole number.
    ``unit`` (``"seconds"``, ``"hours"``) is only for the message.
    """

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    integer: bool = False
    unit: str = ""

    def __post_init__(self) -> None:
        if (self.ge is None) == (self.gt is None) or (self.le is None) == (self.lt is None):
            raise TypeError(f"Bounded needs one lower and one upper edge: {self}")

    @property
    def expected(self) -> str:
        """The range in words: ``a number > 0 and <= 86,400 (seconds)``."""
        kind = "a whole number" if self.integer else "a finite number"
        lo = f">= {_edge(self.ge)}" if self.ge is not None else f"> {_edge(self.gt or 0.0)}"
        hi = f"<= {_edge(self.le)}" if self.le is not None else f"< {_edge(self.lt or 0.0)}"
        unit = f" ({self.unit})" if self.unit else ""
        return f"{kind} {lo} and {hi}{unit}"

    def check(self, value: object) -> float | int:
        """``value`` as a number in range, or ``NumberError`` saying the range.

        Accepts ints, floats and numeric text (YAML reads ``1e9`` as text);
        refuses booleans, NaN, infinity and a fraction where a count is due.
        """
        if isinstance(value, bool) or value is None:
            raise NumberError(f"{self.expected} (a number, not a boolean)")
        x: float | int
        if isinstance(value, int | float):
            x = value
        elif isinstance(value, str):
            text = value.strip().replace("_", "")
            try:
                x = int(text) if self.integer and text.lstrip("+-").isdigit() else float(text)
            except (ValueError, OverflowError) as e:
                raise NumberError(self.expected) from e
        else:
            raise NumberError(self.expected)
        if isinstance(x, float) and not math.isfinite(x):
            raise NumberError(self.expected)
        if not self._inside(x):
            raise NumberError(self.expected)
        if self.integer:
            if isinstance(x, float):
                if not x.is_integer():
                    raise NumberError(self.expected)
                x = int(x)
            return x
        return float(x)

    def _inside(self, x: float) -> bool:
        if self.ge is not None and not x >= self.ge:
            return False
        if self.gt is not None and not x > self.gt:
            return False
        if self.le is not None and not x <= self.le:
            return False
        return not (self.lt is not None and not x < self.lt)

    # pydantic: ``Annotated[float, Bounded(...)]`` validates with ``check``.
    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        # an ``int`` field counts whole numbers even when not said twice
        bounds = self if self.integer or source is not int else replace(self, integer=True)

        def validate(value: object) -> float | int:
            return bounds.check(value)

        # the JSON Schema of the field states the same range
        b = bounds

        def whole(x: float | None) -> int | None:
            return None if x is None else int(x)

        target = (
            core_schema.int_schema(ge=whole(b.ge), gt=whole(b.gt), le=whole(b.le), lt=whole(b.lt))
            if b.integer
            else core_schema.float_schema(allow_inf_nan=False, ge=b.ge, gt=b.gt, le=b.le, lt=b.lt)
        )
        return core_schema.no_info_plain_validator_function(
            validate, json_schema_input_schema=target
        )
