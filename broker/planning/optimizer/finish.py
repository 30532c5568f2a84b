"""The value of finishing sooner, in the MILP.

Owns: ``add_finish_terms``, which gives each training or batch job with a
value of time ``V > 0`` (``Workload.value_of_time_usd_per_hour``: dollars an
hour of finishing later costs; the class's default unless the workload states
one) a finish hour ``F_w`` priced at ``V`` in the objective, and
``FinishTerms``, the variables it made (read back for the plan's meta and
explanation). The model (``model``) calls it once its allocations exist.

With ``W`` the job's remaining work (reference unit-hours, all of it, not just
this horizon's share), ``c_t`` the work its allocations do by the end of
period ``t`` and ``R`` its fastest rate (its largest gang, ``max_units``, as
whole instances of its fastest acceptable type, full speed):

    c_t = c_{t-1} + L_t work_{w,t}            (cumulative work)
    W f_t <= c_t,  f_t <= f_{t+1},  f_t binary  (done by the end of t)
    r >= W - c_T,  r >= 0                     (work left after the horizon)
    F_w = sum_t L_t (1 - f_{t-1}) + r / R      (the finish hour; f_{-1} = 0)

and, valid for every whole plan, ``F_w >= e_t (1 - f_t) + (W - c_t) / R`` at
the end ``e_t`` of each period (not done by then, the rest takes at least
that long): in the relaxation, where ``f_t`` is only ``<= c_t / W``, these
cuts hold the bound near the true finish hour (exact for a job run at full
speed from the start).

So a job that finishes inside the horizon is charged its finish hour (to the
period: the end of the period it finishes in), and one that does not is
charged the horizon plus the least time its leftover work could take (each
unit-hour done now brings that forward by ``1 / R`` hours). A job without a
``max_units`` has no fastest rate: only its in-horizon finish counts. With
``V = 0`` (research, batch by default) nothing is added and the job waits
for any cheaper pool its deadline allows, as before.

This is the MILP form of ``policies.waiting``'s score ``C + V x F``: on the
fleet chapter's hand check (reserved A100 now for ``T`` hours, or H100 spot in
2 h, 3x faster at half the price) a deadline-critical job waits iff ``T > 3``
(``tests/unit/broker/planning/optimizer/test_finish.py``). On large models
solved by relax-and-fix the ``f_t`` are relaxed with the rest (the LP bound
prices the work-weighted completion, ``f_t = min(1, c_t / W)``, a lower
estimate), then the quick rounding fixes each to what the rounded plan's work
shows (``FinishTerms.round_done``), so the plan is charged its true finish
hour; the polish path's integer completion and integral models keep them
binary.

Must not: price anything but time (dollars are ``model``'s), or read a market.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pulp

from broker.planning.optimizer.backend import LpProblem, LpVariable
from broker.planning.optimizer.problem import PlanningProblem
from policies.workloads.spec import Workload, WorkloadClass

__all__ = ["FinishTerms", "add_finish_terms", "fastest_rate"]

Terms = list[tuple[LpVariable, float]]


@dataclass
class FinishTerms:
    """Per job priced: its finish-hour variable and its value of time."""

    finish: dict[str, LpVariable] = field(default_factory=dict)
    value_of_time: dict[str, float] = field(default_factory=dict)
    done: list[LpVariable] = field(default_factory=list)  # every f_t (``round_done``)

    def round_done(self) -> None:
        """Fix each ``f_t`` to what the solved work shows (1 only where the
        job is done; relaxed, ``f_t`` is ``min(1, c_t / W)``), so a plan
        rounded from the relaxation is charged its true finish hour."""
        for f in self.done:
            x = math.floor(float(f.varValue or 0.0) + 1e-6)
            f.lowBound = f.upBound = float(min(max(x, 0), 1))

    def usd(self) -> float:
        """The objective's value-of-time dollars at the solved values."""
        return sum(self.value_of_time[w] * float(v.varValue or 0.0) for w, v in self.finish.items())

    def hours(self) -> dict[str, float]:
        """Each priced job's finish hour at the solved values."""
        return {w: float(v.varValue or 0.0) for w, v in self.finish.items()}


