r"""Regions and providers in the portfolio: the allow-lists and the region cap.

Owns the planning side of a workload's ``providers`` / ``regions``
allow-lists and ``max_region_share`` (``policies.workloads.spec``):

- **allow-lists** are a filter, not constraints: ``policies.cost_table``
  leaves a disallowed pool out of the workload's entries, so no plan (MILP or
  fast), baseline or lifecycle replacement ever sees it and the MILP stays as
  small as the allowed market. ``check_allow_lists`` refuses a workload its
  lists leave with no pool at all (exit 2 naming the field and what the
  market offers), rather than planning its whole demand unmet.
- **region cap**, beside the zone and pool caps of ``model``, over the spot
  units of region r (a ``(provider, region)``; ``rho^R_w`` the share)::

    sum_{p in r} u S_{w,p,t} <= rho^R_w sum_p u S_{w,p,t}     (each r, each t)

  ``region_caps`` gives the rows; ``widen_regions`` adds the cheapest pool of
  further regions to the spot candidates so that the cap can be met
  (``ceil(1 / rho^R) + 1`` regions, as the zone cap's zones);
  ``region_share_cap`` is the fast path's water-filling bound. A fleet-wide
  cap (``WorkloadSet.max_region_share``) is applied to every workload when
  the set is read, which bounds the fleet's spot too.

Must not: decide which regions a workload may use (the spec says), touch
PuLP beyond the variables it is handed, or solve.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from markets.errors import InputError
from markets.keys import PoolKey
from policies.cost_table import CostTable
from policies.workloads.spec import Workload

if TYPE_CHECKING:  # the problem builder imports this module: no PuLP at run time
    from broker.planning.optimizer.backend import LpVariable

__all__ = [
    "RegionCap",
    "allow_list_lines",
    "check_allow_lists",
    "region_caps",
    "region_key",
    "region_share_cap",
    "widen_regions",
]

E = TypeVar("E")


def region_key(pool_key: str) -> str:
    """``aws/us-east-1/us-east-1a/p4d.24xlarge`` -> ``aws/us-east-1``."""
    k = PoolKey.parse(pool_key)
    return f"{k.provider}/{k.region}"


@dataclass(frozen=True)
class RegionCap:
    """One row: the spot of ``terms`` (variable, units per instance) at most
    ``share`` of the workload's spot."""

    region: str
    share: float
    terms: tuple[tuple[LpVariable, float], ...]
    description: str


def region_caps(w: Workload, spot: Sequence[tuple[str, LpVariable, float]]) -> list[RegionCap]:
    """The region rows for one workload and period; ``spot`` holds
    ``(pool_key, variable, units per instance)`` of its spot allocations."""
    if w.max_region_share >= 1.0 or not spot:
        return []
    by_region: dict[str, list[tuple[LpVariable, float]]] = {}
    for key, v, u in spot:
        by_region.setdefault(region_key(key), []).append((v, u))
    return [
        RegionCap(
            r,
            w.max_region_share,
            tuple(terms),
            f"{w.name}: at most {w.max_region_share:.0%} of spot in region {r}",
        )
        for r, terms in sorted(by_region.items())
    ]


def widen_regions(w: Workload, chosen: list[E], usable: Sequence[E], key: str) -> list[E]:
    """``chosen`` spot candidates plus, while fewer regions than the cap needs
    are among them, the first (cheapest) of ``usable`` in another region.
    ``key`` names the entries' pool-key attribute."""
    if w.max_region_share >= 1.0:
        return chosen
    needed = math.ceil(1.0 / w.max_region_share) + 1
    regions = {region_key(getattr(e, key)) for e in chosen}
    out = list(chosen)
    for e in usable:
        if len(regions) >= needed:
            break
        r = region_key(getattr(e, key))
        if r not in regions:
            out.append(e)
            regions.add(r)
    return out


def region_share_cap(w: Workload, target_units: float, used_units: float) -> float:
    """Units of spot a region may still take in the fast path's water-filling,
    of a spot target of ``target_units`` (``inf``: no cap)."""
    if w.max_region_share >= 1.0:
        return math.inf
    return w.max_region_share * target_units - used_units


def allow_list_lines(w: Workload) -> list[str]:
    """What the explanation says of ``w``'s allow-lists (nothing when unset)."""
    out = []
    if w.providers is not None:
        out.append(
            f"{w.name}: providers {', '.join(p.value for p in w.providers)} only (allow-list)"
        )
    if w.regions is not None:
        out.append(f"{w.name}: regions {', '.join(w.regions)} only (allow-list)")
    return out


def check_allow_lists(costs: CostTable) -> None:
    """An ``InputError`` for the first workload whose ``providers`` /
    ``regions`` leave it no pool of its instance types in the market."""
    for i, w in enumerate(costs.workloads.workloads):
        if w.providers is None and w.regions is None:
            continue
        if costs.entries(w.name):
            continue
        offered = sorted(
            {
                f"{s.pool.provider.value}/{s.pool.region}"
                for s in costs.snapshot.pools
                if s.pool.instance_type in w.instance_types
            }
        )
        field = "regions" if w.regions is not None else "providers"
        listed = w.regions if w.regions is not None else [p.value for p in w.providers or ()]
        raise InputError(
            "workloads",
            f"workloads[{i}].{field}",
            f"{field} where the market has pools of {w.name}'s instance types "
            f"({', '.join(offered) or 'none'})",
            got=", ".join(listed),
        )
