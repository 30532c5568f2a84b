"""What a dry run's actions would do to the bill: the fleet now against the plan.

Owns: ``cost_diff`` (per workload and tier, the live fleet's $/h now and
after the actions a dry run would send: launches add their instances at
their pool's price, terminations take theirs away) and ``render`` (the
diff as a table, $/h and over the horizon, like a cost diff of an
infrastructure change). The horizon figure is the $/h delta held for
``horizon_hours``: what the plan would add or save if prices stayed.

Must not: decide or send anything, or price an instance other than the
daemon's book does (``price`` is handed in: $/h per instance).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from markets.cloud_fleet import Instance, LaunchRequest, TerminateRequest
from markets.model import Tier

__all__ = ["CostLine", "cost_diff", "render"]


@dataclass(frozen=True)
class CostLine:
    workload: str
    tier: str
    now_usd_per_hour: float
    plan_usd_per_hour: float

    @property
    def delta_usd_per_hour(self) -> float:
        return self.plan_usd_per_hour - self.now_usd_per_hour


def cost_diff(
    fleet: Iterable[Instance],
    requests: Sequence[LaunchRequest | TerminateRequest],
    price: Callable[[str, Tier], float],
) -> list[CostLine]:
    """``fleet``: the live instances the daemon owns; ``requests``: what it
    would send. Lines sorted by workload then tier; only those with a cost."""
    by_id = {i.instance_id: i for i in fleet}
    now: dict[tuple[str, str], float] = {}
    for i in by_id.values():
        key = (i.workload, i.tier.value)
        now[key] = now.get(key, 0.0) + price(i.pool_key, i.tier)
    plan = dict(now)
    for r in requests:
        if isinstance(r, LaunchRequest):
            key = (r.workload, r.tier.value)
            plan[key] = plan.get(key, 0.0) + r.count * price(r.pool_key, r.tier)
        else:
            for iid in r.instance_ids:
                inst = by_id.pop(iid, None)  # each instance taken away once
                if inst is not None:
                    key = (inst.workload, inst.tier.value)
                    plan[key] = plan.get(key, 0.0) - price(inst.pool_key, inst.tier)
    keys = sorted(set(now) | set(plan))
    return [CostLine(w, t, now.get((w, t), 0.0), max(0.0, plan.get((w, t), 0.0))) for w, t in keys]


def _signed(x: float) -> str:
    return f"{'+' if x > 0.005 else '-' if x < -0.005 else ' '}${abs(x):,.2f}"


def render(lines: Sequence[CostLine], horizon_hours: int) -> str:
    """The diff as text: a row per workload and tier, then the total."""
    h = horizon_hours
    head = ("workload", "tier", "now $/h", "plan $/h", "delta $/h", f"delta {h} h")
    rows = [
        (
            x.workload,
            x.tier,
            f"${x.now_usd_per_hour:,.2f}",
            f"${x.plan_usd_per_hour:,.2f}",
            _signed(x.delta_usd_per_hour),
            _signed(x.delta_usd_per_hour * h),
        )
        for x in lines
    ]
    now = sum(x.now_usd_per_hour for x in lines)
    plan = sum(x.plan_usd_per_hour for x in lines)
    rows.append(
        (
            "total",
            "",
            f"${now:,.2f}",
            f"${plan:,.2f}",
            _signed(plan - now),
            _signed((plan - now) * h),
        )
    )
    widths = [max(len(r[c]) for r in (head, *rows)) for c in range(len(head))]

    def fmt(r: tuple[str, ...]) -> str:
        left = [r[c].ljust(widths[c]) for c in range(2)]
        right = [r[c].rjust(widths[c]) for c in range(2, len(r))]
        return "  ".join(left + right).rstrip()

    out = [
        f"cost of the plan against the fleet now (over the {h} h horizon at today's prices)",
        fmt(head),
        *(fmt(r) for r in rows),
    ]
    return "\n".join(out)
