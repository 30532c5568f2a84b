"""The daemon's jobs and the one order they run in at an instant.

Owns: ``Job`` (each job's name, as logged and counted), ``ORDER`` (what
runs first when several jobs are due at once), ``run_in_order`` (the steps
given, run in that order) and ``daemon_jobs`` (the ``Daemon``'s table: each
job's method and interval). Every driver of the daemon's decision code runs
its steps through ``run_in_order``: the scheduler (``broker.daemon.schedule``,
which registers ``daemon_jobs``), the accelerated simulation
(``broker.daemon.accelerated``), the what-if's replayed planning loop
(``broker.whatif.replay``) and its replay of lost spot
(``broker.whatif.reaction``), and the bench's product drivers
(``broker.bench.product``). A driver without a job leaves its step out.

Must not: hold the logic of a job (the ``Daemon`` methods and the drivers'
steps do), or keep time (each driver's clock says what is due and when).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.daemon.daemon import Daemon

__all__ = ["ORDER", "DaemonJob", "Job", "Steps", "daemon_jobs", "run_in_order"]


class Job(StrEnum):
    """The daemon's jobs, in ``ORDER``."""

    # The work done so far, told to the lifecycle manager (the daemon's plan
    # and reconcile jobs track it; a driver without them reports it first).
    PROGRESS = "progress"
    NOTICES = "poll_notices"  # each revocation notice decided and acted on
    STRETCHES = "break_glass_upkeep"  # break-glass stretches extended, returned, ended
    MARKET = "refresh_market"
    DEMAND = "sense_demand"  # live serving demand
    PLAN = "replan"
    LEASE = "renew_lease"
    RECONCILE = "reconcile"  # the fleet brought to the plan and the decisions since it


# Notices first (their windows are short), then the stretches they may have
# opened, then the market and plan, and reconcile last, on all of it.
ORDER: tuple[Job, ...] = tuple(Job)

Steps = Mapping[Job, Callable[[], object]]


def run_in_order(steps: Steps) -> None:
    """Run each step given, in ``ORDER`` (a step decides for itself whether
    it is due: a driver's clock may move while an earlier step runs)."""
    for job in ORDER:
        step = steps.get(job)
        if step is not None:
            step()


@dataclass(frozen=True)
class DaemonJob:
    job: Job
    run: Callable[[], object]
    every_s: float


def daemon_jobs(daemon: Daemon) -> tuple[DaemonJob, ...]:
    """The daemon's scheduled jobs in ``ORDER``, each at its configured interval."""
    iv = daemon.config.intervals
    return (
        DaemonJob(Job.NOTICES, daemon.poll_notices, iv.poll_notices_s),
        DaemonJob(Job.STRETCHES, daemon.upkeep, iv.upkeep_s),
        DaemonJob(Job.MARKET, daemon.refresh_market, iv.refresh_market_s),
        DaemonJob(Job.DEMAND, daemon.sense_demand, iv.sense_demand_s),
        DaemonJob(Job.PLAN, daemon.replan, iv.replan_s),
        DaemonJob(Job.LEASE, daemon.renew_lease, iv.lease_renew_s),
        DaemonJob(Job.RECONCILE, daemon.reconcile, iv.reconcile_s),
    )
