"""The benchmark suite: settings side by side on the same trace windows.

Owns: ``BenchData`` (what every setting runs on) and ``SettingRun``, the one
shape a setting has: ``run(data, windows, seed) -> Mapping`` (a JSON-ready
block; the built-in settings return TypedDicts). The
settings are modules: ``broker.bench.deadline`` (docs/docs/benchmarks.md),
``broker.bench.fleet`` (section 2); the portfolio setting (section 3) and the
solver measurements (section 4) plug in through
``broker.bench.runner.SETTINGS["portfolio"]`` and
``broker.bench.runner.MACHINERY_HOOKS["solver"]``. ``broker.bench.runner``
composes them with the machinery measurements; ``broker.bench.report``
writes the markdown report and charts.

Must not: read files or open markets (the CLI builds ``BenchData``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from broker.simulate import AvailabilityTrace

__all__ = ["BenchData", "SettingRun"]


@dataclass(frozen=True)
class BenchData:
    """What the settings run on.

    ``traces``: availability traces at their own tick (deadline windows come
    from each; fleets replay the traces of one ``group`` together).
    ``market``: the market the data came from (the default market, or the
    replay market over ``--data``; a ``markets.protocols.HistorySource``), for
    settings that need prices and hourly history (the portfolio setting).
    ``inventory``: what ``markets.files.datadir.discover`` loaded, with ``--data``.
    """

    source: str
    traces: tuple[AvailabilityTrace, ...]
    market: object | None = field(default=None, repr=False)
    inventory: object | None = field(default=None, repr=False)


SettingRun = Callable[[BenchData, int, int], Mapping[str, object]]
