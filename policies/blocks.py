"""Whether a deadline job should run in a reserved-ahead block, or on spot plus on-demand.

Owns: ``BlockJob`` (a gang's remaining work, deadline, prices and spot risk),
``spot_then_on_demand`` (the cheapest mix of the two that meets the
deadline), ``block_fits`` and ``choose_block`` (the cheapest block that
finishes the job, when it beats the mix) with its ``BlockChoice`` advice.

Must not: do I/O, read markets or buy anything (the daemon buys only with an
approval setting; without one the choice is a recommendation).

The mix. A gang of ``nodes`` needs ``H`` productive hours each by ``D``. Spot
delivers a productive hour in ``f / a`` wall hours (``f``: the spot time
factor of ``policies.effective_cost``; ``a``: the share of hours spot
capacity can be had, the job's risk of not getting it) and bills ``f`` of
them; on-demand delivers one an hour. Running ``s`` hours on spot and
``H - s`` on on-demand meets the deadline iff ``s f / a + (H - s) <= D``, so
the most spot the deadline allows is ``s = (D - H) / (f / a - 1)`` (all of
``H`` when ``f <= a``). The mix costs ``nodes (s f p_spot + (H - s) p_od)``.
A block runs the gang uninterrupted from its start; it fits when it has the
nodes and ``start + H`` is within both its window and the deadline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from markets.blocks import CapacityBlock

__all__ = ["BlockChoice", "BlockJob", "block_fits", "choose_block", "spot_then_on_demand"]


@dataclass(frozen=True, slots=True)
class BlockJob:
    """One gang's remaining work, per node, and what its alternatives cost."""

    instance_type: str
    nodes: int
    work_hours: float  # productive hours each node still needs
    deadline_hours: float  # from ``now``
    spot_usd_per_hour: float
    on_demand_usd_per_hour: float
    spot_time_factor: float = 1.0
    spot_availability: float = 1.0

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ValueError(f"nodes must be >= 1, got {self.nodes}")
        for name in ("work_hours", "deadline_hours", "spot_usd_per_hour", "on_demand_usd_per_hour"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        if not (math.isfinite(self.spot_time_factor) and self.spot_time_factor >= 1.0):
            raise ValueError(f"spot_time_factor must be >= 1, got {self.spot_time_factor!r}")
        if not 0.0 <= self.spot_availability <= 1.0:
            raise ValueError(f"spot_availability must be in [0, 1], got {self.spot_availability!r}")


@dataclass(frozen=True, slots=True)
class Mix:
    """Spot and on-demand productive hours per node, and their cost (all nodes)."""

    spot_hours: float
    on_demand_hours: float
    cost_usd: float


def spot_then_on_demand(job: BlockJob) -> Mix | None:
    """The cheapest spot + on-demand mix that meets the deadline (``None``:
    even on-demand alone cannot)."""
    h, d = job.work_hours, job.deadline_hours
    if h > d:
        return None
    spot_rate = job.spot_time_factor * job.spot_usd_per_hour
    if job.spot_availability == 0 or spot_rate >= job.on_demand_usd_per_hour:
        s = 0.0
    else:
        stretch = job.spot_time_factor / job.spot_availability
        s = h if stretch <= 1.0 else min(h, (d - h) / (stretch - 1.0))
    cost = job.nodes * (s * spot_rate + (h - s) * job.on_demand_usd_per_hour)
    return Mix(spot_hours=s, on_demand_hours=h - s, cost_usd=cost)


def block_fits(job: BlockJob, block: CapacityBlock, now: datetime) -> bool:
    """Whether ``block`` can run the whole gang to the end of its work by the deadline."""
    if block.instance_type != job.instance_type or block.count < job.nodes:
        return False
    begin = max(block.start, now)
    done = begin + timedelta(hours=job.work_hours)
    return done <= block.end and done <= now + timedelta(hours=job.deadline_hours)


@dataclass(frozen=True, slots=True)
class BlockChoice:
    """The block to use (``None``: the mix), and both prices."""

    block: CapacityBlock | None
    block_cost_usd: float | None
    mix: Mix | None

    @property
    def saving_usd(self) -> float:
        """What the block saves over the mix (0 when no block is chosen)."""
        if self.block is None or self.block_cost_usd is None:
            return 0.0
        return math.inf if self.mix is None else self.mix.cost_usd - self.block_cost_usd

    def advice(self) -> str:
        """One line: what to reserve and when, or why not."""
        mix = (
            "no mix meets the deadline"
            if self.mix is None
            else (f"${self.mix.cost_usd:,.2f} on spot + on-demand")
        )
        b = self.block
        if b is None:
            return f"no block: {mix} is cheaper than any block that fits"
        verb = "use held" if b.held else "reserve"
        return (
            f"{verb} {b.kind.value} {b.block_id}: {b.count} x {b.instance_type} in {b.zone} "
            f"from {b.start.astimezone(UTC):%Y-%m-%d %H:%M} UTC for {b.hours:g} h, "
            f"${self.block_cost_usd:,.2f} vs {mix}"
        )


def choose_block(job: BlockJob, blocks: tuple[CapacityBlock, ...], now: datetime) -> BlockChoice:
    """The cheapest fitting block if it costs less than the mix, else the mix.
    Ties go to the mix (a block is paid whether used or not); among blocks,
    the earlier start, then the id, breaks a tie."""
    mix = spot_then_on_demand(job)
    fitting = sorted(
        (b for b in blocks if block_fits(job, b, now)),
        key=lambda b: (b.cost_usd, b.start, b.block_id),
    )
    if fitting and (mix is None or fitting[0].cost_usd < mix.cost_usd):
        return BlockChoice(block=fitting[0], block_cost_usd=fitting[0].cost_usd, mix=mix)
    return BlockChoice(block=None, block_cost_usd=None, mix=mix)
