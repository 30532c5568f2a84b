"""A plan's whole instances hour by hour, as the daemon's reconciler rounds them.

Owns: ``DesiredByHour``, ``broker.planning.reconcile.desired_now`` asked once
per plan hour, on that hour's rows only, and remembered. ``desired_now``
filters the plan's whole allocation table for the hour in force; the
what-if's reaction replay (``broker.whatif.reaction``) asks it at every hour,
so over a year's stitched plan (8,760 hours, ~10^5 rows) that was quadratic:
the one-year what-if spent most of its risk band there, where the same plan
is replayed once per sample. Here the rows are grouped by the hours they
cover once (numpy), each hour's ``desired_now`` sees a plan holding only its
rows (same start, same hours, rows in the table's order), and the answer is
kept for the next replay of the same plan: the counts are
``desired_now``'s own, never re-derived.

Must not: round anything itself (``desired_now`` does), or know the market.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime

import numpy as np
import numpy.typing as npt

from broker.planning.plan import Plan
from broker.planning.reconcile import Slot, desired_now, plan_hour
from policies.workloads.spec import WorkloadSet

__all__ = ["DesiredByHour"]


class DesiredByHour:
    """``desired_now(plan, at, workloads)`` for any ``at``, each plan hour
    computed once (module docstring)."""

    def __init__(self, plan: Plan, workloads: WorkloadSet) -> None:
        self.plan = plan
        self.workloads = workloads
        a = plan.allocations
        starts = a["hour_start"].to_numpy(dtype=np.int64)
        lengths = np.maximum(a["hour_end"].to_numpy(dtype=np.int64) - starts, 0)
        rows = np.repeat(np.arange(len(a), dtype=np.int64), lengths)
        # each (row, hour it covers), by hour, rows in table order within an hour
        offsets = np.arange(len(rows), dtype=np.int64) - np.repeat(
            np.cumsum(lengths) - lengths, lengths
        )
        hours = starts[rows] + offsets
        order = np.lexsort((rows, hours))
        self._rows: npt.NDArray[np.int64] = rows[order]
        self._hours: npt.NDArray[np.int64] = hours[order]
        self._known: dict[int, Mapping[Slot, int]] = {}

    def at(self, at: datetime) -> Mapping[Slot, int]:
        """Whole instances per (workload, pool, tier) for the hour in force
        at ``at`` (``desired_now``'s answer; do not mutate it)."""
        h = plan_hour(self.plan, at)
        got = self._known.get(h)
        if got is None:
            lo, hi = np.searchsorted(self._hours, [h, h + 1])
            sub = self.plan.allocations.iloc[self._rows[lo:hi]]
            got = desired_now(dataclasses.replace(self.plan, allocations=sub), at, self.workloads)
            self._known[h] = got
        return got
