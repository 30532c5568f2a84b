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
from typing import Annotated

from pydantic import BaseModel, ConfigDict, model_validator

from markets.model import Tier
from markets.numbers import DAY_S, MAX_COUNT, MAX_HOURS, MAX_UNITS, WEEK_S, Bounded
from policies.breakglass import BreakerSettings

__all__ = [
    "REMOVED_TTL_MESSAGE",
    "CheckpointVerdict",
    "Decision",
    "DecisionKind",
    "LaunchIntent",
    "LifecycleConfig",
    "ReturnKind",
    "SpotReturn",
]

# The daemon and the lifecycle once kept a TTL each for pools that refused
# capacity (900 s and 180 s); there is one now, not a setting. A config that
# still sets either is refused with this, naming its field.
REMOVED_TTL_MESSAGE = (
    "{field} is no longer a setting: a pool that refused capacity is skipped for "
    "markets.ttl.UNAVAILABLE_OFFERING_TTL_S by the daemon and the lifecycle alike; "
    "remove the field"
)


class DecisionKind(StrEnum):
    SHRINK = "shrink"
    REPLACE = "replace"
    BREAK_GLASS = "break_glass"
    IGNORE = "ignore"
    CHECKPOINT_ONLY = "checkpoint_only"


class ReturnKind(StrEnum):
    RETURN_TO_SPOT = "return_to_spot"  # launch spot, then terminate the on-demand
    EXTEND = "extend"  # keep on-demand; more dollars committed
    END = "end"  # the cap is spent, or the deadline rule waits: terminate on-demand
    # The deadline rule (broker.lifecycle.deadline) puts a waiting job on
    # on-demand: launch it, a new stretch (allocation_id) against the cap.
    OPEN_ON_DEMAND = "open_on_demand"


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
    # Break-glass onto on-demand that still runs (an earlier return to spot
    # retired it and keeps it until its spot is ready): what is kept, per
    # pool, in place of launches (a count the plan's slot gains back), and
    # the instances.
    kept: tuple[LaunchIntent, ...] = ()
    kept_instance_ids: tuple[str, ...] = ()

    def as_record(self) -> dict[str, object]:
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
            "kept": [
                {"pool_key": x.pool_key, "tier": x.tier.value, "count": x.count} for x in self.kept
            ],
            "kept_instance_ids": list(self.kept_instance_ids),
        }


@dataclass(frozen=True, slots=True)
class SpotReturn:
    """What ``tick`` decided for one break-glass stretch (``allocation_id`` is
    the notice id that opened it). ``launches`` come first, then
    ``terminate_instance_ids`` (the on-demand instances, ours by tag): at
    once, or with ``after_ready`` once the launches are ready (make before
    break: the executor records them as ended and leaves their termination to
    reconcile, whose ``diff`` keeps them while their replacements warm up)."""

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
    after_ready: bool = False

    @property
    def break_glass_usd_delta(self) -> float:
        """Net change of the break-glass total: summing the decisions'
        ``break_glass_usd_committed`` and the returns' deltas gives
        ``LifecycleManager.break_glass_committed_usd``."""
        return self.break_glass_usd_committed - self.break_glass_usd_released


