"""Where a training gang may live: its placement contract.

Owns: ``GangPlacement`` (``zone``, ``region``, ``any``) and ``placement_key``,
the one rule that says which placement a pool belongs to under a gang's
contract (``placement`` + ``mixed_types``). Two pools are in the same
placement iff their keys are equal; a gang's whole plan (every tier, every
period, growth and shrink) stays inside one key:

- ``zone`` (the default: a synchronous gang's all-reduce crosses no zone):
  ``aws/us-east-1/us-east-1a/p4d.24xlarge``;
- ``region``: ``aws/us-east-1/*/p4d.24xlarge``;
- ``any``: ``aws/*/*/p4d.24xlarge`` (one provider still: no gang spans two
  clouds);

and, with ``mixed_types: true``, the type part is ``*`` (one gang may mix
the workload's types inside its zone, region or provider). Whole instances
are the optimizer's and the fast path's to hold (``broker.planning.optimizer``).

``placements_used`` (the placements a set of pools held at once spans:
one, or the contract is broken) and ``where`` (the explanation's line) read a plan's
pools against it.

Must not: know prices, plans or PuLP; decide which placement is cheapest.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from markets.keys import PoolKey

__all__ = [
    "ANY",
    "GangPlacement",
    "caps_apply",
    "contains",
    "placement_key",
    "placements_used",
    "where",
]

ANY = "*"


class GangPlacement(StrEnum):
    """How far one gang may spread: one zone, one region, or one provider."""

    ZONE = "zone"
    REGION = "region"
    ANY = "any"


def placement_key(
    placement: GangPlacement,
    mixed_types: bool,
    *,
    provider: str,
    region: str,
    zone: str,
    instance_type: str,
) -> str:
    """The placement a pool ``provider/region/zone/instance_type`` is in
    under the contract (module docstring)."""
    region_part = ANY if placement == GangPlacement.ANY else region
    zone_part = zone if placement == GangPlacement.ZONE else ANY
    type_part = ANY if mixed_types else instance_type
    return f"{provider}/{region_part}/{zone_part}/{type_part}"


def caps_apply(placement: GangPlacement | None) -> tuple[bool, bool]:
    """(zone, pool and failure-domain caps; region cap) on a workload's spot
    under its gang contract (``None``: no gang, every cap applies): one zone
    by contract makes the zone and pool caps moot, one region the region cap."""
    if placement is None:
        return True, True
    if placement == GangPlacement.ZONE:
        return False, False
    return True, placement == GangPlacement.ANY


def contains(key: str, *, provider: str, region: str, instance_type: str) -> bool:
    """Whether on-demand or committed capacity of ``instance_type`` bought in
    ``provider/region`` may serve a gang placed at ``key`` (such capacity can
    be launched in any zone of its region)."""
    p, r, _z, t = key.split("/")
    return p == provider and r in (ANY, region) and t in (ANY, instance_type)


def placements_used(
    placement: GangPlacement, mixed_types: bool, pool_keys: Iterable[str]
) -> set[str]:
    """The placements a gang's pools (``provider/region/zone/type``) span:
    its contract holds iff there is at most one."""
    out = set()
    for text in pool_keys:
        k = PoolKey.parse(text)
        out.add(
            placement_key(
                placement,
                mixed_types,
                provider=k.provider,
                region=k.region,
                zone=k.zone,
                instance_type=k.instance_type,
            )
        )
    return out


def where(placement: GangPlacement, mixed_types: bool, cells: Iterable[tuple[int, str]]) -> str:
    """Where a gang lives, in words, for a plan's explanation; ``cells``:
    (hour, pool key) of every allocation it holds. Each hour the gang is in
    one placement (else the line says it breaks its contract); a gang that
    moves between blocks names each stay in order."""
    contract = f"placement {placement}{', mixed types' if mixed_types else ''}"
    by_hour: dict[int, set[str]] = {}
    for hour, key in cells:
        by_hour.setdefault(int(hour), set()).add(key)
    if not by_hour:
        return f"{contract}: not running in this plan"
    stays: list[tuple[int, str]] = []  # (first hour, where)
    broken = 0
    for hour in sorted(by_hour):
        keys = by_hour[hour]
        broken += len(placements_used(placement, mixed_types, keys)) > 1
        parsed = [PoolKey.parse(k) for k in sorted(keys)]
        zones = sorted({f"{k.provider}/{k.region}/{k.zone}" for k in parsed})
        types = sorted({k.instance_type for k in parsed})
        here = f"{zones[0] if len(zones) == 1 else ' + '.join(zones)} on {', '.join(types)}"
        if not stays or stays[-1][1] != here:
            stays.append((hour, here))
    line = f"{contract}: lives in {stays[0][1]}"
    if len(stays) > 1:
        line += "".join(f", from hour {h} in {here}" for h, here in stays[1:4])
        line += f" (+{len(stays) - 4} more moves)" if len(stays) > 4 else ""
    if broken:
        line += f" (BREAKS its contract in {broken} hours)"
    return line
