r"""Dollar limits on a plan: stated once, held by the MILP and by the fast path.

Owns: ``Limit`` (one budget row: which dollars it counts, over which hours,
how many are left), ``limits`` (every limit of a problem), ``milp_rows`` (the
MILP's rows, handed to ``model`` as plain terms), ``spend`` / ``exceeded`` /
``binding`` (a plan's dollars against each limit: the property tests' and the
explanations' check), ``cap_allocations`` (the fast path's cut of an
allocation table to every limit) and the keys under which a rolling horizon
carries dollars already spent (``tier_day_key``; ``broker.planning.rolling``).

Notation as in ``model``: X_{x,t} instances of allocation x in period t (of
L_t hours, ``[a_t, b_t)``), c_x its dollars per instance-hour, C_g committed
instances bought at c_g per hour, H the horizon, S_* dollars already spent.

  workload w, per hour:   sum_{x of w} c_x X_{x,t} <= B^h_w           (each t)
  workload w, horizon:    sum_t L_t sum_{x of w} c_x X_{x,t} <= B_w - S_w
  fleet, per hour:        sum_g c_g C_g + sum_{x not committed} c_x X_{x,t} <= B^h
  fleet, horizon:         H sum_g c_g C_g + sum_t L_t sum_{x not committed} ... <= B - S
  tier k, per hour:       the fleet's dollars on tier k in t <= B^h_k
  tier k, per UTC day d:  sum_t |[a_t, b_t) & d| (tier k's dollars per hour in t)
                            <= B^d_k - S_{k,d}

A workload's own limits charge its committed *usage* (K at c_g: the capacity
it takes from what was bought); the fleet's and the committed tier's charge
commitments as bought (paid every hour, used or not). A day's limit counts the
hours of that UTC day inside the horizon, and what earlier steps of a rolling
horizon spent on that day (``tier_day_key``).

Must not: import PuLP (the fast path uses this module; ``model`` turns
``milp_rows`` into constraints) or choose what to cut beyond the rule of
``cap_allocations``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Protocol

import numpy as np
import numpy.typing as npt
import pandas as pd

from broker.planning.optimizer.problem import FloatArray, PlanningProblem
from markets.errors import InfeasiblePlanError
from markets.model import Tier
from policies.workloads.spec import WorkloadClass

__all__ = [
    "FLEET",
    "Charge",
    "Limit",
    "binding",
    "cap_allocations",
    "exceeded",
    "limits",
    "milp_rows",
    "spend",
    "spent_by_key",
    "tier_day_key",
]

FLEET = ""  # the fleet's key in ``PlanningProblem.spent_usd`` (``rolling.FLEET``)
# A limit "binds" when the plan spends within this share of it.
_BINDING_SHARE = 1e-4
_TOL_USD = 1e-6


def tier_day_key(tier: Tier | str, day: date) -> str:
    """The key of dollars spent on ``tier`` on UTC ``day`` in ``spent_usd``."""
    return f"{Tier(tier).value}@{day.isoformat()}"


Charge = tuple[str, Tier, int, float]  # (workload, tier, hour from start, dollars)


def spent_by_key(
    start: datetime, hours: int, committed_usd_per_hour: float, charges: Iterable[Charge]
) -> dict[str, float]:
    """Dollars spent over ``hours`` from ``start``, under every key a limit
    reads in ``spent_usd``: per workload (its rows, committed usage
    included), ``FLEET`` (the rows not on commitments, plus commitments as
    bought) and ``tier_day_key`` per tier and UTC day (commitments on the
    committed tier, as bought)."""
    out: dict[str, float] = {FLEET: committed_usd_per_hour * hours}
    for h in range(hours):
        if committed_usd_per_hour > 0:
            key = tier_day_key(Tier.COMMITTED, (start + timedelta(hours=h)).date())
            out[key] = out.get(key, 0.0) + committed_usd_per_hour
    for workload, tier, hour, usd in charges:
        out[workload] = out.get(workload, 0.0) + usd
        if tier is Tier.COMMITTED:
            continue
        out[FLEET] += usd
        key = tier_day_key(tier, (start + timedelta(hours=hour)).date())
        out[key] = out.get(key, 0.0) + usd
    return out


@dataclass(frozen=True)
class Limit:
    """One budget row. ``workload``/``tier``: the dollars it counts (``None``:
    all); ``window``: the problem's hours ``[a, b)`` it sums over (``None``:
    each period on its own, dollars per hour); ``usd``: the right-hand side
    (what is left of the budget)."""

    text: str
    usd: float
    workload: str | None = None
    tier: Tier | None = None
    window: tuple[int, int] | None = None

    def counts_committed_usage(self) -> bool:
        """A workload's limit charges its committed usage; the others charge
        commitments as bought."""
        return self.workload is not None

    def counts_bought(self) -> bool:
        return self.workload is None and self.tier in (None, Tier.COMMITTED)

    def counts(self, workload: str, tier: Tier) -> bool:
        if self.workload is not None and workload != self.workload:
            return False
        if self.tier is not None and tier is not self.tier:
            return False
        return tier is not Tier.COMMITTED or self.counts_committed_usage()


def _days(problem: PlanningProblem) -> list[tuple[date, int, int]]:
    """The UTC days the horizon touches: (day, first hour, end hour) in the problem."""
    out: list[tuple[date, int, int]] = []
    h = 0
    while h < problem.hours:
        at = problem.start + timedelta(hours=h)
        midnight = datetime(at.year, at.month, at.day, tzinfo=at.tzinfo) + timedelta(days=1)
        end = min(problem.hours, h + math.ceil((midnight - at).total_seconds() / 3600.0))
        out.append((at.date(), h, max(end, h + 1)))
        h = max(end, h + 1)
    return out


def limits(problem: PlanningProblem) -> list[Limit]:
    """Every budget of ``problem``'s workloads, as rows (module docstring)."""
    ws = problem.workloads
    spent = problem.spent_usd
    out: list[Limit] = []
    whole = (0, problem.hours)
    for w in ws.workloads:
        if w.budget_usd_per_hour is not None:
            out.append(
                Limit(
                    f"{w.name}: budget ${w.budget_usd_per_hour:,.2f}/h",
                    w.budget_usd_per_hour,
                    workload=w.name,
                )
            )
        if w.budget_usd is not None:
            left = max(0.0, w.budget_usd - spent.get(w.name, 0.0))
            out.append(
                Limit(
                    f"{w.name}: budget ${w.budget_usd:,.2f} over the horizon"
                    f" (${left:,.2f} left to spend)",
                    left,
                    workload=w.name,
                    window=whole,
                )
            )
    if ws.budget_usd_per_hour is not None:
        out.append(Limit(f"fleet budget ${ws.budget_usd_per_hour:,.2f}/h", ws.budget_usd_per_hour))
    if ws.budget_usd is not None:
        left = max(0.0, ws.budget_usd - spent.get(FLEET, 0.0))
        out.append(
            Limit(
                f"fleet budget ${ws.budget_usd:,.2f} over the horizon (${left:,.2f} left to spend)",
                left,
                window=whole,
            )
        )
    for tier, usd in sorted(ws.tier_budget_usd_per_hour.items()):
        out.append(Limit(f"fleet {tier.value} budget ${usd:,.2f}/h", usd, tier=tier))
    for tier, usd in sorted(ws.tier_budget_usd_per_day.items()):
        for day, a, b in _days(problem):
            left = max(0.0, usd - spent.get(tier_day_key(tier, day), 0.0))
            out.append(
                Limit(
                    f"fleet {tier.value} budget ${usd:,.2f}/day on {day.isoformat()}"
                    f" (${left:,.2f} left to spend)",
                    left,
                    tier=tier,
                    window=(a, b),
                )
            )
    return out