class LifecycleConfig(BaseModel):
    """Settings of the lifecycle manager (the daemon config's ``lifecycle:``).

    Every field has a default; the reasons are in the comments.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _no_second_ttl(cls, data: object) -> object:
        if isinstance(data, dict) and "unavailable_ttl_s" in data:
            raise ValueError(REMOVED_TTL_MESSAGE.format(field="lifecycle.unavailable_ttl_s"))
        return data

    # deadline_hours count from here (the plan's start); None: the manager's start.
    horizon_start: datetime | None = None
    # Providers the daemon can launch in ("aws", "gcp"); None: every provider
    # in the snapshot (the simulated cloud can launch anywhere).
    providers: tuple[str, ...] | None = None
    pool_breaker: BreakerSettings = BreakerSettings()
    # A zone opens on the second revocation within 5 min: one alone may be a
    # single reclaim; two is the clustered pattern (docs/concepts/market.md).
    zone_breaker: BreakerSettings = BreakerSettings(open_after=2)
    # Preemption budget (docs/concepts/effective-cost.md, example C): at most 5 % of
    # capacity re-placed on spot per 10 min, at least one 8-GPU node; one
    # preemption-driven resize per job per hour.
    churn_window_s: Annotated[float, Bounded(gt=0.0, le=WEEK_S, unit="seconds")] = 600.0
    churn_max_share: Annotated[float, Bounded(ge=0.0, le=1.0)] = 0.05
    churn_floor_units: Annotated[float, Bounded(ge=0.0, le=MAX_UNITS)] = 8.0
    resize_budget_interval_s: Annotated[float, Bounded(ge=0.0, le=WEEK_S, unit="seconds")] = 3600.0
    # Deadline slack must cover what spot is expected to lose to further
    # interruptions before the deadline (hazard x hours left x (restart + half
    # a checkpoint interval)), and at least this: to run smaller; below it at
    # full size, the deadline needs on-demand.
    deadline_margin_min_hours: Annotated[float, Bounded(ge=0.0, le=MAX_HOURS, unit="hours")] = 1.0
    # Tensor/pipeline-parallel groups are rigid (docs/concepts/tiers.md): a
    # gang's replacement node is the same type unless this is switched off.
    training_same_instance_type: bool = True
    # Batch replaces only this much above the lost pool's cost per unit of
    # work; dearer, it waits (restart-tolerant, spot-first).
    batch_replace_max_premium: Annotated[float, Bounded(ge=0.0, le=100)] = 0.25
    # A break-glass stretch is committed for max(this, breaker close + dwell)
    # and extended by this much at a time while the cap allows.
    break_glass_min_hours: Annotated[float, Bounded(gt=0.0, le=MAX_HOURS, unit="hours")] = 1.0
    # Hysteresis: at least this long on on-demand (or the job's min dwell if
    # longer) before going back to spot, and only when savings x expected
    # lifetime > return_margin x switching cost. Serving is held by the
    # second test alone: its return is make before break and stalls nothing
    # (``broker.lifecycle.stretches.return_dwell_s``).
    return_min_dwell_s: Annotated[float, Bounded(ge=0.0, le=WEEK_S, unit="seconds")] = 1800.0
    return_margin: Annotated[float, Bounded(ge=0.0, le=1000)] = 1.0
    # Decide to extend or end a stretch this long before its dollars run out
    # (a return needs time to launch spot first); tick more often than this.
    return_lead_s: Annotated[float, Bounded(ge=0.0, le=DAY_S, unit="seconds")] = 300.0
    # Expected spot lifetime credited to a pool that never revokes (1 week).
    max_spot_lifetime_hours: Annotated[float, Bounded(gt=0.0, le=MAX_HOURS, unit="hours")] = 168.0
    # A rebalance recommendation can come well before the 2-min warning, or
    # never be followed by one (EC2 User Guide, "rebalance recommendations"):
    # act where the pool's confidence (its record shrunk to the fleet's rate
    # with prior_samples pseudo-samples, policies.rebalance) is above
    # min_precision, once the fleet has min_samples resolved ones.
    rebalance_window_s: Annotated[float, Bounded(gt=0.0, le=WEEK_S, unit="seconds")] = 3600.0
    rebalance_min_samples: Annotated[int, Bounded(ge=1, le=MAX_COUNT)] = 10
    rebalance_prior_samples: Annotated[float, Bounded(ge=0.0, le=MAX_COUNT)] = 5.0
    rebalance_min_precision: Annotated[float, Bounded(ge=0.0, le=1.0)] = 0.5
    rebalance_stale_s: Annotated[float, Bounded(gt=0.0, le=WEEK_S, unit="seconds")] = 600.0
    # Time a job needs before a notice checkpoint can start writing (quiesce).
    checkpoint_margin_s: Annotated[float, Bounded(ge=0.0, le=DAY_S, unit="seconds")] = 5.0
    # A decided launch counts in zone shares and sizes until the fleet shows
    # it, or this long (then it is taken to have failed).
    pending_launch_ttl_s: Annotated[float, Bounded(gt=0.0, le=DAY_S, unit="seconds")] = 600.0
    # Notice ids remembered for duplicate detection (the store dedups too).
    remembered_notices: Annotated[int, Bounded(ge=1, le=10_000_000)] = 100_000
    # A stale snapshot (no fresh market data within its TTL) widens risk
    # margins: every pool's hazard counts this many times over in ranking,
    # deadline margins and the return-to-spot test (docs/concepts/market.md,
    # "Stale market data"). The daemon sets it from its stale_hazard_multiplier.
    stale_hazard_multiplier: Annotated[float, Bounded(ge=1.0, le=100)] = 2.0
    # The deadline rule's decision grid (broker.lifecycle.deadline): its safety
    # net counts whole ticks of this length, so a waiting job can still finish
    # on on-demand if the next look comes a tick later. 10 min: the bench's
    # decision tick; the daemon ticks more often, which only adds margin.
    deadline_tick_s: Annotated[float, Bounded(gt=0.0, le=DAY_S, unit="seconds")] = 600.0
