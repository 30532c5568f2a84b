r"""Reserved-ahead blocks in the plan: a tier with a window, bought whole or held.

Owns: each block's window in the problem's hours (``window_hours``; the
problem's periods are cut at its edges), the MILP's block tier
(``BlockTier``: which workload may run in which block, its variables, rows
and price), a solved plan's blocks (``BlockTier.chosen``) and the fast
plan's held capacity (``held_instances``).

Notation as in ``model``; block b holds n_b instances of one pool in its
window [s_b, e_b), at price P_b (``CapacityBlock.cost_usd``: the upfront,
or an ODCR's hours; 0 once held, a sunk cost):

  Y_b in {0, 1} bought (held: Y_b = 1)          B_{w,b,t} >= 0 instances of w
  each b, t:  sum_w B_{w,b,t} <= n_b * |[s_b, e_b) & t| / L_t * Y_b
  objective:  + sum_b P_b Y_b

B is non-revocable capacity (work u_p theta an instance-hour, as on-demand) at
$0 an hour: the price is paid whether the instances run or not. Only deadline
jobs (training, batch) run in blocks; a gang only in the placement holding the
block's zone. Must not: price one job alone (``policies.blocks``), buy, or
import PuLP (the fast path uses this module; ``model`` makes the variables).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.planning.optimizer.problem import PlanningProblem
from markets.blocks import CapacityBlock
from markets.keys import PoolKey
from markets.model import Tier
from policies.cost_table import CostEntry
from policies.workloads.spec import Workload, WorkloadClass

if TYPE_CHECKING:
    from broker.planning.optimizer.backend import LpVariable

# (lower bound, upper bound, integer?) -> a new variable named with a prefix
NewVar = Callable[[str, float, float, bool], "LpVariable"]
Row = tuple[list[tuple["LpVariable", float]], float, str]  # terms <= rhs, described

__all__ = [
    "BLOCK_GROUP",
    "BlockTier",
    "block_pool_key",
    "held_instances",
    "is_block",
    "window_hours",
]

# An allocation's group in a block: "block:<id>" (never a commitment group
# or an on-demand option: a Savings Plan does not pay for it).
BLOCK_GROUP = "block:"


def block_pool_key(b: CapacityBlock) -> str:
    """The pool the block's instances run in."""
    return str(PoolKey(b.provider.value, b.region, b.zone, b.instance_type))


def window_hours(problem: PlanningProblem, b: CapacityBlock) -> tuple[float, float]:
    """The block's window in hours from the problem's start (may lie outside it)."""
    s = (b.start - problem.start).total_seconds() / 3600.0
    e = (b.end - problem.start).total_seconds() / 3600.0
    return s, e


def _share(problem: PlanningProblem, b: CapacityBlock, t: int) -> float:
    """The share of period ``t`` inside block ``b``'s window."""
    h0, h1 = problem.period_bounds[t]
    s, e = window_hours(problem, b)
    return max(0.0, min(h1, e) - max(h0, s)) / float(h1 - h0)


@dataclass
class BlockTier:
    """The MILP's block variables: Y_b per block, B_{w,b,t} per use."""

    problem: PlanningProblem
    new_var: NewVar
    bought: dict[str, LpVariable] = field(default_factory=dict)  # block id -> Y_b
    use: dict[tuple[str, int], list[LpVariable]] = field(default_factory=dict)  # (b, t) -> B

    @property
    def blocks(self) -> dict[str, CapacityBlock]:
        return {b.block_id: b for b in self.problem.blocks}

    def entries(
        self, w: Workload, entries: Sequence[CostEntry], place: Callable[[CostEntry], str | None]
    ) -> list[tuple[CapacityBlock, CostEntry, str | None]]:
        """The blocks ``w`` may run in, each with its pool's cost entry and
        the gang placement holding it (``place``: ``None`` for no gang, or a
        placement the gang does not have)."""
        if w.workload_class is WorkloadClass.SERVING or not self.problem.blocks:
            return []
        by_key = {e.pool_key: e for e in entries}
        out = []
        for b in self.problem.blocks:
            e = by_key.get(block_pool_key(b))
            if e is not None:
                out.append((b, e, place(e)))
        return out

    def variable(self, b: CapacityBlock, t: int, integer: bool) -> LpVariable | None:
        """A new B_{w,b,t} (``None``: period ``t`` is outside the window)."""
        if _share(self.problem, b, t) <= 0.0:
            return None
        if b.block_id not in self.bought:
            self.bought[b.block_id] = self.new_var("Y", 1.0 if b.held else 0.0, 1.0, True)
        v = self.new_var("B", 0.0, float(b.count), integer)
        self.use.setdefault((b.block_id, t), []).append(v)
        return v

    def objective(self) -> list[tuple[LpVariable, float]]:
        """Each offering's price on its Y_b (held ones: sunk, none)."""
        blocks = self.blocks
        return [(y, blocks[i].cost_usd) for i, y in self.bought.items() if blocks[i].cost_usd > 0]

    def rows(self) -> list[Row]:
        """Capacity only inside the window, and only when bought."""
        blocks = self.blocks
        out: list[Row] = []
        for (i, t), vs in self.use.items():
            b = blocks[i]
            cap = b.count * _share(self.problem, b, t)
            verb = "held" if b.held else "if bought"
            text = f"block {i}: {cap:g} x {b.instance_type} in period {t} ({verb})"
            out.append(([(v, 1.0) for v in vs] + [(self.bought[i], -cap)], 0.0, text))
        return out

    def chosen(self, value: Callable[[LpVariable], float]) -> tuple[CapacityBlock, ...]:
        """The blocks the solved plan holds or buys."""
        blocks = self.blocks
        return tuple(blocks[i] for i, y in sorted(self.bought.items()) if value(y) > 0.5)


def held_instances(problem: PlanningProblem, pool_key: str, t: int) -> float:
    """Instances of held blocks in ``pool_key`` during period ``t`` (the fast
    plan runs deadline jobs there first, at no hourly price)."""
    return sum(
        b.count * _share(problem, b, t)
        for b in problem.blocks
        if b.held and block_pool_key(b) == pool_key
    )


def is_block(group: str, tier: Tier) -> bool:
    """Whether an allocation of ``group`` on ``tier`` runs in a block."""
    return tier is Tier.ON_DEMAND and group.startswith(BLOCK_GROUP)
