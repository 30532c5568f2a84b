"""A small generic registry: names -> factories, with aliases and a default.

Owns: ``Registry``, the market registry ``MARKETS``, and the lazy
name -> "module:factory" tables ``MARKET_FACTORIES`` (``open_market``) and
``PROVIDER_FACTORIES`` (``open_provider``: cloud accounts we act in). Adapters
register themselves by name; composition roots (CLI, daemon) look them up and
get an error listing the valid names on a typo.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from markets.errors import InputError

__all__ = [
    "MARKETS",
    "MARKET_FACTORIES",
    "PROVIDER_FACTORIES",
    "Registry",
    "market_factory",
    "open_market",
    "open_provider",
    "provider_factory",
]

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


# Market adapters by name, as "module:attribute" so that naming a market never
# imports its SDK. Each attribute is a factory taking keyword options and
# returning a ``markets.protocols.PriceSource``.
MARKET_FACTORIES: dict[str, str] = {
    "default": "markets.default.market:open_default_market",
    "replay": "markets.replay:open_replay_market",
    "aws": "markets.aws.market:open_aws_market",
    "gcp": "markets.gcp.market:open_gcp_market",
}


def market_factory(name: str) -> Callable[..., object]:
    """The factory registered under ``name`` (imported on first use)."""
    import importlib

    key = name.lower()
    if key not in MARKET_FACTORIES:
        raise InputError(
            "--market", None, f"one of {', '.join(sorted(MARKET_FACTORIES))} or a path", got=name
        )
    module_name, attr = MARKET_FACTORIES[key].split(":")
    module = importlib.import_module(module_name)
    factory: Callable[..., object] = getattr(module, attr)
    return factory


def open_market(spec: str | None = None, **options: object) -> object:
    """Open a market from a CLI-style spec: a registered name (``default``,
    ``aws``, ``gcp``) or a path to a recorded history (file or directory laid
    out like ``shared/data``), which opens the replay market."""
    from pathlib import Path

    spec = spec or "default"
    if spec.lower() in MARKET_FACTORIES:
        return market_factory(spec)(**options)
    path = Path(spec)
    if path.exists():
        return market_factory("replay")(path=path, **options)
    raise InputError(
        "--market",
        None,
        f"one of {', '.join(sorted(MARKET_FACTORIES))}, or an existing file or directory",
        got=spec,
    )


# Cloud provider adapters by name, as "module:attribute" (naming one imports no
# SDK). Each attribute is a factory taking keyword options and returning a
# ``markets.protocols.Provider``. Only adapters under ``markets`` are listed:
# the simulated cloud lives in ``broker`` (markets never imports broker), so
# the broker's composition root resolves "sim" before asking this registry.
PROVIDER_FACTORIES: dict[str, str] = {
    "aws": "markets.aws.provider:open_aws_provider",
    "gcp": "markets.gcp.provider:open_gcp_provider",
}


def provider_factory(name: str) -> Callable[..., object]:
    """The provider factory registered under ``name`` (imported on first use)."""
    import importlib

    key = name.lower()
    if key not in PROVIDER_FACTORIES:
        raise InputError(
            "--provider", None, f"one of {', '.join(sorted(PROVIDER_FACTORIES))}", got=name
        )
    module_name, attr = PROVIDER_FACTORIES[key].split(":")
    factory: Callable[..., object] = getattr(importlib.import_module(module_name), attr)
    return factory


def open_provider(name: str, **options: object) -> object:
    """Open the cloud provider ``name`` with its keyword options (for
    ``aws``: ``owner``, ``launch``, ``queue_url``...; see the adapter)."""
    return provider_factory(name)(**options)
