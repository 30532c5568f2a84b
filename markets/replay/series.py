"""Time series of the replay market: change points and probe traces, on int64 ns.

Owns: ``StepSeries`` (values that hold from their time until the next change
point or their source's horizon, with a source label per point) and
``TraceSeries`` (one availability/preemption trace as cumulative functions, so
that the share held over any interval, the revocations in it and the evidence
seen up to a time are a ``searchsorted`` or an ``np.interp`` away). Both shift
in time (``shifted``) for the aligned replay.

Must not: know pools, prices per tier or the join rules (``markets.replay.build``),
or estimate hazards (``markets.hazard.posterior`` does, from ``TraceSeries.exposure_until``).

Times are int64 nanoseconds since the Unix epoch (UTC) everywhere here: the
arithmetic is exact and vectorises; ``NS`` converts.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import NDArray

from markets.hazard.posterior import Exposure

__all__ = ["NEVER", "NS", "FloatArray", "IntArray", "PricePart", "StepSeries", "TraceSeries"]

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]
# One source of price change points: (label, change times ns, prices, the
# time ns they hold until).
PricePart = tuple[str, IntArray, FloatArray, int]

NS = 1_000_000_000  # nanoseconds per second
NEVER = np.iinfo(np.int64).max  # horizon of a value that holds until replaced


@dataclass(frozen=True, eq=False)
class StepSeries:
    """Change points: ``values[i]`` holds from ``t_ns[i]`` until ``t_ns[i + 1]``
    and at most until ``until_ns[i]`` inclusive (the end of the recording it
    came from).
    ``codes[i]`` indexes ``labels`` (where the point came from). NaN values are
    kept: they mean "not known / not offered from here on"."""

    t_ns: IntArray
    values: FloatArray
    until_ns: IntArray
    codes: IntArray
    labels: tuple[str, ...]

    @classmethod
    def empty(cls) -> StepSeries:
        z = np.zeros(0, dtype=np.int64)
        return cls(z, np.zeros(0), z, z, ())

    @classmethod
    def merge(cls, parts: list[PricePart]) -> StepSeries:
        """One series from ``(label, t_ns, values, horizon_ns)`` parts, sorted
        by time (stable: a later part wins a tie)."""
        parts = [p for p in parts if len(p[1])]
        if not parts:
            return cls.empty()
        labels = tuple(dict.fromkeys(p[0] for p in parts))
        t = np.concatenate([p[1] for p in parts]).astype(np.int64)
        v = np.concatenate([p[2] for p in parts]).astype(np.float64)
        until = np.concatenate([np.full(len(p[1]), p[3], dtype=np.int64) for p in parts])
        codes = np.concatenate(
            [np.full(len(p[1]), labels.index(p[0]), dtype=np.int64) for p in parts]
        )
        order = np.argsort(t, kind="stable")
        return cls(t[order], v[order], until[order], codes[order], labels)

    def __len__(self) -> int:
        return len(self.t_ns)

    def at(self, t_ns: IntArray) -> tuple[FloatArray, IntArray]:
        """Values in force at each time (NaN where none) and the index of the
        point used (-1 where none). Vectorised over ``t_ns``."""
        idx = np.searchsorted(self.t_ns, t_ns, side="right") - 1
        ok = idx >= 0
        safe = np.where(ok, idx, 0)
        if len(self.t_ns):
            ok &= t_ns <= self.until_ns[safe]
            vals = np.where(ok, self.values[safe], np.nan)
        else:
            vals = np.full(len(t_ns), np.nan)
        return vals.astype(np.float64), np.where(ok, idx, -1)

    def first_value(self) -> tuple[float, int] | None:
        """The earliest finite value and its index (a backfill for list prices)."""
        finite = np.flatnonzero(np.isfinite(self.values))
        return (float(self.values[finite[0]]), int(finite[0])) if len(finite) else None

    def label(self, idx: int) -> str:
        return self.labels[int(self.codes[idx])]

    def shifted(self, offset_ns: int) -> StepSeries:
        if not offset_ns:
            return self
        until = np.where(self.until_ns == NEVER, NEVER, self.until_ns + offset_ns)
        return replace(self, t_ns=self.t_ns + offset_ns, until_ns=until)

    @property
    def end_ns(self) -> int | None:
        """Last change point (``None`` when empty)."""
        return int(self.t_ns[-1]) if len(self.t_ns) else None


@dataclass(frozen=True, eq=False)
class TraceSeries:
    """One probe trace: ``available[i]`` nodes held during tick ``i`` =
    ``[start_ns + i * gap_ns, start_ns + (i + 1) * gap_ns)``.

    A *loss* is a tick whose count is below the previous tick's: for one node
    the instance was taken back (or spot stopped being obtainable); for N nodes
    ``loss_nodes`` were. ``trace_id`` names the file (path under the data root
    without ``.json``); ``key`` the pool it belongs to.
    """

    trace_id: str
    key: str
    kind: str
    nodes: int
    start_ns: int
    gap_ns: int
    available: IntArray = field(repr=False)
    _held_knots: FloatArray = field(init=False, repr=False, compare=False)
    _cum_nodes: IntArray = field(init=False, repr=False, compare=False)
    _cum_drops: IntArray = field(init=False, repr=False, compare=False)
    loss_ticks: IntArray = field(init=False, repr=False, compare=False)
    loss_nodes: IntArray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        x = self.available
        gap_s = self.gap_ns / NS
        frac = x.astype(np.float64) / self.nodes
        # seconds of "share held" accumulated up to each tick boundary
        object.__setattr__(self, "_held_knots", np.concatenate([[0.0], np.cumsum(frac * gap_s)]))
        object.__setattr__(self, "_cum_nodes", np.concatenate([[0], np.cumsum(x)]))
        drops = np.maximum(x[:-1] - x[1:], 0)
        object.__setattr__(self, "_cum_drops", np.concatenate([[0], np.cumsum(drops)]))
        ticks = np.flatnonzero(drops > 0) + 1
        object.__setattr__(self, "loss_ticks", ticks.astype(np.int64))
        object.__setattr__(self, "loss_nodes", drops[ticks - 1].astype(np.int64))

    @property
    def ticks(self) -> int:
        return len(self.available)

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.ticks * self.gap_ns

    @property
    def gap_s(self) -> float:
        return self.gap_ns / NS

    def shifted(self, offset_ns: int) -> TraceSeries:
        if not offset_ns:
            return self
        return TraceSeries(
            self.trace_id,
            self.key,
            self.kind,
            self.nodes,
            self.start_ns + offset_ns,
            self.gap_ns,
            self.available,
        )

    def _boundaries_s(self, t_ns: IntArray) -> FloatArray:
        """Seconds from the trace start, clipped to the trace."""
        return np.clip(t_ns - self.start_ns, 0, self.end_ns - self.start_ns) / NS

    def held_seconds(self, t_ns: IntArray) -> tuple[FloatArray, FloatArray]:
        """Cumulative (share-held seconds, covered seconds) up to each time:
        differences over an interval give its share held and its coverage."""
        s = self._boundaries_s(t_ns)
        knots = np.arange(self.ticks + 1, dtype=np.float64) * self.gap_s
        return np.interp(s, knots, self._held_knots), s

    def tick_at(self, t_ns: int) -> int | None:
        """The tick in force at ``t_ns`` (``None`` outside the trace)."""
        if not self.start_ns <= t_ns < self.end_ns:
            return None
        return int((t_ns - self.start_ns) // self.gap_ns)

    def losses_between(self, t_ns: IntArray) -> IntArray:
        """Loss ticks counted once each, cumulative up to each time (differences
        give the losses in an interval)."""
        loss_t = self.start_ns + self.loss_ticks * self.gap_ns
        return np.searchsorted(loss_t, t_ns, side="left").astype(np.int64)

    def exposure_until(self, t_ns: int) -> Exposure:
        """Evidence seen by ``t_ns`` (ticks that started by then), as
        ``markets.hazard.probes.exposure_from_counts`` counts it: node drops
        between probes, node-hours held counted at each interval's start."""
        k = (
            0
            if t_ns < self.start_ns
            else min(self.ticks, (t_ns - self.start_ns) // self.gap_ns + 1)
        )
        if k <= 1:
            return Exposure(0, 0.0)
        return Exposure(
            int(self._cum_drops[k - 1]), float(self._cum_nodes[k - 1]) * self.gap_s / 3600.0
        )

    def revocation_times_s(self, until_ns: int) -> FloatArray:
        """Unix seconds of node revocations seen by ``until_ns`` (a drop of d
        nodes gives d equal times), for zone clustering."""
        t = self.start_ns + self.loss_ticks * self.gap_ns
        keep = t <= until_ns
        return np.repeat(t[keep] / NS, self.loss_nodes[keep]).astype(np.float64)
