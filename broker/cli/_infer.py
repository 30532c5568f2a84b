"""A bill's workloads classed by their shape: always-on serving, bursts as jobs.

Owns: ``infer`` (one ``Inference`` per usage workload from its hourly units
over the bill and over the replayed window) and ``Inference`` (the class,
why, the work and deadline of a job, the regions and providers kept, the
team, the spot share seen), printed so the user can correct it with
``--usage-rules`` or ``--policies``.

Rules: usage in at least ``ALWAYS_ON_SHARE`` of the bill's hours is serving;
else it is a burst: runs of a day or more are training, shorter runs batch
(recurring when the bill shows ``RECURRING_RUNS`` runs or more). A job's work
is its unit-hours in the replayed window, its release the window's first run's
first hour and its deadline the last run's end plus ``SLACK_SHARE`` of their
length (a recurring batch: the whole window).

Must not: read bills, plan or price.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["ALWAYS_ON_SHARE", "RECURRING_RUNS", "SLACK_SHARE", "Inference", "infer", "runs"]

ALWAYS_ON_SHARE = 0.9
RECURRING_RUNS = 3
SLACK_SHARE = 0.5
LONG_RUN_HOURS = 24


@dataclass(frozen=True)
class Inference:
    name: str
    workload_class: str  # serving | training | batch
    why: str
    unit_hours: float  # the job's work in the window (serving: its demand there)
    deadline_hours: float | None
    recurring: bool
    regions: tuple[str, ...]
    providers: tuple[str, ...]
    team: str | None
    spot_share: float
    peak_units: int = 0  # the most physical units (GPUs) it ran in one hour
    release_hours: float = 0.0  # hours into the window before its work is there

    def line(self) -> str:
        deadline = "" if self.deadline_hours is None else f", due in {self.deadline_hours:,.0f} h"
        if self.release_hours > 0:
            deadline = f", from hour {self.release_hours:,.0f}" + deadline
        return (
            f"{self.name}: {self.workload_class} ({self.why}); {self.unit_hours:,.0f} unit-hours"
            f"{deadline}; regions {', '.join(self.regions)}; team {self.team or '-'}"
        )

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "class": self.workload_class, "why": self.why,
                "unit_hours": round(self.unit_hours, 3), "deadline_hours": self.deadline_hours,
                "release_hours": self.release_hours,
                "recurring": self.recurring, "regions": list(self.regions),
                "providers": list(self.providers), "team": self.team,
                "spot_share": round(self.spot_share, 4)}  # fmt: skip


def runs(active: npt.NDArray[np.bool_]) -> list[tuple[int, int]]:
    """The contiguous runs of ``active`` as (start, end) hour indices."""
    edges = np.diff(np.r_[0, active.astype(np.int8), 0])
    return list(zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1), strict=True))


def infer(
    name: str,
    units: npt.NDArray[np.float64],
    window: slice,
    spot_share: float,
    regions: Sequence[str],
    providers: Sequence[str],
    team: str | None,
) -> Inference:
    """The class of one workload from its hourly ``units`` over the bill;
    ``window``: the replayed hours."""
    active = units > 1e-9
    share = float(active.mean()) if len(units) else 0.0
    found = runs(active)
    spot = f", {spot_share:.0%} on spot" if spot_share > 0 else ""
    common = {"regions": tuple(regions), "providers": tuple(providers), "team": team,
              "spot_share": spot_share}  # fmt: skip
    in_window = units[window]
    work = float(in_window.sum())
    if share >= ALWAYS_ON_SHARE or work <= 0:
        why = f"used in {share:.0%} of hours{spot or ', never on spot: planned without it'}"
        if work <= 0:
            why += ", none in the replayed window"
        return Inference(name, "serving", why, work, None, False, **common)  # type: ignore[arg-type]
    longest = max(e - s for s, e in found)
    mean = float(np.mean([e - s for s, e in found]))
    long = longest >= LONG_RUN_HOURS
    recurring = len(found) >= RECURRING_RUNS and not long
    hours = len(in_window)
    release = 0
    if recurring:
        deadline = float(hours)
        why = (f"{len(found)} runs of {mean:,.1f} h on average, {share:.0%} of hours{spot}; "
               "the window's work due by its end")  # fmt: skip
    else:
        w_runs = runs(in_window > 1e-9)
        e = w_runs[-1][1]
        release = int(w_runs[0][0])
        length = e - release
        deadline = float(min(hours, e + max(1.0, SLACK_SHARE * length)))
        why = (f"{len(found)} burst(s), the longest {longest:,} h, {share:.0%} of hours{spot}; "
               "released at its first hour, "
               f"due {SLACK_SHARE:.0%} after its run")  # fmt: skip
    cls = "training" if long else "batch"
    return Inference(name, cls, why, work, deadline, recurring, **common,  # type: ignore[arg-type]
                     release_hours=float(release) if not recurring else 0.0)  # fmt: skip
