"""Replay simulators: real availability traces through the policies' own rules.

Owns: ``AvailabilityTrace``, the one input shape every simulator here reads
(a per-tick "could spot be held" series for one pool, on an integer-second
tick), and ``coarsen`` (many fine ticks -> one decision tick). The engines:
``broker.simulate.deadline`` (one job against a deadline),
``broker.simulate.fleet`` (N serving replicas over several zones) and
``broker.simulate.omniscient`` (the hindsight optimum of both).

Must not: read files or name a market adapter. Composition roots (the CLI)
turn ``markets.files.traces.SpotTrace`` or the default market into traces here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

__all__ = ["AvailabilityTrace", "BoolArray", "coarsen"]

BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class AvailabilityTrace:
    """Per tick of ``tick_s`` seconds: could spot be held in the pool.

    ``group`` names the set of traces replayed together in the fleet setting
    (same instance type and collection, different zones); ``zone`` the zone.
    ``spot_price_ratio`` is spot / on-demand for the pool when known;
    ``provider`` sets the revocation notice (AWS 120 s, GCP 30 s).
    """

    name: str
    zone: str
    group: str
    tick_s: int
    held: BoolArray = field(repr=False, compare=False)
    spot_price_ratio: float | None = None
    provider: str = "aws"

    def __post_init__(self) -> None:
        if self.tick_s <= 0:
            raise ValueError(f"{self.name}: tick_s must be > 0, got {self.tick_s}")
        if self.held.ndim != 1 or self.held.dtype != np.bool_:
            raise ValueError(f"{self.name}: held must be a 1-d bool array")

    @property
    def ticks(self) -> int:
        return len(self.held)

    @property
    def hours(self) -> float:
        return self.ticks * self.tick_s / 3600.0

    @property
    def held_share(self) -> float:
        return float(self.held.mean()) if self.ticks else 0.0


def coarsen(trace: AvailabilityTrace, max_tick_s: int) -> AvailabilityTrace:
    """Merge whole groups of ticks into ticks of at most ``max_tick_s`` seconds.

    A merged tick is held only if spot was held in every fine tick inside it: a
    revocation inside a decision tick ends that tick's hold (the conservative
    reading; the trailing partial group is dropped). A trace already at or above
    ``max_tick_s`` is returned unchanged.
    """
    m = max(1, max_tick_s // trace.tick_s)
    if m == 1:
        return trace
    n = trace.ticks // m
    held: BoolArray = np.asarray(trace.held[: n * m].reshape(n, m).all(axis=1), dtype=np.bool_)
    return AvailabilityTrace(
        name=trace.name,
        zone=trace.zone,
        group=trace.group,
        tick_s=trace.tick_s * m,
        held=held,
        spot_price_ratio=trace.spot_price_ratio,
        provider=trace.provider,
    )
