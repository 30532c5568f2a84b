r"""Failure domains in the portfolio MILP: the zone cap over zones that revoke together.

Owns ``domain_caps`` (the rows the model adds) and ``spread_key`` (which
domain a zone's spot counts in when the model picks enough independent places
for its caps). The zone cap of ``broker.planning.optimizer.model``,
``sum_{p in z} u S_{w,p,t} <= zeta_w sum_p u S_{w,p,t}``, assumes zones revoke
independently; zones of one failure domain (``markets.model.FailureDomain``,
found by ``markets.hazard.clustering.failure_domains`` in the traces or the
account's record) do not, so the same cap applies to their union::

  sum_{p in D} u S_{w,p,t} <= zeta_w sum_p u S_{w,p,t}     (each domain D of
                                                            >= 2 of w's zones)

A domain of one zone is that zone's cap already. A domain that holds every
zone the workload has spot in has nowhere outside it to spread to: its row
would not diversify, only forbid spot (the cap is a share of the spot held),
so it is left out and the zone caps stand alone (``diversifiable``). Without
domains (an empty ``MarketSnapshot.failure_domains``) nothing is added: the
model is main's.

Must not: touch PuLP beyond reading the variables it is handed, solve, or
decide which zones form a domain (``markets.hazard.clustering`` does).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from broker.planning.optimizer.backend import LpVariable
from markets.keys import PoolKey
from markets.model import FailureDomain
from policies.workloads.spec import Workload

__all__ = ["DomainCap", "diversifiable", "domain_caps", "spread_key"]


@dataclass(frozen=True)
class DomainCap:
    """One row: the spot of ``terms`` (variable, units per instance) at most
    the workload's zone share of its spot."""

    domain: str
    terms: tuple[tuple[LpVariable, float], ...]
    description: str


def domain_caps(
    w: Workload,
    spot: Sequence[tuple[str, LpVariable, float]],
    domains: Sequence[FailureDomain],
) -> list[DomainCap]:
    """The domain rows for one workload and period; ``spot`` holds
    ``(pool_key, variable, units per instance)`` of its spot allocations."""
    if w.max_zone_share >= 1.0 or not domains or not spot:
        return []
    out = []
    for d in diversifiable(domains, {PoolKey.parse(key).zone_key for key, _v, _u in spot}):
        members = set(d.zones)
        terms = [(v, u) for key, v, u in spot if PoolKey.parse(key).zone_key in members]
        zones = {PoolKey.parse(key).zone_key for key, _v, _u in spot} & members
        if len(zones) < 2:
            continue  # one zone of it in play: its zone cap says the same
        out.append(
            DomainCap(
                d.name,
                tuple(terms),
                f"{w.name}: at most {w.max_zone_share:.0%} of spot in failure domain "
                f"{'+'.join(sorted(zones))} (revocations {d.co_share:.0%} together, "
                f"{d.baseline:.0%} by chance)",
            )
        )
    return out


def diversifiable(domains: Sequence[FailureDomain], zones: Iterable[str]) -> list[FailureDomain]:
    """The ``domains`` that leave at least one of ``zones`` (zone keys with
    spot in play) outside them: only those can be spread away from."""
    in_play = set(zones)
    return [d for d in domains if not in_play <= set(d.zones)]


def spread_key(
    domains: Sequence[FailureDomain], zones: Iterable[str] | None = None
) -> Callable[[str], str]:
    """Zone key -> the place its spot counts in: its domain's name, or itself.
    With ``zones`` (those in play), a domain holding all of them counts its
    zones one by one (``diversifiable``)."""
    kept = domains if zones is None else diversifiable(domains, zones)
    of = {z: d.name for d in kept for z in d.zones}
    return lambda zone_key: of.get(zone_key, zone_key)