class _Alloc(Protocol):
    """What ``milp_rows`` reads of ``model.AllocVar``."""

    @property
    def workload(self) -> str: ...
    @property
    def tier(self) -> Tier: ...
    @property
    def period(self) -> int: ...
    @property
    def usd_per_instance_hour(self) -> float: ...
    @property
    def var(self) -> object: ...


Row = tuple[list[tuple[object, float]], float, str]  # (terms, right-hand side, text)


def _overlap(a0: int, a1: int, b0: int, b1: int) -> float:
    return float(max(0, min(a1, b1) - max(a0, b0)))


def milp_rows(
    problem: PlanningProblem,
    allocs: Sequence[_Alloc],
    bought: Sequence[tuple[object, float]],
) -> list[Row]:
    """The MILP's budget rows: ``terms <= rhs`` over ``allocs`` and the
    commitment variables ``bought`` (C_g, dollars per hour)."""
    bounds = problem.period_bounds
    out: list[Row] = []
    for lim in limits(problem):
        mine = [a for a in allocs if lim.counts(a.workload, a.tier)]
        fixed = list(bought) if lim.counts_bought() else []
        if lim.window is None:
            for t in range(len(bounds)):
                terms = [(a.var, a.usd_per_instance_hour) for a in mine if a.period == t]
                if terms:
                    out.append(([*fixed, *terms], lim.usd, lim.text))
            continue
        w0, w1 = lim.window
        terms = [(v, c * float(w1 - w0)) for v, c in fixed]
        for a in mine:
            h = _overlap(*bounds[a.period], w0, w1)
            if h > 0:
                terms.append((a.var, a.usd_per_instance_hour * h))
        if terms:
            out.append((terms, lim.usd, lim.text))
    return out


def _row_usd(table: pd.DataFrame) -> FloatArray:
    n = table["instances"].to_numpy(dtype=float)
    return np.asarray(n * table["usd_per_instance_hour"].to_numpy(dtype=float), dtype=float)


def _mask(table: pd.DataFrame, lim: Limit) -> np.ndarray:
    tiers = table["tier"].to_numpy()
    names = table["workload"].to_numpy()
    return np.array(
        [lim.counts(str(n), Tier(str(t))) for n, t in zip(names, tiers, strict=True)], dtype=bool
    )