def fastest_rate(problem: PlanningProblem, w: Workload) -> float | None:
    """Work per hour of ``w``'s largest gang as whole instances of its
    fastest acceptable type (``None``: no ``max_units``, no bound)."""
    if w.max_units is None:
        return None
    best = 0.0
    for e in problem.entries(w):
        n = max(1, math.floor(w.max_units / e.units_per_instance + 1e-9))
        best = max(best, n * e.work_per_instance_hour)
    return best if best > 0 else None


def add_finish_terms(
    problem: PlanningProblem,
    prob: LpProblem,
    work_by_period: dict[str, dict[int, Terms]],
    objective: Terms,
    name: Callable[[str], str],
    described: dict[str, str],
) -> FinishTerms:
    """The terms of the module docstring for every priced job.

    ``work_by_period[w][t]``: (variable, work per hour) pairs of ``w``'s
    allocations in period ``t`` (the period length is applied here)."""
    out = FinishTerms()
    lengths: Sequence[float] = [float(x) for x in problem.period_lengths]
    for w in problem.workloads.workloads:
        v_usd = w.value_of_time_usd_per_hour
        if w.workload_class is WorkloadClass.SERVING or v_usd <= 0:
            continue
        remaining = problem.remaining_unit_hours.get(w.name, w.unit_hours or 0.0)
        if remaining <= 1e-9:
            continue
        periods = work_by_period.get(w.name, {})
        if not periods:
            continue
        fin = pulp.LpVariable(name("F"), lowBound=0)
        finish_row: Terms = [(fin, 1.0)]
        cum: LpVariable | None = None
        prev_f: LpVariable | None = None
        rate = fastest_rate(problem, w)
        end = 0.0
        for t, length in enumerate(lengths):
            end += length
            terms = periods.get(t)
            if terms:
                c = pulp.LpVariable(name("CW"), lowBound=0)
                row = [(c, 1.0), *[(v, -k * length) for v, k in terms]]
                if cum is not None:
                    row.append((cum, -1.0))
                prob += pulp.LpAffineExpression(row) == 0
                cum = c
            f = pulp.LpVariable(name("FD"), cat=pulp.LpBinary)
            out.done.append(f)
            if cum is None:
                prob += f == 0  # no work yet: not done
            else:
                prob += pulp.LpAffineExpression([(cum, 1.0), (f, -remaining)]) >= 0
            if prev_f is not None:
                prob += pulp.LpAffineExpression([(f, 1.0), (prev_f, -1.0)]) >= 0
            if rate is not None and cum is not None:
                # valid cut: not done by the end of t, the rest takes at least
                # (W - c_t) / R more hours (tightens the relaxation's bound)
                prob += (
                    pulp.LpAffineExpression([(fin, 1.0), (f, end), (cum, 1.0 / rate)])
                    >= end + remaining / rate
                )
            prev_f = f
            if t + 1 < len(lengths):  # done by the end of t: period t + 1 is not run for it
                finish_row.append((f, lengths[t + 1]))
        if rate is not None and cum is not None:
            left = pulp.LpVariable(name("WL"), lowBound=0)
            prob += pulp.LpAffineExpression([(left, 1.0), (cum, 1.0)]) >= remaining
            finish_row.append((left, -1.0 / rate))
        cname = name("finish")
        prob += pulp.LpAffineExpression(finish_row) == float(sum(lengths)), cname
        described[cname] = (
            f"{w.name}: finish hour, priced at ${v_usd:,.0f} per hour of finishing later"
        )
        objective.append((fin, v_usd))
        out.finish[w.name] = fin
        out.value_of_time[w.name] = v_usd
    return out
