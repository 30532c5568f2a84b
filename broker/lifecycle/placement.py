"""The spot placement score at reaction time, read per its TTL.

Owns ``PlacementReader`` (what reads the current scores: a market that can
ask the cloud now, e.g. AWS ``GetSpotPlacementScores``), ``ScoreReading``
(scores by pool key, how old, and whose) and ``CurrentScores``, which asks
the reader at most once per ``markets.ttl.SPOT_PLACEMENT_SCORE_TTL_S`` and
otherwise answers from the last reading. Without a reader, or when a reading
fails transiently, the scores are the snapshot's (or the last good reading,
whichever is newer), and the reading says how old they are.

Why: the snapshot in force may be an hour old when a notice comes, and the
placement score is the one signal of whether a request is *fulfilled* now
(docs/concepts/market.md); a replacement sent to a pool that will refuse it
spends the notice window. ``broker.lifecycle.view.Candidates`` ranks with the
reading; the replacement's reason names the score and its age.

Must not: read a clock (times are handed in), call a cloud itself, or rank.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from markets.errors import TransientError
from markets.model import MarketSnapshot
from markets.ttl import SPOT_PLACEMENT_SCORE_TTL_S

__all__ = ["CurrentScores", "PlacementReader", "ScoreReading"]


@runtime_checkable
class PlacementReader(Protocol):
    """Current placement scores, 1-10, by pool key (a pool missing: no score)."""

    def placement_scores(self) -> Mapping[str, int]: ...


@dataclass(frozen=True)
class ScoreReading:
    scores: Mapping[str, int]
    read_s: float  # when (epoch s)
    source: str  # "live": asked the reader; "snapshot": the snapshot's own

    def age_s(self, now_s: float) -> float:
        return max(0.0, now_s - self.read_s)

    def describe(self, pool_key: str, now_s: float) -> str:
        score = self.scores.get(pool_key)
        if score is None:
            return "no placement score"
        age = self.age_s(now_s) / 60.0
        return f"placement score {score}/10 ({self.source}, {age:.0f} min old)"


@dataclass
class CurrentScores:
    """The reading in force; ``reader`` asked at most once per ``ttl_s``."""

    reader: PlacementReader | None = None
    ttl_s: float = SPOT_PLACEMENT_SCORE_TTL_S
    _live: ScoreReading | None = field(default=None, repr=False)
    _tried_s: float = field(default=float("-inf"), repr=False)
    _of_snapshot: tuple[MarketSnapshot, ScoreReading] | None = field(default=None, repr=False)
    reads: int = 0  # calls to the reader (tests count them)

    def at(self, now_s: float, snapshot: MarketSnapshot) -> ScoreReading:
        if self.reader is not None and now_s - self._tried_s >= self.ttl_s:
            self._tried_s = now_s
            self.reads += 1
            # A transient failure keeps the last good reading; its age says how old.
            with contextlib.suppress(TransientError):
                self._live = ScoreReading(dict(self.reader.placement_scores()), now_s, "live")
        snap_s = snapshot.at.timestamp()
        if self._live is not None and self._live.read_s >= snap_s:
            return self._live
        if self._of_snapshot is None or self._of_snapshot[0] is not snapshot:
            scores = {p.pool.key: p.placement_score for p in snapshot.pools}
            reading = ScoreReading(
                {k: v for k, v in scores.items() if v is not None}, snap_s, "snapshot"
            )
            self._of_snapshot = (snapshot, reading)  # the same reading while it is in force
        return self._of_snapshot[1]
