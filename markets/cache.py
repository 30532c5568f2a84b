"""The per-component TTL cache of the live market adapters (AWS, GCP).

Owns: ``TtlCache`` and its ``Entry``. Each component of a snapshot (zones,
instance types, prices...) is cached under its own key with its own lifetime
(``markets.ttl``). One rule for every key:

- a value younger than its TTL is reused;
- an older one is refetched;
- if the refetch raises a ``TransientError`` (throttled or 5xx after the SDK's
  own retries, network), the old value is kept, a warning is logged and the
  key is recorded in ``stale_keys`` (the adapter marks its snapshot stale);
- with no old value there is nothing honest to plan on: ``StaleDataError``;
- any other error (auth, bad input) propagates untouched, never masked as
  stale.

Age is measured on the injected clock's ``monotonic()``, stamped when the
fetch starts; ``Entry.fetched_at`` is the clock's ``now()`` once the answer is
in (what a snapshot reports as ``observed_at``).

Must not: retry or sleep (the SDK's retry config does), read the wall clock
directly, hold TTL figures (``markets.ttl`` does), or decide whether a
snapshot is stale for other reasons (the adapter adds those).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar, cast

from markets.clock import Clock
from markets.errors import StaleDataError, TransientError

__all__ = ["Entry", "TtlCache"]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


@dataclass(frozen=True)
class Entry(Generic[T_co]):
    """A cached answer: its value, when the fetch started (monotonic seconds)
    and when the answer was had (clock time)."""

    value: T_co
    fetched_mono: float
    fetched_at: datetime


class TtlCache:
    """Cached answers by key; see the module docstring for the rule.

    ``source`` prefixes log lines and the ``StaleDataError`` source (``aws``,
    ``gcp``); ``answer_from`` names who failed to answer (``AWS``, ``Compute
    Engine``); ``log`` is the adapter's logger, so its records keep the
    adapter's name.
    """

    def __init__(self, clock: Clock, *, source: str, answer_from: str, log: logging.Logger) -> None:
        self._clock = clock
        self._source = source
        self._answer_from = answer_from
        self._log = log
        # Values of several types under their keys; get() gives each its own
        # type back (a key is always fetched by the same function).
        self._entries: dict[str, Entry[object]] = {}
        self._stale: set[str] = set()

    @property
    def stale_keys(self) -> frozenset[str]:
        """Keys whose old value was kept since the last ``clear_stale()``."""
        return frozenset(self._stale)

    def clear_stale(self) -> None:
        """Forget which keys were kept stale (an adapter does so per snapshot)."""
        self._stale.clear()

    def get(self, key: str, ttl_s: float, fetch: Callable[[], T]) -> Entry[T]:
        """The cached value for ``key``, refetched with ``fetch`` past ``ttl_s``."""
        entry = self._entries.get(key)
        mono = self._clock.monotonic()
        if entry is not None and mono - entry.fetched_mono < ttl_s:
            return cast(Entry[T], entry)
        try:
            value = fetch()
        except TransientError as e:
            if entry is None:
                raise StaleDataError(
                    f"{self._source} {key}",
                    None,
                    f"one successful answer from {self._answer_from}",
                    got=str(e),
                ) from e
            self._log.warning(
                "%s %s: refresh failed (%s); keeping the answer of %s",
                self._source,
                key,
                e,
                entry.fetched_at,
            )
            self._stale.add(key)
            return cast(Entry[T], entry)
        fresh = Entry(value=value, fetched_mono=mono, fetched_at=self._clock.now())
        self._entries[key] = fresh
        return fresh
