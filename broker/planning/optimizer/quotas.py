r"""Account quotas on a plan: stated once, held by the MILP and by the fast path.

Owns: what each allocation takes of each quota (``uses``, from
``markets.quotas.quota_use``), the MILP's rows (``milp_rows``), the split
that keeps aggregation exact under quotas (``split_key``), a plan's use of
each quota per period (``use``) and the checks on it (``exceeded``,
``binding_lines``: "96 of 96 P vCPUs in us-east-1 (quota L-417A185B)", which
an explanation prints after "bound:"),
the fast path's running tally (``Room``) and its last cut (``cap_allocations``).

Notation as in ``model``: X_{x,t} instances of allocation x in period t;
q_{Q,x} what one instance of x takes of quota Q (vCPUs or GPUs; 0 when Q
does not count it: another provider, region, family group or tier), Q_lim
its limit:

  each quota Q, each t:   sum_x q_{Q,x} X_{x,t} <= Q_lim

A quota counts what runs, so commitments bought enter through their use K
(on the on-demand tier's quota), never through C_g; a gang's spot counts
whole (the instances are held or being replaced). Aggregation merges
on-demand options and commitment groups of one type across regions; with
quotas two regions differ in their rows, so options are merged only within
one ``split_key`` (the quotas that count them), which keeps it exact.

Must not: import PuLP (the fast path uses this module) or pick what to cut
beyond ``cap_allocations``'s rule.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from functools import cache
from typing import Protocol

import numpy as np
import pandas as pd

from broker.planning.optimizer.problem import PlanningProblem
from markets.model import Quota, Tier
from markets.quotas import quota_use
from policies.cost_table import CostEntry
from policies.workloads.spec import WorkloadClass

__all__ = [
    "Room",
    "binding_lines",
    "cap_allocations",
    "exceeded",
    "milp_rows",
    "split_key",
    "use",
    "uses",
]

_TOL = 1e-6
# A quota "binds" in a period when the plan takes all but this share of it.
_BINDING_SHARE = 1e-4

Uses = tuple[tuple[int, float], ...]  # (index of the quota in problem.quotas, use per instance)


def uses(problem: PlanningProblem, pool_key: str, tier: Tier | str) -> Uses:
    """What one instance of ``pool_key`` on ``tier`` takes of each of the
    problem's quotas (the ones it counts against only)."""
    return _uses_fn(problem)(pool_key, Tier(tier))


# Each problem's memo of ``uses``, kept beside the problem (not on it, so a
# problem still pickles for a worker process) and dropped with it.
_USES: dict[int, Callable[[str, Tier], Uses]] = {}


def _uses_fn(problem: PlanningProblem) -> Callable[[str, Tier], Uses]:
    fn = _USES.get(id(problem))
    if fn is not None:
        return fn
    quotas = problem.quotas
    snaps = {p.key: p.snap for p in problem.pools}

    @cache
    def of(pool_key: str, tier: Tier) -> Uses:
        snap = snaps.get(pool_key)
        if snap is None or not quotas:
            return ()
        out = []
        for i, q in enumerate(quotas):
            u = quota_use(q, snap.pool, snap.instance, tier)
            if u > 0:
                out.append((i, u))
        return tuple(out)

    _USES[id(problem)] = of
    weakref.finalize(problem, _USES.pop, id(problem), None)
    return of


def split_key(problem: PlanningProblem, tier: Tier) -> Callable[[CostEntry], Uses]:
    """The quotas an entry on ``tier`` counts against: the aggregation merges
    options only within one value (always ``()`` without quotas)."""
    of = _uses_fn(problem)
    if not problem.quotas:
        return lambda e: ()
    return lambda e: of(e.pool_key, tier)


class _Alloc(Protocol):
    @property
    def tier(self) -> Tier: ...
    @property
    def pool_key(self) -> str: ...
    @property
    def period(self) -> int: ...
    @property
    def var(self) -> object: ...


Row = tuple[list[tuple[object, float]], float, str]


def milp_rows(problem: PlanningProblem, allocs: Sequence[_Alloc]) -> list[Row]:
    """The MILP's quota rows (module docstring): ``terms <= limit``, one per
    quota and period that some allocation counts against."""
    if not problem.quotas:
        return []
    of = _uses_fn(problem)
    cells: dict[tuple[int, int], list[tuple[object, float]]] = {}
    for a in allocs:
        for i, u in of(a.pool_key, a.tier):
            cells.setdefault((i, a.period), []).append((a.var, u))
    out: list[Row] = []
    for (i, _t), terms in sorted(cells.items(), key=lambda kv: kv[0]):
        q = problem.quotas[i]
        out.append((terms, q.limit, f"quota {q.code or q.key}: {q.limit:g} {q.label}"))
    return out


