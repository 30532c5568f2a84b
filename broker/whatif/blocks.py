"""What reserved-ahead blocks are worth to a what-if's deadline jobs, and what to reserve.

Owns: ``price_blocks`` (the deadline jobs, training and batch, planned over
the what-if's period from its first snapshot twice: with the blocks file's
offerings and held blocks, and without; the difference is what the blocks
save) and its ``BlockPricing`` document, whose advice names each block to
reserve or use: kind, id, count and type, zone, start, duration, upfront,
and the saving.

Must not: buy (the daemon does, with an approval setting), read files
(``markets.blocks.load_blocks``) or bill the replayed scenarios.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import UTC, datetime

from broker.planning.optimizer.blocks import block_pool_key
from broker.planning.optimizer.problem import PlanOptions, build_problem
from broker.planning.optimizer.solve import solve
from broker.planning.plan import Plan
from markets.blocks import CapacityBlock
from markets.model import MarketSnapshot
from policies.workloads.spec import WorkloadClass, WorkloadSet

__all__ = ["BlockPricing", "price_blocks"]


@dataclass(frozen=True)
class BlockPricing:
    """The deadline jobs' plan with the blocks and without, and its blocks."""

    start: datetime
    hours: int
    offered: tuple[CapacityBlock, ...]
    with_blocks: Plan
    without: Plan
    # Blocks no deadline job can run in: a pool the market does not list, or
    # a type none of the jobs may use.
    unusable: tuple[str, ...] = ()

    @property
    def saving_usd(self) -> float:
        return self.without.planned_cost_usd() - self.with_blocks.planned_cost_usd()

    def advice(self) -> list[str]:
        """One line per block the plan reserves or uses, or why none."""
        lines = [f"{i}: no deadline job can run in it (pool not in the market, or a type "
                 "no job lists)" for i in self.unusable]  # fmt: skip
        chosen = self.with_blocks.blocks
        if not chosen:
            return [*lines, f"reserve no block: the deadline jobs cost "
                    f"${self.without.planned_cost_usd():,.2f} on spot and on-demand, less "
                    "than with any block offered"]  # fmt: skip
        for b in chosen:
            verb = "use held" if b.held else "reserve"
            paid = "upfront" if b.hourly_usd == 0 else "over its window"
            price = "sunk" if b.held else f"${b.cost_usd:,.2f} {paid}"
            lines.append(f"{verb} {b.kind.value} {b.block_id}: {b.count} x {b.instance_type} "
                         f"in {b.zone} from {b.start.astimezone(UTC):%Y-%m-%d %H:%M} UTC "
                         f"for {b.hours:g} h, {price}")  # fmt: skip
        lines.append(f"the blocks save ${self.saving_usd:,.2f}: the deadline jobs cost "
                     f"${self.with_blocks.planned_cost_usd():,.2f} with them, "
                     f"${self.without.planned_cost_usd():,.2f} without")  # fmt: skip
        return lines

    def to_dict(self) -> dict[str, object]:
        return {
            "start": self.start.isoformat(),
            "hours": self.hours,
            "offered": [_block_dict(b) for b in self.offered],
            "chosen": [b.block_id for b in self.with_blocks.blocks],
            "unusable": list(self.unusable),
            "with_blocks_usd": round(self.with_blocks.planned_cost_usd(), 2),
            "without_blocks_usd": round(self.without.planned_cost_usd(), 2),
            "blocks_usd": round(self.with_blocks.blocks_usd(), 2),
            "saving_usd": round(self.saving_usd, 2),
            "advice": self.advice(),
        }


def _block_dict(b: CapacityBlock) -> dict[str, object]:
    return {"block_id": b.block_id, "kind": b.kind.value, "provider": b.provider.value,
            "instance_type": b.instance_type, "zone": b.zone, "count": b.count,
            "start": b.start.isoformat(), "hours": b.hours, "held": b.held,
            "cost_usd": round(b.cost_usd, 2)}  # fmt: skip


def price_blocks(
    snapshot: MarketSnapshot,
    workloads: WorkloadSet,
    blocks: tuple[CapacityBlock, ...],
    *,
    hours: int,
    options: PlanOptions,
) -> BlockPricing | None:
    """The deadline jobs of ``workloads`` planned from ``snapshot`` over
    ``hours`` with ``blocks`` and without (``None``: no deadline job)."""
    jobs = [w for w in workloads.workloads if w.workload_class is not WorkloadClass.SERVING]
    if not jobs:
        return None
    ws = workloads.model_copy(update={"workloads": jobs})
    opts = dataclasses.replace(options, allow_committed=False)  # blocks against spot + on-demand

    def plan(offered: tuple[CapacityBlock, ...]) -> Plan:
        return solve(build_problem(snapshot, ws, {}, hours=hours, options=opts, blocks=offered),
                     explain=False)  # fmt: skip

    pools = {p.pool.key for p in snapshot.pools}
    types = {t for w in jobs for t in w.instance_types}
    unusable = tuple(b.block_id for b in blocks
                     if block_pool_key(b) not in pools or b.instance_type not in types)  # fmt: skip
    return BlockPricing(snapshot.at, hours, blocks, plan(blocks), plan(()), unusable)
