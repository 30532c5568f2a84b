"""Online decision rules: pure per-tick functions of what has been seen so far.

``policies.online.deadline``: one restartable job against a deadline (idle /
spot / on-demand each tick). ``policies.online.fleet``: how many serving
replicas to hold on spot in which zone and how many on on-demand.

Rules here never see the future and do no I/O; the simulator
(``broker.simulate``) and, later, the daemon call the same functions.
"""

from policies.online.deadline import (
    DEADLINE_POLICIES,
    DeadlinePolicy,
    JobSpec,
    Mode,
    TickView,
    deadline_policy,
)

__all__ = [
    "DEADLINE_POLICIES",
    "DeadlinePolicy",
    "JobSpec",
    "Mode",
    "TickView",
    "deadline_policy",
]
