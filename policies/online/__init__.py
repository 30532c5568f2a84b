"""Online decision rules: pure per-tick functions of what has been seen so far.

``policies.online.deadline``: one restartable job against a deadline (idle /
spot / on-demand each tick). ``policies.online.fleet``: how many serving
replicas to hold on spot in which zone and how many on on-demand.
``policies.online.registry``: every rule by name.

Rules here never see the future and do no I/O; the simulator
(``broker.simulate``) and, later, the daemon call the same functions.
"""

from policies.online.deadline import DeadlinePolicy, JobSpec, Mode, PoolHistory, TickView
from policies.online.fleet import FleetPlan, FleetPolicy, FleetSpec, FleetView, ZoneView
from policies.online.registry import (
    DEADLINE_POLICIES,
    FLEET_POLICIES,
    deadline_policy,
    fleet_policy,
)

__all__ = [
    "DEADLINE_POLICIES",
    "FLEET_POLICIES",
    "DeadlinePolicy",
    "FleetPlan",
    "FleetPolicy",
    "FleetSpec",
    "FleetView",
    "JobSpec",
    "Mode",
    "PoolHistory",
    "TickView",
    "ZoneView",
    "deadline_policy",
    "fleet_policy",
]
