"""A lifecycle manager that decides nothing, for testing one daemon job alone.

``QuietLifecycle`` implements the whole ``broker.daemon.lifecycle.Lifecycle``
protocol (``mypy --strict tests/fakes/lifecycle.py`` checks it through the
annotated assignment at the bottom): every notice is ignored, no stretch is
ever open, no pool is offered instead of a refused one (its book of refused
pools is a real one), and what the daemon told it is kept in ``calls`` so a test can
assert on it. Subclass it to answer one method differently.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from datetime import datetime

from broker.daemon.lifecycle import Lifecycle
from broker.daemon.store.tx import Json
from broker.lifecycle import Decision, DecisionKind, SpotReturn, UnavailableOfferings
from broker.lifecycle.disruption import DisruptionBudget
from markets.cloud_fleet import Instance, Notice
from markets.model import MarketSnapshot, Tier
from policies.cost_table import CostTable

__all__ = ["QuietLifecycle"]


class QuietLifecycle:
    """Ignores every notice and records every call as ``(method, args...)``."""

    def __init__(self) -> None:
        self.calls: list[tuple[object, ...]] = []
        self.committed_usd = 0.0
        self._unavailable = UnavailableOfferings()
        # Unbounded: a quiet lifecycle holds no move back.
        self._disruption = DisruptionBudget(600.0, 1.0, math.inf, 0.0)

    def on_market(self, snapshot: MarketSnapshot, costs: CostTable | None = None) -> None:
        self.calls.append(("on_market", snapshot, costs))

    def set_horizon_start(self, at: datetime) -> None:
        self.calls.append(("set_horizon_start", at))

    def report_progress(self, workload: str, done_unit_hours: float) -> None:
        self.calls.append(("report_progress", workload, done_unit_hours))

    def record_resize(self, workload: str, at: datetime | None = None) -> None:
        self.calls.append(("record_resize", workload, at))

    def kept_until_ready(self, instance_ids: Collection[str]) -> None:
        self.calls.append(("kept_until_ready", tuple(instance_ids)))

    @property
    def unavailable(self) -> UnavailableOfferings:
        return self._unavailable

    @property
    def disruption(self) -> DisruptionBudget:
        return self._disruption

    def instead(
        self,
        workload: str,
        failed_pool: str,
        tier: Tier,
        count: int,
        tried: Collection[str],
        now: datetime | None = None,
    ) -> tuple[str, int] | None:
        """No pool instead: a quiet lifecycle knows no market."""
        self.calls.append(("instead", workload, failed_pool, tier, count))
        return None

    def seed_rebalance_history(self, pool_key: str, hits: int, resolved: int) -> None:
        self.calls.append(("seed_rebalance_history", pool_key, hits, resolved))

    def rebalance_outcomes(self) -> list[tuple[str, bool]]:
        return []

    def restore_break_glass(self, committed_usd: float, stretches: Sequence[Json] = ()) -> None:
        self.calls.append(("restore_break_glass", committed_usd, list(stretches)))
        self.committed_usd = committed_usd

    def handle(
        self, notice: Notice, fleet: Sequence[Instance], snapshot: MarketSnapshot
    ) -> Decision:
        self.calls.append(("handle", notice.notice_id))
        return Decision(
            notice_id=notice.notice_id,
            notice_kind=notice.kind.value,
            kind=DecisionKind.IGNORE,
            workload=None,
            lost_instance_id=notice.instance_id,
            lost_units=0,
            launches=(),
            new_size=None,
            reason="a quiet lifecycle ignores every notice",
            decided_at=notice.at,
            latency_s=0.0,
            checkpoint=None,
        )

    def record_launch_failure(
        self, pool_key: str, tier: Tier = Tier.SPOT, *, notice_id: str | None = None
    ) -> None:
        self.calls.append(("record_launch_failure", pool_key, tier, notice_id))

    def withdraw(self, notice_id: str) -> None:
        self.calls.append(("withdraw", notice_id))

    def stretch_state(self, alloc_id: str) -> Json | None:
        return None

    def upkeep_due_at(self) -> datetime | None:
        return None

    def tick(
        self, now: datetime | None, fleet: Sequence[Instance], snapshot: MarketSnapshot
    ) -> Sequence[SpotReturn]:
        self.calls.append(("tick", now))
        return ()

    @property
    def break_glass_committed_usd(self) -> float:
        return self.committed_usd

    def called(self, method: str) -> list[tuple[object, ...]]:
        """The recorded calls of one method, without its name."""
        return [c[1:] for c in self.calls if c[0] == method]


_conforms: Lifecycle = QuietLifecycle()
