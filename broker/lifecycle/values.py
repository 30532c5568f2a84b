"""Values the lifecycle manager returns, and its settings.

Owns ``Decision`` (one per notice, with its reason), ``DecisionKind``,
``LaunchIntent``, ``CheckpointVerdict``, ``SpotReturn`` / ``ReturnKind``
(what ``LifecycleManager.tick`` decides for break-glass capacity) and
``LifecycleConfig``. Re-exported by ``broker.lifecycle``.

Must not: decide anything (``broker.lifecycle.manager``) or do I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from markets.model import Tier
from markets.ttl import UNAVAILABLE_OFFERING_TTL_S
from policies.breakglass import BreakerSettings

__all__ = [
    "CheckpointVerdict",
    "Decision",
    "DecisionKind",
    "LaunchIntent",
    "LifecycleConfig",
    "ReturnKind",
    "SpotReturn",
]


class DecisionKind(StrEnum):
    SHRINK = "shrink"
    REPLACE = "replace"
    BREAK_GLASS = "break_glass"
    IGNORE = "ignore"
    CHECKPOINT_ONLY = "checkpoint_only"


class ReturnKind(StrEnum):
    RETURN_TO_SPOT = "return_to_spot"  # launch spot, then terminate the on-demand
    EXTEND = "extend"  # keep on-demand; more dollars committed
    END = "end"  # the cap is spent and spot is not acceptable: terminate on-demand


@dataclass(frozen=True, slots=True)
class LaunchIntent:
    """What to launch; the daemon makes a ``LaunchRequest`` of it, keyed on the
    notice id (or the return's ``action_id``) so a retry never launches twice."""

    pool_key: str
    tier: Tier
    count: int


@dataclass(frozen=True, slots=True)
class CheckpointVerdict:
    """Does a notice-triggered checkpoint complete in the window?

    ``hook_budget_s`` is what is left of the window once the decision is made
    (minus ``LifecycleConfig.checkpoint_margin_s``): the hook's timeout.
    """

    fits: bool
    window_s: float
    write_s: float
    hook_budget_s: float
    note: str


@dataclass(frozen=True, slots=True)
class Decision:
    """One decision for one notice, with its reason in one sentence."""

    notice_id: str
    notice_kind: str
    kind: DecisionKind
    workload: str | None
    lost_instance_id: str | None
    lost_units: int
    launches: tuple[LaunchIntent, ...]
    new_size: int | None
    reason: str
    decided_at: datetime
    latency_s: float
    checkpoint: CheckpointVerdict | None
    break_glass_usd_committed: float = 0.0
    # Rebalance: launch first; terminate the at-risk instance once the new one runs.
    launch_before_terminate: bool = False

    def as_record(self) -> dict[str, Any]:
        """JSON-ready fields for the store's audit log and structured logs."""
        cp = self.checkpoint
        return {
            "notice_id": self.notice_id,
            "notice_kind": self.notice_kind,
            "kind": self.kind.value,
            "workload": self.workload,
            "lost_instance_id": self.lost_instance_id,
            "lost_units": self.lost_units,
            "launches": [
                {"pool_key": x.pool_key, "tier": x.tier.value, "count": x.count}
                for x in self.launches
            ],
            "new_size": self.new_size,
            "reason": self.reason,
            "decided_at": self.decided_at.isoformat(),
            "latency_s": round(self.latency_s, 6),
            "checkpoint": None
            if cp is None
            else {
                "fits": cp.fits,
                "window_s": cp.window_s,
                "write_s": cp.write_s,
                "hook_budget_s": cp.hook_budget_s,
                "note": cp.note,
            },
            "break_glass_usd_committed": round(self.break_glass_usd_committed, 2),
            "launch_before_terminate": self.launch_before_terminate,
        }


@dataclass(frozen=True, slots=True)
class SpotReturn:
    """What ``tick`` decided for one break-glass stretch (``allocation_id`` is
    the notice id that opened it). ``launches`` come first, then
    ``terminate_instance_ids`` (the on-demand instances, ours by tag)."""

    action_id: str
    allocation_id: str
    kind: ReturnKind
    workload: str
    launches: tuple[LaunchIntent, ...]
    terminate_instance_ids: tuple[str, ...]
    reason: str
    decided_at: datetime
    break_glass_usd_committed: float = 0.0
    break_glass_usd_spent: float = 0.0
    break_glass_usd_released: float = 0.0


class LifecycleConfig(BaseModel):
    """Settings of the lifecycle manager (a section of the daemon's config)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # deadline_hours count from here (the plan's start); None: the manager's start.
    horizon_start: datetime | None = None
    pool_breaker: BreakerSettings = BreakerSettings()
    # A zone opens on the second revocation within 5 min: one alone may be a
    # single reclaim; two is the clustered pattern (economics.md section 7).
    zone_breaker: BreakerSettings = BreakerSettings(open_after=2)
    unavailable_ttl_s: float = Field(default=UNAVAILABLE_OFFERING_TTL_S, gt=0.0)
    # Preemption budget (economics.md section 1, example C).
    churn_window_s: float = Field(default=600.0, gt=0.0)
    churn_max_share: float = Field(default=0.05, ge=0.0, le=1.0)
    churn_floor_units: float = Field(default=8.0, ge=0.0, description="one 8-GPU node")
    resize_budget_interval_s: float = Field(default=3600.0, ge=0.0)
    # Running smaller must leave this share of the time to the deadline spare.
    deadline_margin_fraction: float = Field(default=0.1, ge=0.0, lt=1.0)
    # Tensor/pipeline-parallel groups are rigid (economics.md section 6): a
    # gang's replacement node is the same type unless this is switched off.
    training_same_instance_type: bool = True
    batch_replace_max_premium: float = Field(default=0.25, ge=0.0)
    break_glass_min_hours: float = Field(default=1.0, gt=0.0)
    return_min_dwell_s: float = Field(default=1800.0, ge=0.0)
    return_margin: float = Field(default=1.0, ge=0.0)
    return_lead_s: float = Field(default=300.0, ge=0.0)
    max_spot_lifetime_hours: float = Field(default=168.0, gt=0.0)
    # A rebalance recommendation can come well before the 2-min warning, or
    # never be followed by one (EC2 User Guide, "rebalance recommendations").
    rebalance_window_s: float = Field(default=3600.0, gt=0.0)
    rebalance_min_samples: int = Field(default=10, ge=1)
    rebalance_min_precision: float = Field(default=0.5, ge=0.0, le=1.0)
    rebalance_stale_s: float = Field(default=600.0, gt=0.0)
    checkpoint_margin_s: float = Field(default=5.0, ge=0.0)
    pending_launch_ttl_s: float = Field(default=600.0, gt=0.0)
    remembered_notices: int = Field(default=100_000, ge=1)
