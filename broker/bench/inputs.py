"""Generated inputs at scale: a workloads file of N workloads over a market's types.

Owns: ``workloads_yaml(n, seed, types)`` (a workloads YAML text naming ``n``
workloads, a third each serving, batch and training, each on a handful of
``types`` drawn by ``seed``), read by the plan-scale bench figure
(``broker.bench.plan_scale``) and by its profile. Each workload is small
(a few GPUs), so the fleet's demand stays within what the market's pools
hold and the plan's size, not its scarcity, is what grows with ``n``.

Must not: read files or open markets (the caller passes the type names).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

__all__ = ["workloads_yaml"]


def workloads_yaml(n: int, seed: int, types: Sequence[str]) -> str:
    """``n`` workloads (serving, batch, training in turn) over ``types``."""
    if n < 1 or not types:
        raise ValueError("workloads_yaml: n >= 1 and at least one type")
    rng = random.Random(seed)
    pool = sorted(set(types))
    lines = ["workloads:"]
    for i in range(n):
        picked = rng.sample(pool, k=min(len(pool), rng.randint(2, 5)))
        kind = ("serving", "batch", "training")[i % 3]
        lines += [f"  - name: w{i:04d}-{kind}", f"    class: {kind}"]
        lines.append(f"    instance_types: [{', '.join(picked)}]")
        if kind == "serving":
            base = rng.randint(1, 4)
            lines += [
                "    demand:",
                f"      base_units: {base}",
                f"      peak_units: {base + rng.randint(0, 4)}",
                "      peak_start_hour: 9",
                "      peak_end_hour: 21",
            ]
        elif kind == "batch":
            lines += [
                f"    unit_hours: {rng.randint(50, 400)}",
                f"    deadline_hours: {rng.choice((168, 336, 720))}",
                f"    max_units: {rng.choice((8, 16))}",
            ]
        else:
            lines += [
                "    elastic: true",
                "    min_units: 1",
                "    step_units: 1",
                "    max_units: 8",
                f"    unit_hours: {rng.randint(100, 600)}",
                f"    deadline_hours: {rng.choice((336, 480, 720))}",
            ]
    return "\n".join(lines) + "\n"
