"""The one disruption budget: revocation-driven and broker-made moves together.

Owns ``DisruptionBudget``: the fleet-wide churn budget of
``policies.breakglass.ChurnBudget`` (at most ``churn_max_share`` of capacity
moved per ``churn_window_s``: 5 % per 10 minutes, docs/concepts/effective-cost.md,
example C), plus what a move of one *job* may do: at most one move per job
per ``min_interval_s`` (one per hour, the same example), and each workload's
own ``disruption`` block (``policies.workloads.spec.Disruption``, like a
Karpenter NodePool's disruption budgets: a share of the workload's own units
per window, its own interval; it only tightens the fleet's).

Two kinds of move spend it, in one ledger:

- *revocation-driven*: the lifecycle's spot (re)placements inside a notice
  window (``broker.lifecycle.chooser`` records them with their workload);
  they are never refused for the job's interval (the capacity is gone
  already), but they start it;
- *broker-made*: the daemon's reconcile ending running spot capacity, or any
  capacity of a training gang, because a re-plan moved it
  (``broker.daemon.reconcile`` asks ``grant`` and then ``record``\\s what it
  ended). A move the budget does not grant waits: the instances stay and the
  plan's launches that would replace them are held back
  (``broker.planning.reconcile.hold``).

A gang moves whole or not at all (a synchronous job restarts whichever of
its nodes moves); a move larger than the budget is let through only into an
empty window (nothing else moved in it), so a large gang can still move, at
most one such move per window, as the fleet's floor lets a small fleet move
one node. A workload with ``max_share: 0`` is never moved by the broker.

Sequence: ``10:00 re-plan moves 4 x p4d spot of llm-finetune -> granted
(window empty) -> 10:05 a revocation replaces 1 node (counted, the job's
hour restarts) -> 10:15 re-plan moves research-sweeps 2 x p3.8xlarge: 8 of
the 10 units left -> granted -> 10:30 re-plan moves llm-finetune again ->
refused until 11:05 (one move per hour)``.

Must not: do I/O, read the clock (callers pass ``now_s``), or choose what
moves (the plan and the lifecycle do).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from policies.breakglass import ChurnBudget
from policies.workloads.spec import Disruption, Workload

__all__ = ["DisruptionBudget"]

_EPS = 1e-9


class DisruptionBudget(ChurnBudget):
    """The fleet's churn budget, the jobs' move interval and the workloads'
    own budgets (module docstring). ``record`` without a workload is a
    fleet-level count only (``ChurnBudget``'s)."""

    def __init__(
        self,
        window_s: float,
        max_share: float,
        floor_units: float,
        min_interval_s: float,
        workloads: Iterable[Workload] = (),
    ) -> None:
        super().__init__(window_s, max_share, floor_units)
        if min_interval_s < 0:
            raise ValueError("min_interval_s >= 0")
        self.min_interval_s = min_interval_s
        self._specs: dict[str, Disruption] = {w.name: w.disruption for w in workloads}
        self._last_move_s: dict[str, float] = {}
        self._own: dict[str, ChurnBudget] = {}
        for name, d in self._specs.items():
            if d.max_share is not None and d.max_share > 0:
                window = window_s if d.window_minutes is None else d.window_minutes * 60.0
                self._own[name] = ChurnBudget(window, d.max_share, 0.0)

    def interval_s(self, workload: str) -> float:
        """Least time between two moves of ``workload`` (its own interval
        only ever lengthens the fleet's)."""
        d = self._specs.get(workload)
        if d is None or d.min_interval_minutes is None:
            return self.min_interval_s
        return max(self.min_interval_s, d.min_interval_minutes * 60.0)

    def last_move_s(self, workload: str) -> float | None:
        return self._last_move_s.get(workload)

    def record(self, units: float, now_s: float, workload: str | None = None) -> None:
        """A move of ``units`` (of ``workload``, if known) at ``now_s``."""
        super().record(units, now_s)
        if workload is None:
            return
        last = self._last_move_s.get(workload)
        self._last_move_s[workload] = now_s if last is None else max(last, now_s)
        own = self._own.get(workload)
        if own is not None:
            own.record(units, now_s)

    def block_reason(self, workload: str, now_s: float) -> str | None:
        """Why no broker-made move of ``workload`` may start now (``None``: it
        may, within the units ``grant`` allows)."""
        d = self._specs.get(workload)
        if d is not None and d.max_share == 0:
            return f"{workload}'s disruption budget is 0: the broker never moves it"
        last = self._last_move_s.get(workload)
        interval = self.interval_s(workload)
        if last is not None and now_s - last < interval:
            return (
                f"{workload} moved {(now_s - last) / 60:.0f} min ago: "
                f"one move per {interval / 60:.0f} min"
            )
        return None

    def grant(
        self,
        workload: str,
        units_each: Sequence[float],
        *,
        capacity_units: float,
        workload_units: float,
        now_s: float,
        whole: bool,
        granted_units: float = 0.0,
    ) -> int:
        """How many of the instances (``units_each``, in the order they would
        end) a broker-made move of ``workload`` may end now: all, a leading
        part that fits (never for a ``whole`` gang), or none.
        ``granted_units``: units granted to other moves in this same pass,
        not recorded yet."""
        if not units_each or self.block_reason(workload, now_s) is not None:
            return 0
        used = self.used_units(now_s) + granted_units
        limit = self.limit_units(capacity_units)
        own = self._own.get(workload)
        own_used = 0.0 if own is None else own.used_units(now_s)
        own_limit = 0.0 if own is None else own.limit_units(workload_units)
        total = float(sum(units_each))

        def fits(units: float) -> bool:
            if used + units > limit + _EPS:
                return False
            return own is None or own_used + units <= own_limit + _EPS

        if fits(total):
            return len(units_each)
        empty = used <= _EPS and own_used <= _EPS
        if whole:
            return len(units_each) if empty else 0
        n, acc = 0, 0.0
        for u in units_each:
            if not fits(acc + u):
                break
            acc += u
            n += 1
        return max(n, 1) if empty else n
