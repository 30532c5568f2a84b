"""One generic registry: names -> factories, with aliases, a default, and lazy entries.

Owns: ``Registry`` and the two registries of this package: ``MARKETS``
(``open_market``: price sources) and ``PROVIDERS`` (``open_provider``: cloud
accounts we act in, the simulated one included). ``policies.online.registry``
builds the online rules' registries from the same class.

An entry is either a value or a lazy ``"module:attribute"`` target, imported on
first use: naming ``aws`` or listing the registered names never imports boto3
or the Google clients, so ``spotfolio whatif`` starts fast and runs without
them (an adapter whose extra is not installed is a ``MissingExtraError``). A
typo is an ``InputError`` naming the option as the user wrote it (``--market``,
``--provider``, ``--policy``) and listing the valid names.

Must not: import an adapter at import time, or know what a factory's options
mean (each adapter validates its own).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from markets.errors import InputError
from markets.extras import needs_extra
from markets.protocols import PriceSource, Provider

__all__ = [
    "MARKETS",
    "PROVIDERS",
    "Registry",
    "open_market",
    "open_provider",
]

T = TypeVar("T")


@dataclass(frozen=True)
class _Lazy:
    """``module:attribute``, imported when first asked for."""

    module: str
    attribute: str

    @classmethod
    def parse(cls, target: str) -> _Lazy:
        module, sep, attribute = target.partition(":")
        if not (module and sep and attribute):
            raise ValueError(f"lazy registry target {target!r}: expected 'module:attribute'")
        return cls(module, attribute)


class Registry(Generic[T]):
    """Name -> value of type ``T`` (usually a factory), with aliases and an
    optional default.

    ``kind`` says what is registered ("market", "provider"); ``option`` is the
    command-line option a user names one with, for the error on a typo.
    Names are case-insensitive. Iteration yields the names in the order they
    were registered (benchmarks keep their column order); errors list them
    sorted.
    """

    def __init__(self, kind: str, option: str) -> None:
        self.kind = kind
        self.option = option
        self._items: dict[str, T | _Lazy] = {}
        self._targets: dict[str, str] = {}  # lazy entries' "module:attribute"
        self._aliases: dict[str, str] = {}
        self.default: str | None = None

    # -- registering -------------------------------------------------------------

    def add(
        self, name: str, value: T, *, aliases: tuple[str, ...] = (), default: bool = False
    ) -> None:
        """Register ``value`` under ``name``."""
        self._put(name, value, aliases, default)

    def add_lazy(
        self, name: str, target: str, *, aliases: tuple[str, ...] = (), default: bool = False
    ) -> None:
        """Register ``"module:attribute"`` under ``name``; it is imported the
        first time ``get`` is asked for it."""
        self._put(name, _Lazy.parse(target), aliases, default)
        self._targets[name.lower()] = target

    def register(
        self, name: str, *, aliases: tuple[str, ...] = (), default: bool = False
    ) -> Callable[[T], T]:
        """Decorator form of ``add``."""

        def deco(value: T) -> T:
            self.add(name, value, aliases=aliases, default=default)
            return value

        return deco

    def _put(self, name: str, entry: T | _Lazy, aliases: tuple[str, ...], default: bool) -> None:
        key = name.lower()
        if key in self._items or key in self._aliases:
            raise ValueError(f"{self.kind} {name!r} registered twice")
        self._items[key] = entry
        for alias in aliases:
            a = alias.lower()
            if a in self._items or a in self._aliases:
                raise ValueError(f"{self.kind} alias {alias!r} registered twice")
            self._aliases[a] = key
        if default:
            if self.default is not None:
                raise ValueError(f"two default {self.kind}s: {self.default!r} and {name!r}")
            self.default = key

    # -- looking up --------------------------------------------------------------

    def canonical(self, name: str | None, *, option: str | None = None) -> str:
        """The registered name ``name`` denotes (an alias resolved; ``None``:
        the default). An unknown name is an ``InputError`` naming ``option``
        (default: this registry's) and listing the valid names."""
        key = (name if name is not None else self.default or "").lower()
        key = self._aliases.get(key, key)
        if key not in self._items:
            raise InputError(option or self.option, None, self.expected(), got=name)
        return key

    def get(self, name: str | None = None, *, option: str | None = None) -> T:
        """The value registered under ``name`` (see ``canonical``), a lazy
        target imported now (once)."""
        key = self.canonical(name, option=option)
        entry = self._items[key]
        if not isinstance(entry, _Lazy):
            return entry
        # getattr gives no type: the target is trusted to be a T, as a
        # decorator-registered value is (the contract tests open every one).
        # An adapter whose SDK is an extra not installed: one line naming it.
        with needs_extra(option or self.option, got=name):
            value: T = getattr(importlib.import_module(entry.module), entry.attribute)
        self._items[key] = value
        return value

    def target(self, name: str) -> str | None:
        """The ``"module:attribute"`` of a lazy entry (``None`` for a value
        registered as it is); for tests that check it without importing it."""
        return self._targets.get(self.canonical(name))

    def expected(self) -> str:
        """ "one of a, b, c": what an error says would have been accepted."""
        return f"one of {', '.join(sorted(self._items))}"

    def names(self) -> list[str]:
        """Registered names (not aliases), in registration order."""
        return list(self._items)

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        key = name.lower()
        return key in self._items or key in self._aliases

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._items)


