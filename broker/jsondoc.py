"""Reading back a JSON document Spotfolio built (a bench result, what-if output).

Owns: ``at`` (the value at a path of keys, ``None`` where any step is
absent or not an object), ``obj`` (a value as an object, ``{}`` when it is
not one), ``number`` and ``count`` (a value that must be a number / an
integer). Readers of such documents (the bench report and target checks, the
what-if table) take blocks that may be empty (a setting not run), partial (a
test's hand-written dict) or built by another module, so they read
``Mapping[str, object]`` through these.

Must not: compute anything or know what a document means.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["at", "count", "number", "obj"]


def obj(value: object) -> Mapping[str, object]:
    """``value`` if it is a JSON object, else ``{}``."""
    return value if isinstance(value, Mapping) else {}


def at(value: object, *keys: str) -> object:
    """``value[k1][k2]...``, or ``None`` where a step is missing."""
    cur = value
    for key in keys:
        if not isinstance(cur, Mapping) or key not in cur:
            return None
        cur = cur[key]
    return cur


def number(value: object, what: str) -> float:
    """``value`` as a float; ``TypeError`` naming ``what`` if it is not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{what}: expected a number, got {value!r}")
    return float(value)


def count(value: object, what: str) -> int:
    """``value`` as an int; ``TypeError`` naming ``what`` if it is not an integer."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what}: expected an integer, got {value!r}")
    return value
