"""The preemption tax of one revocation: the work it throws away.

Owns: ``PreemptionTax``, ``preemption_tax`` and ``revocation_tax`` (the
same, looking the workload and the pool's hazard up). When the cloud takes an
instance back, its workload loses the work done since its last checkpoint
and then waits for a restart (docs/concepts/effective-cost.md), in that
instance's capacity units and at its price:

- *serving*: stateless replicas, nothing to lose but the restart;
- *the notice checkpoint fits* the window (``CheckpointVerdict.fits``, the
  lifecycle's verdict; the hook was started with that budget): nothing lost
  since it, only the restart;
- *periodic checkpoints* every ``checkpoint_interval_minutes`` (else Daly's
  optimum interval at the pool's hazard, as the lifecycle prices it; the
  checkpoint write time is the interval's floor), counted from the
  instance's launch: the work since the last multiple of the interval;
- *no checkpoints* (no interval, no write time): everything since launch.

``unit_hours`` = units x (lost + restart) hours; ``usd`` = the instance's
price per hour x the same hours (the capacity is paid for while it redoes
or waits).

Must not: read the clock (``at`` is the notice's time), call a provider,
or decide anything about the replacement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from broker.lifecycle.values import CheckpointVerdict
from markets.cloud_fleet import Instance
from markets.model import MarketSnapshot
from policies.checkpoint import daly_interval
from policies.workloads.spec import Workload, WorkloadClass, WorkloadSet

__all__ = ["PreemptionTax", "preemption_tax", "revocation_tax"]


@dataclass(frozen=True, slots=True)
class PreemptionTax:
    lost_hours: float  # wall-clock hours of work since the last checkpoint
    restart_hours: float
    unit_hours: float  # capacity-unit hours (GPU-hours by default)
    usd: float

    def as_record(self) -> dict[str, float]:
        return {
            "lost_hours": round(self.lost_hours, 6),
            "restart_hours": round(self.restart_hours, 6),
            "unit_hours": round(self.unit_hours, 6),
            "usd": round(self.usd, 6),
        }


def _interval_h(w: Workload, hazard_per_hour: float) -> float | None:
    """Hours between periodic checkpoints; None: the workload never checkpoints."""
    if w.checkpoint_interval_minutes is not None:
        return max(w.checkpoint_interval_minutes / 60.0, w.checkpoint_write_hours)
    if w.checkpoint_write_seconds <= 0:
        return None
    if hazard_per_hour <= 0:
        return None  # no interruptions expected: Daly's interval is unbounded
    return max(daly_interval(w.checkpoint_write_hours, 1.0 / hazard_per_hour), 1e-9)


def preemption_tax(
    w: Workload,
    inst: Instance,
    *,
    at: datetime,
    checkpoint: CheckpointVerdict | None,
    hazard_per_hour: float,
    price_usd_per_hour: float,
) -> PreemptionTax:
    """The tax of revoking ``inst`` (of workload ``w``) at ``at``."""
    ran_h = max(0.0, (at - inst.launched_at).total_seconds() / 3600.0)
    if w.workload_class is WorkloadClass.SERVING or (checkpoint is not None and checkpoint.fits):
        lost_h = 0.0
    else:
        interval = _interval_h(w, hazard_per_hour)
        lost_h = ran_h if interval is None else math.fmod(ran_h, interval)
    restart_h = w.restart_hours
    hours = lost_h + restart_h
    return PreemptionTax(lost_h, restart_h, inst.units * hours, price_usd_per_hour * hours)


def revocation_tax(
    workloads: WorkloadSet,
    inst: Instance,
    *,
    at: datetime,
    checkpoint: CheckpointVerdict | None,
    snapshot: MarketSnapshot,
    price_usd_per_hour: float,
) -> PreemptionTax | None:
    """``preemption_tax`` with the workload and the pool's hazard looked up
    (None for an instance of a workload not in ``workloads``)."""
    if inst.workload not in workloads.names():
        return None
    try:
        hazard = snapshot.get(inst.pool_key).hazard.rate_per_hour
    except KeyError:  # a pool the market no longer lists: no interval to price
        hazard = 0.0
    return preemption_tax(
        workloads.by_name(inst.workload),
        inst,
        at=at,
        checkpoint=checkpoint,
        hazard_per_hour=hazard,
        price_usd_per_hour=price_usd_per_hour,
    )
