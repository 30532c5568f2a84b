"""Running the daemon's jobs on a schedule (APScheduler 3.x).

Owns: ``run_scheduled``: one interval job per entry of the daemon's job
table (``broker.daemon.jobs.daemon_jobs``) at its configured interval,
signals that stop it, and the lease released on the way out. The only module
importing apscheduler. The accelerated simulation
(``broker.daemon.accelerated``) drives the same table on a simulated clock.

Must not: hold any logic of a job (the ``Daemon`` methods do) or list the
jobs itself (``broker.daemon.jobs`` does).
"""

from __future__ import annotations

import logging
import signal

from apscheduler.schedulers.background import BackgroundScheduler

from broker.daemon.daemon import Daemon
from broker.daemon.executor import kv
from broker.daemon.jobs import daemon_jobs

__all__ = ["run_scheduled"]

log = logging.getLogger("spotfolio.daemon")


def run_scheduled(
    daemon: Daemon, *, metrics_port: int | None = None, metrics_addr: str = "127.0.0.1"
) -> None:
    """Run the daemon's jobs on APScheduler until stopped (SIGTERM/SIGINT or a
    fatal error); releases the lease on the way out."""
    if metrics_port:
        port = daemon.metrics.serve(metrics_port, metrics_addr, ready=daemon.readiness)
        log.info(kv("metrics_serving", addr=metrics_addr, port=port))
    daemon.start()
    sched = BackgroundScheduler(
        timezone="UTC",
        # One run of a job at a time; a late run is merged, not queued.
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 30},
    )
    jobs = daemon_jobs(daemon)
    for j in jobs:
        name = j.job.value
        run = daemon.guarded(name, j.run)
        sched.add_job(run, "interval", seconds=j.every_s, id=name, name=name)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: daemon.stopped.set())
    sched.start()
    log.info(kv("daemon_running", owner=daemon.owner, jobs=[j.job.value for j in jobs]))
    try:
        daemon.stopped.wait()
    finally:
        sched.shutdown(wait=True)
        daemon.stop()
