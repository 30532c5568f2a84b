"""A scenario's plan over time and by zone, for the what-if's charts.

Owns: ``timeline_dict`` (each scenario's *planned* cost by tier per step of
hours: committed paid every hour, on-demand and spot at the plan's counts and
prices) and ``spot_by_zone`` (each scenario's planned spot instance-hours and
dollars per zone key, ``aws/us-east-1a``: the exposure a zone's loss would
hit). These are the plan's figures, not the bill's (the billed totals stay
the scenarios'); the JSON document says so in ``timeline.basis``, and the
report says it under the chart.

Must not: bill, plan or format anything (``broker.whatif.billing`` bills,
``broker.cli.report`` renders).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from broker.planning.plan import Plan
from markets.keys import PoolKey
from markets.model import Tier

__all__ = ["spot_by_zone", "timeline_dict"]

_TIERS = (Tier.COMMITTED, Tier.ON_DEMAND, Tier.SPOT)


def _step_hours(hours: int) -> int:
    """A day a bar up to ~120 days, a week beyond: a chart of <= ~60 bars."""
    return 24 if hours <= 120 * 24 else 24 * 7


def _planned_by_tier(plan: Plan, hours: int, step: int) -> dict[str, list[float]]:
    steps = max(1, -(-hours // step))
    a = plan.hourly_instances()
    out: dict[str, list[float]] = {}
    hour_of_step = np.minimum(np.arange(hours) // step, steps - 1)
    committed = np.bincount(hour_of_step, minlength=steps) * plan.committed_usd_per_hour()
    out[Tier.COMMITTED.value] = [round(float(v), 2) for v in committed]
    for tier in (Tier.ON_DEMAND, Tier.SPOT):
        rows = a[(a["tier"] == tier.value) & (a["hour"] < hours)] if len(a) else a
        if len(rows) == 0:
            out[tier.value] = [0.0] * steps
            continue
        usd = rows["instances"].to_numpy(dtype=float) * rows["usd_per_instance_hour"].to_numpy(
            dtype=float
        )
        idx = rows["hour"].to_numpy(dtype=int) // step
        got = np.bincount(idx, weights=usd, minlength=steps)[:steps]
        out[tier.value] = [round(float(v), 2) for v in got]
    return out


def timeline_dict(plans: Sequence[tuple[str, Plan]], hours: int) -> dict[str, object]:
    """JSON ``timeline``: per scenario, planned dollars by tier per step."""
    step = _step_hours(hours)
    return {
        "basis": "planned",
        "step_hours": step,
        "scenarios": {name: _planned_by_tier(p, hours, step) for name, p in plans},
    }


def spot_by_zone(plans: Sequence[tuple[str, Plan]], hours: int) -> list[dict[str, object]]:
    """JSON ``spot_by_zone``: a row per scenario and zone holding planned spot,
    largest first within a scenario; ``share`` is of the scenario's spot
    instance-hours."""
    out: list[dict[str, object]] = []
    for name, plan in plans:
        a = plan.hourly_instances()
        if len(a) == 0:
            continue
        spot = a[(a["tier"] == Tier.SPOT.value) & (a["hour"] < hours)]
        n = spot["instances"].to_numpy(dtype=float)
        usd = n * spot["usd_per_instance_hour"].to_numpy(dtype=float)
        per_pool = spot.assign(ih=n, usd=usd).groupby("pool_key", sort=True)[["ih", "usd"]].sum()
        by_zone: dict[str, list[float]] = {}
        for key, ih, cost in zip(per_pool.index, per_pool["ih"], per_pool["usd"], strict=True):
            acc = by_zone.setdefault(PoolKey.parse(str(key)).zone_key, [0.0, 0.0])
            acc[0] += float(ih)
            acc[1] += float(cost)
        total = sum(v[0] for v in by_zone.values())
        if total <= 0:
            continue
        for zone, (ih, usd_total) in sorted(by_zone.items(), key=lambda kv: -kv[1][0]):
            out.append(
                {
                    "scenario": name,
                    "zone": zone,
                    "instance_hours": round(ih, 2),
                    "planned_usd": round(usd_total, 2),
                    "share": round(ih / total, 6),
                }
            )
    return out
