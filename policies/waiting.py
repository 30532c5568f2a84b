"""Wait or run now: whether a deadline job should wait for a better pool.

Owns: ``RunOption`` (one way to run the job's remaining work: how long until
the pool can take it, how long it then runs, what it costs), ``decide`` (the
rule) and ``WaitVerdict`` with its sentence for the plan's explanation
("waits 2 h for p5.48xlarge spot: finishes 3 h earlier at 40 % of the cost").

The rule. Each option ``o`` finishes at ``F(o) = wait(o) + run(o)`` hours from
now and costs ``C(o)``; the job's value of time ``V`` (dollars per hour of
finishing later: ``Workload.value_of_time_usd_per_hour``, the class's default
unless stated) prices lateness, so an option's score is ``C(o) + V x F(o)``.
Options that finish after the deadline are out (when none meets it, the
earliest finish is kept: late is better than later). The job waits iff the
best option that must wait scores strictly lower than the best it can start
now; a tie runs now (a pool that is not there yet may not come).

Hand check: reserved A100 now for
``T`` hours at ``$P/h``, or H100 spot in 2 h, 3x faster (``T/3`` h) at half
the price: ``C = P T`` vs ``P T / 6``, ``F = T`` vs ``2 + T/3``. For a
deadline-critical job (``V`` far above ``P``) lateness dominates and waiting
wins iff ``2 + T/3 < T``, i.e. iff ``T > 3`` h; with ``V`` finite the
threshold is ``T* = 2V / (5P/6 + 2V/3)`` (below 3 h: the saving buys a little
delay); with ``V = 0`` (research) the job waits whenever the deadline allows.

Must not: read a market or a plan (the caller builds the options from its
cost table and capacity), or round anything the caller will bill.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["RunOption", "WaitVerdict", "decide"]


@dataclass(frozen=True, slots=True)
class RunOption:
    """One way to run the remaining work."""

    label: str  # "p5.48xlarge spot" (what the sentence names)
    wait_hours: float  # until the pool can take the job (0: now)
    run_hours: float  # then, until the work is done
    cost_usd: float

    def __post_init__(self) -> None:
        for name in ("wait_hours", "run_hours", "cost_usd"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")

    @property
    def finish_hours(self) -> float:
        return self.wait_hours + self.run_hours

    def score(self, value_of_time_usd_per_hour: float) -> float:
        return self.cost_usd + value_of_time_usd_per_hour * self.finish_hours


@dataclass(frozen=True, slots=True)
class WaitVerdict:
    """The rule's answer, with the best option of each kind."""

    waits: bool
    now: RunOption | None  # the best option that starts now (None: none does)
    later: RunOption | None  # the best option that must wait (None: none)
    value_of_time_usd_per_hour: float
    deadline_hours: float | None

    @property
    def chosen(self) -> RunOption:
        out = self.later if self.waits else self.now
        assert out is not None  # decide() has at least one option
        return out

    def sentence(self) -> str:
        """The explanation's line."""
        now, later = self.now, self.later
        if self.waits and later is not None:
            head = f"waits {_h(later.wait_hours)} for {later.label}"
            if now is None:
                return f"{head}: nothing can start it now"
            return f"{head}: {_compare(later, now)} than {now.label} now"
        assert now is not None
        if later is None:
            return f"runs now on {now.label}: no pool to wait for"
        why = _why_not(later, now, self.value_of_time_usd_per_hour, self.deadline_hours)
        return f"runs now on {now.label}: waiting {_h(later.wait_hours)} for {later.label} {why}"


def _h(hours: float) -> str:
    return f"{hours:.3g} h"


def _compare(a: RunOption, b: RunOption) -> str:
    """``a`` against ``b``: "finishes 3 h earlier at 40 % of the cost"."""
    dt = b.finish_hours - a.finish_hours
    when = (
        f"finishes {_h(dt)} earlier"
        if dt > 1e-9
        else (f"finishes {_h(-dt)} later" if dt < -1e-9 else "finishes at the same time")
    )
    if b.cost_usd > 0:
        return f"{when} at {100 * a.cost_usd / b.cost_usd:.0f} % of the cost"
    return f"{when} for ${a.cost_usd:,.2f}"


def _why_not(later: RunOption, now: RunOption, vot: float, deadline: float | None) -> str:
    said = _compare(later, now)  # "finishes 1 h later at 17 % of the cost"
    if deadline is not None and later.finish_hours > deadline + 1e-9:
        return f"{said}: misses the {_h(deadline)} deadline"
    return f"{said}: not worth it at ${vot:,.0f} per hour of finishing later"


def decide(
    options: Sequence[RunOption],
    *,
    value_of_time_usd_per_hour: float,
    deadline_hours: float | None = None,
) -> WaitVerdict:
    """The rule of the module docstring over ``options`` (at least one)."""
    if not options:
        raise ValueError("at least one option")
    vot = value_of_time_usd_per_hour
    if not (math.isfinite(vot) and vot >= 0):
        raise ValueError(f"value of time must be a finite number >= 0, got {vot!r}")
    in_time = [
        o for o in options if deadline_hours is None or o.finish_hours <= deadline_hours + 1e-9
    ]
    pool = in_time or [min(options, key=lambda o: (o.finish_hours, o.cost_usd))]

    def best(kind: Sequence[RunOption]) -> RunOption | None:
        return min(kind, key=lambda o: (o.score(vot), o.finish_hours), default=None)

    now = best([o for o in pool if o.wait_hours <= 0])
    later = best([o for o in pool if o.wait_hours > 0])
    if now is None:  # nothing that starts now is in time: wait (``later`` is not None)
        now_any = best([o for o in options if o.wait_hours <= 0])  # for the sentence only
        return WaitVerdict(True, now_any, later, vot, deadline_hours)
    waits = later is not None and later.score(vot) < now.score(vot)
    if later is None:
        later = best([o for o in options if o.wait_hours > 0])  # for the sentence only
    return WaitVerdict(waits, now, later, vot, deadline_hours)
