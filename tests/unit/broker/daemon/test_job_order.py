"""The daemon's job order, defined once (``broker.daemon.jobs``): the table
the scheduler and the accelerated simulation run, and the order every
driver's steps take."""

from __future__ import annotations

import ast
from pathlib import Path

from broker.daemon.config import DaemonConfig
from broker.daemon.jobs import ORDER, Job, daemon_jobs, run_in_order
from tests.paths import REPO


def test_steps_run_in_the_one_order_whatever_order_they_are_given_in() -> None:
    ran: list[Job] = []
    given = [Job.RECONCILE, Job.PLAN, Job.STRETCHES, Job.PROGRESS, Job.NOTICES]
    run_in_order({j: (lambda j=j: ran.append(j)) for j in given})  # type: ignore[misc]
    assert ran == [Job.PROGRESS, Job.NOTICES, Job.STRETCHES, Job.PLAN, Job.RECONCILE]
    assert ORDER.index(Job.NOTICES) < ORDER.index(Job.PLAN) < ORDER.index(Job.RECONCILE)


def test_the_daemon_table_names_every_scheduled_job_once_in_order_at_its_interval() -> None:
    cfg = DaemonConfig.model_validate({"owner": "t", "intervals": {"reconcile_s": 77}})

    class _D:
        config = cfg

        def __getattr__(self, name: str) -> object:
            return name  # each job's method, by name

    table = daemon_jobs(_D())  # type: ignore[arg-type]
    assert [j.job for j in table] == [j for j in ORDER if j is not Job.PROGRESS]
    by = {j.job: j for j in table}
    assert by[Job.RECONCILE].run == "reconcile" and by[Job.RECONCILE].every_s == 77
    assert by[Job.NOTICES].run == "poll_notices" and by[Job.STRETCHES].run == "upkeep"
    assert by[Job.LEASE].every_s == cfg.intervals.lease_renew_s


# Every harness that drives the daemon's decision code: the scheduler, the
# accelerated simulation, the what-if's replayed planning loop and its replay
# of lost spot, and the bench's product drivers.
DRIVERS = (
    "broker/daemon/schedule.py",
    "broker/daemon/accelerated.py",
    "broker/whatif/replay.py",
    "broker/whatif/reaction.py",
    "broker/bench/product/deadline.py",
    "broker/bench/product/fleet.py",
)


def _calls(tree: ast.AST) -> set[str]:
    return {
        n.func.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }


def test_every_driver_of_the_daemon_code_runs_its_steps_through_the_one_order() -> None:
    for rel in DRIVERS:
        tree = ast.parse(Path(REPO, rel).read_text())
        names = {
            a.name
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and n.module == "broker.daemon.jobs"
            for a in n.names
        }
        assert names & {"run_in_order", "daemon_jobs"}, rel
        # imported and called: the steps go through ``ORDER``
        assert _calls(tree) & names & {"run_in_order", "daemon_jobs"}, rel


def test_no_module_drives_the_jobs_outside_the_listed_harnesses() -> None:
    # A new driver of the daemon's jobs is one of the harnesses above (and
    # held to the one order), not a fourth hand-written loop.
    users = {
        p.relative_to(REPO).as_posix()
        for pkg in ("markets", "policies", "broker")
        for p in Path(REPO, pkg).rglob("*.py")
        if "broker.daemon.jobs" in p.read_text()
    }
    assert users - {"broker/daemon/jobs.py"} == set(DRIVERS)
