"""The simulated cloud as a registered provider: ``open_sim_provider``.

Owns: the factory that ``markets.registry.PROVIDERS`` names ``sim``, and
what its keyword options mean. Composition roots open the simulated cloud
through the registry like any other provider, and never name this package.

Options:

- ``market`` (required): a market with an hourly history (``default``,
  ``replay``), whose capacity, prices and revocations the account follows;
- ``clock``: the account's clock (a ``ManualClock`` the caller moves, for
  accelerated time). Without it, simulated time runs at the real rate from
  ``start`` (default: the market's first hour) on an ``OffsetClock``;
- ``options`` (a ``SimOptions``) or its fields as keywords (``seed``,
  ``notice_seconds``, ``providers``, ...), not both;
- ``state_file``: keep the account in this file across processes
  (``markets.sim.persist``; not with ``clock``: the file keeps its own
  time), and ``latency_s``, the wall-clock time each mutating call takes.

The provider returned has a ``clock`` attribute: the caller runs on it.

Must not: decide anything, or be named outside a registry entry.
"""

from __future__ import annotations

from dataclasses import fields
from datetime import datetime
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from markets.clock import Clock
from markets.errors import InputError
from markets.protocols import HistorySource, PriceSource
from markets.sim.cloud import SimCloud, SimOptions
from markets.sim.persist import OffsetClock, PersistentSimCloud
from markets.validation import input_error_from

__all__ = ["open_sim_provider"]

_OPTION_FIELDS = frozenset(f.name for f in fields(SimOptions))
_OPTIONS = TypeAdapter(SimOptions)  # unknown fields: refused above


def open_sim_provider(
    *,
    market: PriceSource,
    clock: Clock | None = None,
    start: datetime | None = None,
    options: SimOptions | None = None,
    state_file: str | Path | None = None,
    latency_s: float = 0.0,
    **option_fields: object,
) -> SimCloud | PersistentSimCloud:
    """The registry's factory: ``open_provider("sim", market=..., seed=...)``
    (options: the module docstring)."""
    unknown = sorted(set(option_fields) - _OPTION_FIELDS)
    if unknown:
        names = ", ".join(sorted(_OPTION_FIELDS))
        raise InputError("provider options", unknown[0], f"a simulated cloud option ({names})")
    if options is not None and option_fields:
        raise InputError(
            "provider options", sorted(option_fields)[0], "either options=SimOptions or its fields"
        )
    if options is None:
        try:
            options = _OPTIONS.validate_python(option_fields)
        except ValidationError as e:
            raise input_error_from("provider options", e) from e
    if not isinstance(market, HistorySource):
        raise InputError(
            "provider options",
            "market",
            "a market with an hourly history (default, replay) for the simulated cloud",
            got=market.name,
        )
    if state_file is not None:
        if clock is not None:
            raise InputError(
                "provider options", "clock", "no clock with a state_file (the file keeps its time)"
            )
        cloud, _ = PersistentSimCloud.open(market, state_file, options, start, latency_s=latency_s)
        return cloud
    if clock is None:
        clock = OffsetClock.starting_at(start or market.span()[0])
    return SimCloud(market, clock, options)