def spend(lim: Limit, table: pd.DataFrame, committed_usd_per_hour: float) -> float:
    """What a plan's allocation ``table`` (and its commitments, dollars per
    hour) spends against ``lim``: the dearest hour for a per-hour limit, the
    window's total otherwise."""
    usd = _row_usd(table) * _mask(table, lim) if len(table) else np.zeros(0)
    fixed = committed_usd_per_hour if lim.counts_bought() else 0.0
    h0 = table["hour_start"].to_numpy(dtype=int) if len(table) else np.zeros(0, dtype=int)
    h1 = table["hour_end"].to_numpy(dtype=int) if len(table) else np.zeros(0, dtype=int)
    if lim.window is None:
        if not len(table):
            return fixed
        per_hour: dict[int, float] = {}
        for a, b, x in zip(h0, h1, usd, strict=True):
            for h in range(int(a), int(b)):
                per_hour[h] = per_hour.get(h, 0.0) + float(x)
        return fixed + max(per_hour.values(), default=0.0)
    w0, w1 = lim.window
    total = fixed * (w1 - w0)
    for a, b, x in zip(h0, h1, usd, strict=True):
        total += float(x) * _overlap(int(a), int(b), w0, w1)
    return total


def exceeded(
    problem: PlanningProblem, table: pd.DataFrame, committed_usd_per_hour: float
) -> list[tuple[Limit, float]]:
    """The limits a plan breaks, with what it spends against each."""
    out = []
    for lim in limits(problem):
        got = spend(lim, table, committed_usd_per_hour)
        if got > lim.usd * (1.0 + 1e-7) + _TOL_USD:
            out.append((lim, got))
    return out


def binding(
    problem: PlanningProblem, table: pd.DataFrame, committed_usd_per_hour: float
) -> list[str]:
    """The limits a plan spends all of (within ``_BINDING_SHARE``), in words."""
    out: list[str] = []
    for lim in limits(problem):
        got = spend(lim, table, committed_usd_per_hour)
        if got >= lim.usd * (1.0 - _BINDING_SHARE) - _TOL_USD and lim.text not in out:
            out.append(lim.text)
    return out


def cap_allocations(
    problem: PlanningProblem, table: pd.DataFrame, committed_usd_per_hour: float
) -> tuple[pd.DataFrame, list[str]]:
    """Cut an allocation table until every limit holds (the fast path's rule):
    per-hour limits first, period by period; then each window from its last
    period back. A cut scales the counted rows of a period down together; a
    training gang's rows in a period go whole or not at all (a scaled gang is
    no allowed size). Returns the table and the limits that cut.

    Raises ``InfeasiblePlanError`` when commitments alone break a limit."""
    table = table.reset_index(drop=True).copy()
    gangs = {w.name for w in problem.workloads.of_class(WorkloadClass.TRAINING)}
    cut: list[str] = []
    for lim in limits(problem):
        fixed = committed_usd_per_hour if lim.counts_bought() else 0.0
        span = 1 if lim.window is None else lim.window[1] - lim.window[0]
        if fixed * span > lim.usd + _TOL_USD:
            raise InfeasiblePlanError(
                "no plan meets every hard constraint",
                [f"fixed commitments cost ${fixed * span:,.2f}, above the {lim.text}"],
            )
        if not len(table):
            continue
        mask = _mask(table, lim)
        period = table["period"].to_numpy(dtype=int)
        # A window is cut from its last period back (the plan spends early).
        for t in sorted(set(period[mask]), reverse=lim.window is not None):
            rows = np.flatnonzero(mask & (period == t))
            h0 = int(table["hour_start"].to_numpy(dtype=int)[rows[0]])
            h1 = int(table["hour_end"].to_numpy(dtype=int)[rows[0]])
            hours = 1.0 if lim.window is None else _overlap(h0, h1, *lim.window)
            usd = float(_row_usd(table)[rows].sum()) * hours
            if lim.window is None:
                excess = fixed + usd - lim.usd
            else:
                excess = spend(lim, table, committed_usd_per_hour) - lim.usd
            if excess <= _TOL_USD:
                if lim.window is None:
                    continue
                break
            if usd <= 0:
                continue
            _scale(table, rows, period == t, max(0.0, 1.0 - excess / usd) * (1.0 - 1e-9), gangs)
            if lim.text not in cut:
                cut.append(lim.text)
    return table[table["instances"] > 1e-9].reset_index(drop=True), cut


def _scale(
    table: pd.DataFrame,
    rows: npt.NDArray[np.intp],
    in_period: npt.NDArray[np.bool_],
    keep: float,
    gangs: set[str],
) -> None:
    """Scale ``rows`` by ``keep``; a gang any of them belongs to goes whole:
    all its rows of the period (every tier) to zero."""
    names = table["workload"].to_numpy().astype(str)
    factor = np.ones(len(table))
    factor[rows] = keep
    cut_gangs = {n for n in names[rows] if n in gangs} if keep < 1.0 else set()
    for gang in cut_gangs:
        factor[in_period & (names == gang)] = 0.0
    for col in ("instances", "units", "work_per_hour"):
        table[col] = table[col].to_numpy(dtype=float) * factor
