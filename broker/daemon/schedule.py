"""Running the daemon's jobs on a schedule (APScheduler 3.x).

Owns: ``run_scheduled``: one interval job per ``Daemon`` job at the
configured ``intervals``, signals that stop it, and the lease released on the
way out. The only module importing apscheduler. The accelerated simulation
(``broker.daemon.accelerated``) drives the same jobs on a simulated clock instead.

Must not: hold any logic of a job (the ``Daemon`` methods do).
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable

from apscheduler.schedulers.background import BackgroundScheduler

from broker.daemon.daemon import Daemon
from broker.daemon.executor import kv

__all__ = ["run_scheduled"]

log = logging.getLogger("spotfolio.daemon")


def run_scheduled(
    daemon: Daemon, *, metrics_port: int | None = None, metrics_addr: str = "127.0.0.1"
) -> None:
    """Run the daemon's jobs on APScheduler until stopped (SIGTERM/SIGINT or a
    fatal error); releases the lease on the way out."""
    iv = daemon.config.intervals
    if metrics_port:
        port = daemon.metrics.serve(metrics_port, metrics_addr, ready=daemon.readiness)
        log.info(kv("metrics_serving", addr=metrics_addr, port=port))
    daemon.start()
    sched = BackgroundScheduler(
        timezone="UTC",
        # One run of a job at a time; a late run is merged, not queued.
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 30},
    )
    jobs: list[tuple[str, Callable[[], object], float]] = [
        ("renew_lease", daemon.renew_lease, iv.lease_renew_s),
        ("refresh_market", daemon.refresh_market, iv.refresh_market_s),
        ("sense_demand", daemon.sense_demand, iv.sense_demand_s),
        ("replan", daemon.replan, iv.replan_s),
        ("reconcile", daemon.reconcile, iv.reconcile_s),
        ("poll_notices", daemon.poll_notices, iv.poll_notices_s),
        ("break_glass_upkeep", daemon.upkeep, iv.upkeep_s),
    ]
    for name, fn, seconds in jobs:
        sched.add_job(daemon.guarded(name, fn), "interval", seconds=seconds, id=name, name=name)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: daemon.stopped.set())
    sched.start()
    log.info(kv("daemon_running", owner=daemon.owner, jobs=[n for n, _, _ in jobs]))
    try:
        daemon.stopped.wait()
    finally:
        sched.shutdown(wait=True)
        daemon.stop()
