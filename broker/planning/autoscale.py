"""Live serving demand: a metric's values -> replicas -> reference units.

Owns: the rule that turns a serving workload's ``demand_metric``
(``policies.workloads.metric``) into the replicas to hold now, and the state
it carries between calls (``LiveDemand``). Per call, for each workload:

1. **Forecast** the metric's peak over the lookahead ``L`` (readiness + 1 min
   unless stated: "3 min readiness -> order >= 4 min ahead"): the larger of
   the latest value and the peak of the same window one season ago,
   ``[now - S, now - S + L]`` (seasonal naive, Hyndman & Athanasopoulos,
   *Forecasting: Principles and Practice*, s5.2). A step that came at 09:00
   yesterday is ordered at 08:56 today.
2. **Replicas** ``= ceil(forecast x (1 + margin) / value_per_replica)``,
   clamped to ``[min_replicas, max_replicas]`` (at least 1).
3. **Cooldown**: the replicas held are the largest recommendation of the last
   ``cooldown_minutes`` (Kubernetes HPA's scale-down stabilization window):
   a higher recommendation takes effect at once, a lower one only once the
   first lower reading is ``cooldown`` old and none since was higher (a step
   down read at 12:00 is followed at 12:15).

Degrades: a reader that fails (transient, a bad reply) or a metric with no
samples keeps the last replicas (the error is in the result for the caller to
log); before any good read the workload holds ``min_replicas``.

Must not: log, read the clock (the caller says ``now``), or know a concrete
reader (the composition root hands ``markets.protocols.MetricSource``s).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from markets.errors import FatalError, SpotfolioError
from markets.protocols import MetricSource
from policies.workloads.metric import DemandMetric
from policies.workloads.spec import WorkloadSet

__all__ = ["LiveDemand", "ReplicaRule", "ReplicaTarget", "forecast_peak", "replicas_for"]

_EPS = 1e-9
_RECENT_STEPS = 5  # the latest value: the last sample of the last five steps


@dataclass(frozen=True, slots=True)
class ReplicaRule:
    """One workload's metric settings with its readiness resolved."""

    workload: str
    metric: DemandMetric
    readiness_s: float
    lookahead_s: float

    @classmethod
    def of(cls, workload: str, metric: DemandMetric, readiness_minutes: float) -> ReplicaRule:
        return cls(
            workload, metric, readiness_minutes * 60.0, metric.lookahead_for(readiness_minutes) * 60
        )

    @property
    def cooldown_s(self) -> float:
        return self.metric.cooldown_minutes * 60.0

    @property
    def season_s(self) -> float:
        return self.metric.season_hours * 3600.0


@dataclass(frozen=True, slots=True)
class ReplicaTarget:
    """What one workload holds now, and why."""

    workload: str
    at: datetime
    replicas: int
    units: float  # replicas x units_per_replica (reference units)
    recommended: int  # this call's recommendation, before the cooldown
    forecast: float | None  # the metric's forecast peak (None: no good read)
    error: str | None = None  # why the last replicas were kept
    changed: bool = False  # replicas differ from the previous call's (or the first call)

    @property
    def held_by_cooldown(self) -> bool:
        return self.replicas > self.recommended


def forecast_peak(
    recent: Sequence[tuple[datetime, float]], season_ago: Sequence[tuple[datetime, float]]
) -> float | None:
    """The larger of the latest recent value and the peak one season ago
    (module docstring, step 1); None when both are empty."""
    values = [v for _, v in season_ago]
    if recent:
        values.append(recent[-1][1])
    return max(values) if values else None


def replicas_for(forecast: float, metric: DemandMetric) -> int:
    """Step 2: replicas for ``forecast`` with the margin, clamped."""
    n = math.ceil(forecast * (1.0 + metric.margin) / metric.value_per_replica - _EPS)
    n = max(n, metric.min_replicas)
    return min(n, metric.max_replicas) if metric.max_replicas is not None else n


