"""The deadline bench's policies by name: the published baselines and the product.

Owns ``DEADLINE_POLICIES`` (``markets.registry.Registry``, in the bench's
column order), ``deadline_policy`` (a fresh policy by name) and
``decided_by`` (the ``module:qualname`` of the code that makes a policy's
decisions, for the bench JSON). The baselines are
``policies.online.registry``'s; ``spotfolio`` is the daemon's lifecycle
manager behind ``broker.bench.product.deadline`` (a lazy entry: naming it
imports nothing). Here, not in ``policies``, because that layer cannot import
the broker.

Must not: define or simulate a policy.
"""

from __future__ import annotations

from collections.abc import Callable

from markets.registry import Registry
from policies.online import registry as baselines
from policies.online.deadline import DeadlinePolicy

__all__ = ["DEADLINE_POLICIES", "OMNISCIENT_DECIDED_BY", "deadline_policy", "decided_by"]

OMNISCIENT_DECIDED_BY = "broker.simulate.omniscient:omniscient_deadline"

DEADLINE_POLICIES: Registry[Callable[[], DeadlinePolicy]] = Registry("deadline rule", "--policy")
for _name in baselines.DEADLINE_POLICIES:
    DEADLINE_POLICIES.add(
        _name,
        baselines.DEADLINE_POLICIES.get(_name),
        aliases=(_name.replace("_", "-"),) if "_" in _name else (),
    )
DEADLINE_POLICIES.add_lazy("spotfolio", "broker.bench.product.deadline:ProductDeadline")


def deadline_policy(name: str) -> DeadlinePolicy:
    """A fresh deadline policy by name (an alias is accepted)."""
    return DEADLINE_POLICIES.get(name)()


def decided_by(name: str) -> str:
    """Who decides for ``name``: the policy's ``decided_by`` if it names one
    (the product's adapters), else its class (a rule decides for itself)."""
    if name == "omniscient":
        return OMNISCIENT_DECIDED_BY
    policy = deadline_policy(name)
    named = getattr(policy, "decided_by", None)
    if isinstance(named, str):
        return named
    cls = type(policy)
    return f"{cls.__module__}:{cls.__qualname__}"
