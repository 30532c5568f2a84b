"""``--market-option KEY=VALUE``: the one parser every command that opens a market uses.

Owns: ``market_options`` (pairs to keyword options for
``markets.registry.open_market``). What each key means belongs to the market
adapter (``regions=``, ``zones=``, ``project=``, ``prices=``...).

Must not: interpret values (the adapter validates its own options).
"""

from __future__ import annotations

from markets.errors import InputError

__all__ = ["market_options"]


def market_options(pairs: tuple[str, ...]) -> dict[str, str]:
    """``("regions=us-west-2", "project=p")`` -> ``{"regions": "us-west-2", ...}``;
    dashes in keys become underscores; a pair without ``=`` is exit 2."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InputError("--market-option", None, "KEY=VALUE, e.g. regions=us-west-2", got=pair)
        out[key.strip().replace("-", "_")] = value.strip()
    return out
