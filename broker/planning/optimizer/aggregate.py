"""Exact aggregation: drop the options no constraint can prefer.

Owns: ``undominated_on_demand`` and ``undominated_commitments``, the
dominance rules ``model.build_model`` applies before creating variables.

An option *dominates* another when it enters every constraint with the same
coefficients and costs no more: then any plan using the dearer one can swap
to it at no loss, so dropping the dearer option leaves the optimum (and the
LP bound) unchanged. That is an exact aggregation, not a heuristic.

- On-demand (per workload; no shared cap but account quotas, whose rows
  tell options apart: those of other quotas are never merged): each option enters the model
  through its work per instance-hour a = u * theta and its units u (gang
  sizes, parallelism caps, spot shares, churn per unit). With continuous
  instance counts only the ratio a/u = theta matters (n instances of u units
  are n*u/u' instances of u'); with integer counts u itself matters too. So
  keep the cheapest option per theta (per (u, theta) when integral).
- Commitments (shared by workloads through C_g): group g dominates g' when
  every workload that may use g' may use g with the same (u, a), and g costs
  no more per instance-hour; a plan's C_{g'} then moves to C_g whole. Groups
  with fixed (already bought) commitments are always kept.

Options a rolling horizon is already running (``previous_instances``) are
kept: leaving them costs churn, which the dominance test does not see.

Must not: build variables or know PuLP (``model`` does).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Set

from markets.model import Tier
from policies.cost_table import CostEntry

__all__ = ["undominated_commitments", "undominated_on_demand"]

# Coefficients equal to this many decimals count as equal (throughput factors
# are stated to a few decimals; a float ratio would otherwise never tie).
_DECIMALS = 9


def _theta(e: CostEntry) -> float:
    return round(e.work_per_instance_hour / e.units_per_instance, _DECIMALS)


def undominated_on_demand(
    options: list[CostEntry],
    *,
    integral: bool,
    keep: Set[str] = frozenset(),
    split: Callable[[CostEntry], object] | None = None,
) -> list[CostEntry]:
    """The cheapest on-demand option per theta (per (units, theta) when
    instance counts are integer), in the input order, plus pools in ``keep``.
    ``split``: options of different values enter other rows (the account
    quotas that count them) and are never merged."""
    best: dict[tuple[float, int, object], CostEntry] = {}
    for e in options:
        price = e.usd_per_work_hour[Tier.ON_DEMAND]
        if price is None:
            continue
        part = None if split is None else split(e)
        k = (_theta(e), e.units_per_instance if integral else 0, part)
        cur = best.get(k)
        if cur is None or price < (cur.usd_per_work_hour[Tier.ON_DEMAND] or 0.0) - 1e-12:
            best[k] = e
    chosen = {id(e) for e in best.values()}
    return [e for e in options if id(e) in chosen or e.pool_key in keep]


def undominated_commitments(
    options: Mapping[str, Mapping[str, CostEntry]],
    usd_per_instance_hour: Mapping[str, float],
    keep: Set[str] = frozenset(),
    split: Callable[[CostEntry], object] | None = None,
) -> set[str]:
    """Groups to keep. ``options``: group -> {workload: its entry for the
    group}; ``usd_per_instance_hour``: group -> committed price; ``split``:
    as ``undominated_on_demand``'s."""

    def signature(g: str) -> dict[str, tuple[int, float, object]]:
        return {
            w: (
                e.units_per_instance,
                round(e.work_per_instance_hour, _DECIMALS),
                None if split is None else split(e),
            )
            for w, e in options[g].items()
        }

    sigs = {g: signature(g) for g in options}
    # Cheapest first (ties by name) so a dominated group always meets its
    # dominator among the kept ones.
    order = sorted(options, key=lambda g: (usd_per_instance_hour[g], g))
    kept: list[str] = []
    for g in order:
        sig = sigs[g]
        dominated = g not in keep and any(
            all(sigs[h].get(w) == s for w, s in sig.items()) for h in kept
        )
        if not dominated:
            kept.append(g)
    return set(kept)