class LiveDemand:
    """Replicas per live-demand workload, carried between calls (module docstring)."""

    def __init__(self, rules: Sequence[ReplicaRule], sources: Mapping[str, MetricSource]) -> None:
        missing = sorted(r.workload for r in rules if r.workload not in sources)
        if missing:
            raise ValueError(f"no metric source for {', '.join(missing)}")
        self._rules = {r.workload: r for r in rules}
        self._sources = dict(sources)
        self._history: dict[str, deque[tuple[datetime, int]]] = {r.workload: deque() for r in rules}
        self._targets: dict[str, ReplicaTarget] = {}

    @classmethod
    def of(cls, workloads: WorkloadSet, sources: Mapping[str, MetricSource]) -> LiveDemand:
        """Every workload of ``workloads`` with a ``demand_metric``."""
        rules = [
            ReplicaRule.of(w.name, w.demand_metric, w.restart_minutes)
            for w in workloads.workloads
            if w.demand_metric is not None
        ]
        return cls(rules, sources)

    def names(self) -> list[str]:
        return list(self._rules)

    def rule(self, workload: str) -> ReplicaRule:
        return self._rules[workload]

    def units(self, workload: str) -> float:
        """Reference units held now (``min_replicas`` before any read)."""
        target = self._targets.get(workload)
        if target is not None:
            return target.units
        m = self._rules[workload].metric
        return m.min_replicas * m.units_per_replica

    def targets(self) -> dict[str, ReplicaTarget]:
        return dict(self._targets)

    def sense(self, now: datetime) -> list[ReplicaTarget]:
        """Read every metric and update the replicas held; returns every
        workload's target (``changed``: its replicas moved; ``error``: the
        read failed and the last replicas were kept)."""
        out: list[ReplicaTarget] = []
        for name, rule in self._rules.items():
            before = self._targets.get(name)
            target = self._sense_one(rule, now, before)
            moved = before is None or target.replicas != before.replicas
            target = replace(target, changed=moved)
            self._targets[name] = target
            out.append(target)
        return out

    def _sense_one(
        self, rule: ReplicaRule, now: datetime, before: ReplicaTarget | None
    ) -> ReplicaTarget:
        m = rule.metric
        kept = before.replicas if before is not None else m.min_replicas
        try:
            forecast = self._forecast(rule, now)
        except FatalError:
            raise  # auth, a query the server refuses: a human must act
        except SpotfolioError as e:
            return ReplicaTarget(
                rule.workload,
                now,
                kept,
                kept * m.units_per_replica,
                kept,
                None,
                f"{type(e).__name__}: {e}",
            )
        if forecast is None:
            return ReplicaTarget(
                rule.workload,
                now,
                kept,
                kept * m.units_per_replica,
                kept,
                None,
                "no samples in the window",
            )
        rec = replicas_for(forecast, m)
        held = self._stabilised(rule, now, rec)
        return ReplicaTarget(rule.workload, now, held, held * m.units_per_replica, rec, forecast)

    def _forecast(self, rule: ReplicaRule, now: datetime) -> float | None:
        m, src = rule.metric, self._sources[rule.workload]
        step = m.step_seconds
        recent = src.series(m.query, now - timedelta(seconds=_RECENT_STEPS * step), now, step)
        season_ago: Sequence[tuple[datetime, float]] = ()
        if rule.season_s > 0:
            a = now - timedelta(seconds=rule.season_s)
            season_ago = src.series(m.query, a, a + timedelta(seconds=rule.lookahead_s), step)
        return forecast_peak(recent, season_ago)

    def _stabilised(self, rule: ReplicaRule, now: datetime, recommended: int) -> int:
        """Step 3: the largest recommendation in ``[now - cooldown, now]``: a
        lower one holds once every reading for ``cooldown``, the first
        lower one included, was lower."""
        hist = self._history[rule.workload]
        hist.append((now, recommended))
        edge = now - timedelta(seconds=rule.cooldown_s)
        while len(hist) > 1 and hist[0][0] < edge:
            hist.popleft()
        return max(n for _, n in hist)
