"""A small generic registry: names -> factories, with aliases and a default.

Owns: ``Registry`` and the market registry ``MARKETS``. Adapters register
themselves by name; composition roots (CLI, daemon) look them up with
``from_str`` and get an error listing the valid names on a typo.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from markets.errors import InputError

__all__ = ["MARKETS", "Registry"]

T = TypeVar("T")


class Registry(Generic[T]):
    """Name -> value, with aliases and an optional default."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        self._aliases: dict[str, str] = {}
        self.default: str | None = None

    def register(
        self, name: str, *, aliases: tuple[str, ...] = (), default: bool = False
    ) -> Callable[[T], T]:
        def deco(value: T) -> T:
            key = name.lower()
            if key in self._items:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            self._items[key] = value
            for a in aliases:
                self._aliases[a.lower()] = key
            if default:
                self.default = key
            return value

        return deco

    def names(self) -> list[str]:
        return sorted(self._items)

    def from_str(self, name: str | None) -> T:
        key = (name or self.default or "").lower()
        key = self._aliases.get(key, key)
        if key not in self._items:
            raise InputError(f"--{self.kind}", None, f"one of {', '.join(self.names())}", got=name)
        return self._items[key]

    def __contains__(self, name: str) -> bool:
        key = name.lower()
        return key in self._items or key in self._aliases

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


# name -> factory taking keyword options, returning a PriceSource.
MARKETS: Registry[Callable[..., object]] = Registry("market")
