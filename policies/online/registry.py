"""The online rules by name: ``DEADLINE_POLICIES`` and ``FLEET_POLICIES``.

Owns: the two registries (``markets.registry.Registry``: names in
registration order, hyphenated aliases, an ``InputError`` naming ``--policy``
and listing the valid names on a typo) and ``deadline_policy`` /
``fleet_policy``, which return a fresh rule by name. Rules are registered
here, not in their modules, so no rule module needs another's registry. The
deadline rules here are the published baselines; Spotfolio's own deadline
decisions are the lifecycle manager's (``broker.lifecycle.deadline``), which
the bench registers beside these (``broker.bench.rules``): this layer cannot
import the broker.

Must not: define a rule, or simulate one.
"""

from __future__ import annotations

from collections.abc import Callable

from markets.registry import Registry
from policies.online.deadline import DeadlinePolicy, Greedy, OnDemand, UniformProgress
from policies.online.fleet import (
    EvenSpread,
    FleetPolicy,
    OnDemandFleet,
    SpotHedge,
    StaticMix,
)

__all__ = ["DEADLINE_POLICIES", "FLEET_POLICIES", "deadline_policy", "fleet_policy"]

# name -> a factory of fresh rules (the rule classes themselves).
DEADLINE_POLICIES: Registry[Callable[[], DeadlinePolicy]] = Registry("deadline rule", "--policy")
DEADLINE_POLICIES.add("on_demand", OnDemand, aliases=("on-demand",))
DEADLINE_POLICIES.add("greedy", Greedy)
DEADLINE_POLICIES.add("uniform_progress", UniformProgress, aliases=("uniform-progress",))

FLEET_POLICIES: Registry[Callable[[], FleetPolicy]] = Registry("fleet rule", "--policy")
FLEET_POLICIES.add("on_demand", OnDemandFleet, aliases=("on-demand",))
FLEET_POLICIES.add("static_mix", StaticMix, aliases=("static-mix",))
FLEET_POLICIES.add("even_spread", EvenSpread, aliases=("even-spread",))
FLEET_POLICIES.add("spothedge", SpotHedge)
# The product's entry is the daemon's own decision code (the lifecycle manager
# behind the fleet engine's rule protocol), which lives in broker: named as a
# lazy target, imported on first use, so this layer imports nothing of broker.
FLEET_POLICIES.add_lazy("spotfolio", "broker.bench.product.fleet:ProductFleet")


def deadline_policy(name: str) -> DeadlinePolicy:
    """A fresh deadline rule by name (an alias is accepted)."""
    return DEADLINE_POLICIES.get(name)()


def fleet_policy(name: str) -> FleetPolicy:
    """A fresh fleet rule by name (an alias is accepted)."""
    return FLEET_POLICIES.get(name)()