def use(problem: PlanningProblem, table: pd.DataFrame) -> dict[tuple[int, int], float]:
    """A plan's use of each quota per period: (quota index, period) -> amount."""
    out: dict[tuple[int, int], float] = {}
    if not problem.quotas or not len(table):
        return out
    of = _uses_fn(problem)
    for key, tier, t, n in zip(
        table["pool_key"], table["tier"], table["period"], table["instances"], strict=True
    ):
        for i, u in of(str(key), Tier(str(tier))):
            out[(i, int(t))] = out.get((i, int(t)), 0.0) + float(n) * u
    return out


def exceeded(problem: PlanningProblem, table: pd.DataFrame) -> list[tuple[Quota, int, float]]:
    """The quotas a plan breaks: (quota, period, what it takes)."""
    return [
        (problem.quotas[i], t, got)
        for (i, t), got in sorted(use(problem, table).items())
        if got > problem.quotas[i].limit * (1.0 + 1e-7) + _TOL
    ]


def binding_lines(problem: PlanningProblem, table: pd.DataFrame, workload: str) -> list[str]:
    """The quotas ``workload``'s pools count against that the plan takes all
    of in some period, in words (the most taken of each)."""
    if not problem.quotas or not len(table):
        return []
    mine = table[table["workload"] == workload]
    of = _uses_fn(problem)
    touched = {
        i
        for key, tier in zip(mine["pool_key"], mine["tier"], strict=True)
        for i, _u in of(str(key), Tier(str(tier)))
    }
    peak: dict[int, float] = {}
    for (i, _t), got in use(problem, table).items():
        peak[i] = max(peak.get(i, 0.0), got)
    out = []
    for i in sorted(touched):
        q = problem.quotas[i]
        got = peak.get(i, 0.0)
        if got >= q.limit * (1.0 - _BINDING_SHARE) - _TOL:
            code = f" {q.code}" if q.code and q.code not in q.label else ""
            out.append(f"{got:g} of {q.limit:g} {q.label} (quota{code})")
    return out


class Room:
    """The fast path's tally of each quota per period: how many instances
    of a pool on a tier still fit (``fits``), and taking them (``take``)."""

    def __init__(self, problem: PlanningProblem) -> None:
        self._of = _uses_fn(problem)
        self._left = {
            (i, t): q.limit
            for i, q in enumerate(problem.quotas)
            for t in range(len(problem.period_bounds))
        }

    def fits(self, pool_key: str, tier: Tier, t: int) -> float:
        room = np.inf
        for i, u in self._of(pool_key, tier):
            room = min(room, max(0.0, self._left[(i, t)]) / u)
        return float(room)

    def take(self, pool_key: str, tier: Tier, t: int, n: float) -> None:
        for i, u in self._of(pool_key, tier):
            self._left[(i, t)] -= n * u


def cap_allocations(
    problem: PlanningProblem, table: pd.DataFrame
) -> tuple[pd.DataFrame, list[str]]:
    """Cut an allocation table until every quota holds: in each period a
    quota breaks, its counted rows scale down together; a training gang's
    rows of that period go whole (a scaled gang is no allowed size).
    Returns the table and the quotas that cut, in words."""
    if not problem.quotas or not len(table):
        return table, []
    table = table.reset_index(drop=True).copy()
    gangs = {w.name for w in problem.workloads.of_class(WorkloadClass.TRAINING)}
    of = _uses_fn(problem)
    cut: list[str] = []
    for i, t in sorted(use(problem, table)):
        q = problem.quotas[i]
        got = use(problem, table).get((i, t), 0.0)  # after the cuts before it
        if got <= q.limit + _TOL:
            continue
        period = table["period"].to_numpy(dtype=int)
        pairs = zip(table["pool_key"], table["tier"], strict=True)
        counted = np.array([any(j == i for j, _u in of(str(k), Tier(str(r)))) for k, r in pairs])
        rows = counted & (period == t)
        keep = max(0.0, q.limit / got) * (1.0 - 1e-9)
        names = table["workload"].to_numpy().astype(str)
        factor = np.ones(len(table))
        factor[rows] = keep
        for g in {n for n in names[rows] if n in gangs}:
            factor[(period == t) & (names == g)] = 0.0
        for col in ("instances", "units", "work_per_hour"):
            table[col] = table[col].to_numpy(dtype=float) * factor
        text = f"quota {q.code or q.key}: {q.limit:g} {q.label}"
        if text not in cut:
            cut.append(text)
    return table[table["instances"] > 1e-9].reset_index(drop=True), cut
