"""What ending running work on purpose loses: the work since its last checkpoint.

Owns ``lost_work_hours``: the expected hours of a job's progress lost when
the broker ends it at a moment of its own choosing (a re-plan moving it): half
a checkpoint interval, the workload's stated one, else Daly's optimum for the
pool's hazard (``policies.checkpoint``), as the spot factor of
``policies.cost_table`` assumes the job checkpoints. Stateless serving and
checkpoint-free jobs lose nothing beyond their restart.

One rule for both places a move of running work is priced: the planner's
move term of a running gang (``broker.planning.optimizer.model``) and the
reconcile's judge of a plan's moves (``broker.planning.moves``).

Must not: price anything (callers multiply by what an hour of the work costs),
do I/O or read a clock.
"""

from __future__ import annotations

from markets.model import PoolSnapshot
from policies.checkpoint import daly_interval
from policies.workloads.spec import Workload, WorkloadClass

__all__ = ["lost_work_hours"]

_EPS = 1e-9


def lost_work_hours(w: Workload, snap: PoolSnapshot) -> float:
    """Expected progress (hours) ``w`` loses when ended now in ``snap``'s pool
    (module docstring). A pool with no hazard gives 0: Daly's interval is
    unbounded there, and a job that checkpoints on no schedule is not priced
    by one (the spot factor charges it nothing either)."""
    if w.workload_class is WorkloadClass.SERVING or w.checkpoint_write_seconds <= 0:
        return 0.0
    if w.checkpoint_interval_minutes is not None:
        return w.checkpoint_interval_minutes / 120.0
    lam = snap.hazard.rate_per_hour
    if lam <= _EPS:
        return 0.0
    try:
        return daly_interval(w.checkpoint_write_hours, 1.0 / lam) / 2.0
    except ValueError:
        return 0.0
