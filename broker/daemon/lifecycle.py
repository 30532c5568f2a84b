"""What the daemon needs of the lifecycle manager, and nothing more.

Owns: ``Lifecycle`` (the protocol every daemon job is typed against: each
method and property the daemon calls on ``broker.lifecycle.LifecycleManager``,
with the manager's own value types; break-glass stretch records are JSON
objects as the store keeps them, ``broker.daemon.store.tx.Json``).

``LifecycleManager`` satisfies the protocol statically: the daemon's wiring
(``broker.daemon.wiring.default_lifecycle``) assigns one to a ``Lifecycle``
variable, so mypy fails when either side drifts. A test double implements
the whole protocol (``tests.fakes.lifecycle.QuietLifecycle`` does nothing),
never a part of it probed with ``getattr``.

Must not: hold any logic, or name the concrete manager.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Protocol

from broker.daemon.store.tx import Json
from broker.lifecycle import Decision, SpotReturn, UnavailableOfferings
from broker.lifecycle.disruption import DisruptionBudget
from markets.cloud_fleet import Instance, Notice
from markets.model import MarketSnapshot, Tier
from policies.cost_table import CostTable

__all__ = ["Lifecycle"]


class Lifecycle(Protocol):
    """The lifecycle manager as the daemon uses it (``broker.lifecycle``)."""

    # --- inputs besides notices ------------------------------------------------
    def on_market(self, snapshot: MarketSnapshot, costs: CostTable | None = None) -> None:
        """A new market snapshot (the clouds we launch in only) and, when the
        caller already has it, its cost table (the plan's: computed once)."""
        ...

    def set_horizon_start(self, at: datetime) -> None:
        """The plan epoch: ``deadline_hours`` count from here."""
        ...

    def report_progress(self, workload: str, done_unit_hours: float) -> None:
        """Work a training or batch job has done so far."""
        ...

    def record_resize(self, workload: str, at: datetime | None = None) -> None:
        """The plan resized an elastic job: its shrink dwell counts from ``at``."""
        ...

    def kept_until_ready(self, instance_ids: Collection[str]) -> None:
        """After a reconcile pass: the on-demand it keeps only until what
        replaces it is ready (``broker.planning.reconcile.surplus``), all of it."""
        ...

    # --- the placement rule (broker.lifecycle.fallback) ------------------------
    @property
    def unavailable(self) -> UnavailableOfferings:
        """The one book of pools that refused capacity, shared with the daemon."""
        ...

    @property
    def disruption(self) -> DisruptionBudget:
        """The one disruption budget: notice decisions and the reconcile's
        plan-driven moves spend it together."""
        ...

    def instead(
        self,
        workload: str,
        failed_pool: str,
        tier: Tier,
        count: int,
        tried: Collection[str],
        now: datetime | None = None,
    ) -> tuple[str, int] | None:
        """Which pool instead of ``failed_pool`` on ``tier``, and how many
        instances give the same work (``None``: none is left)."""
        ...

    def seed_rebalance_history(self, pool_key: str, hits: int, resolved: int) -> None:
        """After a restart: a pool's rebalance record the store kept."""
        ...

    def rebalance_outcomes(self) -> list[tuple[str, bool]]:
        """Rebalance recommendations resolved since the last call, for the store."""
        ...

    def restore_break_glass(self, committed_usd: float, stretches: Sequence[Json] = ()) -> None:
        """After a restart: the store's break-glass total and the stretches
        still open (``stretch_state`` records)."""
        ...

    # --- notices ----------------------------------------------------------------
    def handle(
        self, notice: Notice, fleet: Sequence[Instance], snapshot: MarketSnapshot
    ) -> Decision:
        """One decision for one notice."""
        ...

    def record_launch_failure(
        self, pool_key: str, tier: Tier = ..., *, notice_id: str | None = ...
    ) -> None:
        """A pool refused capacity (for the decision of ``notice_id``, if any)."""
        ...

    def withdraw(self, notice_id: str) -> None:
        """The daemon refused this notice's decision (its budget or cap guard)."""
        ...

    def stretch_state(self, alloc_id: str) -> Json | None:
        """An open break-glass stretch as JSON, for the store (``None``: not open)."""
        ...

    # --- break-glass upkeep -----------------------------------------------------
    def upkeep_due_at(self) -> datetime | None:
        """When ``tick`` must next run (``None``: no stretch open)."""
        ...

    def tick(
        self, now: datetime | None, fleet: Sequence[Instance], snapshot: MarketSnapshot
    ) -> Sequence[SpotReturn]:
        """Return, extend or end break-glass stretches."""
        ...

    @property
    def break_glass_committed_usd(self) -> float:
        """Break-glass dollars committed or spent so far."""
        ...
