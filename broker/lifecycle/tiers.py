"""The deadline rule's state inside the lifecycle manager.

Owns ``DeadlineJobs``: the pools watched (``PoolWatch``: their
``broker.lifecycle.spells.Spells``, from the market's reports of a change),
one ``TierMemory`` per workload
the rule governs, and the translation of a workload, its progress and a pool
of the snapshot into the rule's ``JobSpec`` / ``TickView`` (work in hours
of the job at its rate: ``unit_hours / work_per_hour``).

Which workloads: a rigid training gang (not elastic, no non-revocable
minimum) with ``deadline_hours`` and ``unit_hours`` whose progress the daemon
reports (``report_progress``, from its plan job). Such a job runs whole on one
tier or waits, which is the rule's model. An elastic gang or a batch job
spreads over many instances on both tiers and runs smaller or larger: for
those, and for a job whose progress is not reported (the manager cannot tell
where it stands), the manager keeps its slack rule
(``broker.lifecycle.choices.deadline_slack``).

Must not: choose pools, open or close stretches (the manager does), read a
clock, or do I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.lifecycle.deadline import DeadlineTier, Prior, TierMemory
from broker.lifecycle.spells import Spells
from markets.model import PoolSnapshot
from policies.online.deadline import JobSpec, Mode, TickView
from policies.workloads.spec import Workload, WorkloadClass

__all__ = ["DeadlineJobs", "PoolWatch"]


@dataclass(slots=True)
class PoolWatch:
    """One pool's spells as reported over time, and when the current one
    began (a report is of a change at its time)."""

    spells: Spells
    since_s: float

    def observe(self, available: bool, at_s: float) -> None:
        if available == self.spells.available or at_s <= self.since_s:
            return
        self.spells = self.spells.watched((at_s - self.since_s) / 3600.0).turned(available)
        self.since_s = at_s


@dataclass(slots=True)
class _Job:
    memory: TierMemory
    observed_s: float
    pool_key: str
    work_per_hour: float


def prior_of(p: PoolSnapshot | None, watch: PoolWatch | None) -> Prior | None:
    """What the market said of the pool before a job: its ``available_share``
    and hazard (over ``hazard.observed_hours``), and the spells watched."""
    if p is None or p.available_share is None:
        return None
    up = () if watch is None else watch.spells.up
    down = () if watch is None else watch.spells.down
    return Prior(p.available_share, p.hazard.rate_per_hour, p.hazard.observed_hours, up, down)


class DeadlineJobs:
    """Per-workload memory of the deadline rule and the pools watched."""

    def __init__(self, tick_s: float) -> None:
        self.rule = DeadlineTier()
        self.tick_h = tick_s / 3600.0
        self._jobs: dict[str, _Job] = {}
        self._watch: dict[str, PoolWatch] = {}

    @staticmethod
    def applies(w: Workload) -> bool:
        """The class and contract the rule is for (progress aside)."""
        return (
            w.workload_class is WorkloadClass.TRAINING
            and not w.elastic
            and not w.min_on_non_revocable
            and w.deadline_hours is not None
            and w.unit_hours is not None
        )

    def watch(self, pool_key: str, available: bool, at_s: float) -> None:
        """The market reported spot ``available`` (or not) in ``pool_key`` at ``at_s``."""
        pw = self._watch.get(pool_key)
        if pw is None:
            self._watch[pool_key] = PoolWatch(Spells().turned(available), at_s)
        else:
            pw.observe(available, at_s)

    def pool_of(self, workload: str) -> str | None:
        j = self._jobs.get(workload)
        return None if j is None else j.pool_key

    def rate_of(self, workload: str) -> float | None:
        j = self._jobs.get(workload)
        return None if j is None else j.work_per_hour

    def observe(
        self,
        w: Workload,
        pool_key: str,
        work_per_hour: float,
        available: bool,
        now_s: float,
        snapshot_pool: PoolSnapshot | None,
    ) -> None:
        """Fold the time since the last look into ``w``'s memory (spot
        ``available`` in ``pool_key`` now), the first look starting it from
        the pool's prior."""
        j = self._jobs.get(w.name)
        if j is None:
            prior = prior_of(snapshot_pool, self._watch.get(pool_key))
            memory = self.rule.start(prior)
            j = self._jobs[w.name] = _Job(memory, now_s - self.tick_h * 3600.0, pool_key, 0.0)
        j.pool_key = pool_key
        if work_per_hour > 0:
            j.work_per_hour = work_per_hour
        dt_h = (now_s - j.observed_s) / 3600.0
        if dt_h > 0:
            j.memory = self.rule.observe(j.memory, available, dt_h)
            j.observed_s = now_s

    def decide(
        self,
        w: Workload,
        *,
        mode: Mode,
        available: bool,
        elapsed_hours: float,
        done_unit_hours: float,
        price_ratio: float,
    ) -> Mode | None:
        """The rule's tier for ``w`` now (``None``: not watched yet, or no rate)."""
        j = self._jobs.get(w.name)
        if j is None or j.work_per_hour <= 0 or w.unit_hours is None or w.deadline_hours is None:
            return None
        rate = j.work_per_hour
        job = JobSpec(
            compute_hours=w.unit_hours / rate,
            deadline_hours=w.deadline_hours,
            changeover_hours=w.restart_hours,
            tick_hours=self.tick_h,
            price_ratio=price_ratio,
        )
        view = TickView(
            elapsed_hours=elapsed_hours,
            progress_hours=done_unit_hours / rate,
            mode=mode,
            spot_available=available,
        )
        choice, j.memory = self.rule.decide(job, view, j.memory)
        return choice