# -- markets ----------------------------------------------------------------------

# Each factory takes keyword options and returns a ``PriceSource``.
MARKETS: Registry[Callable[..., PriceSource]] = Registry("market", "--market")
MARKETS.add_lazy("default", "markets.default.market:open_default_market", default=True)
MARKETS.add_lazy("replay", "markets.replay:open_replay_market")
MARKETS.add_lazy("aws", "markets.aws.market:open_aws_market")
MARKETS.add_lazy("gcp", "markets.gcp.market:open_gcp_market")
# A daemon's store as interruption history over another market: its opener is
# a broker composition root (the store is the daemon's), named here as a lazy
# target only, as ``policies.online.registry`` names the product's fleet rule.
MARKETS.add_lazy("store", "broker.cli.store_market:open_store_market")


def open_market(
    spec: str | None = None, option_name: str = "--market", /, **options: object
) -> PriceSource:
    """Open a market from a CLI-style spec: a registered name (``default``,
    ``aws``, ``gcp``; ``None``: ``default``) or a path to a recorded history
    (file or directory of public datasets, ``markets.files.datadir``), which opens the replay
    market. ``option_name`` is the option the spec came from, for the error
    (positional, so that no adapter option can collide with it)."""
    if spec is None or spec in MARKETS:
        return MARKETS.get(spec, option=option_name)(**options)
    path = Path(spec)
    if spec.strip() and path.exists():  # "" and " " are no path, not the working directory
        return MARKETS.get("replay")(path=path, **options)
    raise InputError(
        option_name, None, f"{MARKETS.expected()}, or an existing file or directory", got=spec
    )


# -- providers --------------------------------------------------------------------

# Each factory takes keyword options and returns a ``Provider`` (see each
# adapter's factory for its options).
PROVIDERS: Registry[Callable[..., Provider]] = Registry("provider", "--provider")
PROVIDERS.add_lazy("sim", "markets.sim.provider:open_sim_provider", default=True)
PROVIDERS.add_lazy("aws", "markets.aws.provider:open_aws_provider")
PROVIDERS.add_lazy("gcp", "markets.gcp.provider:open_gcp_provider")


def open_provider(name: str | None = None, **options: object) -> Provider:
    """Open the cloud provider ``name`` (``None``: the simulated cloud, as
    the daemon's config defaults to) with its keyword options (``aws``:
    ``owner``, ``launch``, ``queue_url``...; ``sim``: ``market``, ``clock``,
    ``state_file``...; see the adapter's factory)."""
    return PROVIDERS.get(name)(**options)
