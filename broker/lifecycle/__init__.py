"""The lifecycle manager: one decision per notice, inside the notice window.

Public: ``LifecycleManager`` (``manager``), the values it returns
(``Decision``, ``LaunchIntent``, ``CheckpointVerdict``, ``SpotReturn``) and its
settings ``LifecycleConfig`` (``values``), the one book of pools that refused
capacity ``UnavailableOfferings`` (``fallback``). Inside: ``fallback`` (the one
placement rule, "which pool instead?", which the daemon's reconcile and
launcher ask too, through ``LifecycleManager.instead``), ``choices`` (where lost
capacity may go), ``stretches`` (break-glass against the dollar cap),
``deadline`` and ``tiers`` (the tier rule for a job with a deadline),
``spells`` (the spells of spot a pool was watched to have and not), ``view``
(the fleet and the market indexed for speed); the rules' state machines are
``policies.breakglass``. For each revocation the manager chooses one of:

- ``shrink``: an elastic training job keeps running on fewer units, in whole
  steps, never below ``min_units``, only if no resize happened within its
  minimum dwell or the preemption budget's hour, and only while the deadline
  slack allows running smaller. A serving workload "shrinks" only its spot
  hedge above the non-revocable base, as a last resort;
- ``replace``: launch the lost work in another acceptable spot pool, skipping
  pools and zones whose breaker is open and pools marked unavailable
  (insufficient capacity, for ``UNAVAILABLE_OFFERING_TTL_S``), pools outside
  the failure domain that just revoked first, a current placement score
  under 4 last (``placement``: read per its TTL), then cheapest
  *effective* cost (``policies.cost_table``: the pool's hazard is in
  it), then lowest hazard, then highest placement score, then the workload's
  preference (``fallback``); within the churn
  budget; within the workload's zone and pool shares if any pool allows it,
  else the best pool over them (said so; the next plan spreads it again);
  training gangs keep their instance type;
- ``break_glass``: on-demand when spot is adverse (no pool passes the filters)
  or the deadline slack is gone (it no longer covers what spot is expected to
  lose to further interruptions before the deadline), if the estimated extra
  dollars ``(on-demand - spot) x hours until calm`` fit the break-glass cap;
- ``checkpoint_only``: take the notice checkpoint and launch nothing (batch
  waiting for a cheaper market, or nothing allowed: said so in the reason);
- ``ignore``: a duplicate, not our instance, not spot, or a rebalance
  recommendation where rebalances have not predicted interruptions.

Per class: serving replaces, else breaks glass, else loses hedge; training
breaks glass first when the deadline needs it, otherwise shrinks (elastic),
replaces, breaks glass; batch breaks glass only for a deadline, replaces only
when the replacement costs at most ``batch_replace_max_premium`` more per
unit of work than the lost pool, and otherwise waits (restart-tolerant).

A rigid training gang with a deadline whose progress the daemon reports is
decided by the deadline tier rule (``deadline``, its per-job memory in
``tiers``): on a revocation, after shrink and replace, it breaks glass only
when the rule says on-demand now and otherwise waits; in ``tick`` the rule
returns its stretch to spot (its own pool while the market reports spot
there), keeps it (extended within the cap) or ends it, and opens on-demand
for the job while it waits (``ReturnKind.OPEN_ON_DEMAND``, a stretch against
the cap like any other). ``observe_spot`` takes the market's availability
reports of a pool from before (``tick`` takes them from its snapshot).

The churn budget counts spot units (re)placed by notice decisions (and returns
to spot): a storm spends it and the rest go on-demand within the cap or wait;
on-demand launches do not count, as they cannot be revoked again. A training
gang's spot moves whole: more units than the limit go into an empty window
alone (``policies.breakglass.ChurnBudget.allowing``), else a gang larger
than the limit could never leave on-demand.

A sequence: ``us-east-1a/p4d revoked -> pool breaker opens -> replace in
us-east-1b/p4d``; ``1a revokes again within 5 min -> zone breaker opens ->
replace in 1b/1c``; ``1b, 1c breakers open too -> break glass on 1a
on-demand ($ committed) -> tick(): breakers closed, dwell passed, savings x
lifetime > switching cost -> back to spot``.

While the snapshot is stale (no fresh market data), every hazard counts
``stale_hazard_multiplier`` times over: in the ranking, the deadline margin
and the return-to-spot test. After a restart, ``restore_break_glass`` takes
back the ledger and the stretches a store recorded (``stretch_state``);
``set_horizon_start`` takes the plan epoch; ``withdraw`` forgets a decision the
daemon refused.

``tick`` returns break-glass capacity to spot with hysteresis and keeps the
cap: a stretch is extended only while the cap can pay for it, otherwise it
goes back to spot or ends. Everything is pure and deterministic given the
clock: no I/O, no LP. ``handle`` is a dictionary walk over the snapshot's
pools and the fleet (see ``handle`` for reusing the fleet index).

Must not: call a provider, run the checkpoint hook (``broker.daemon.hooks``),
persist anything (the daemon's store records decisions) or solve a plan.
"""

from __future__ import annotations

from broker.lifecycle.fallback import UnavailableOfferings
from broker.lifecycle.manager import LifecycleManager
from broker.lifecycle.values import (
    CheckpointVerdict,
    Decision,
    DecisionKind,
    LaunchIntent,
    LifecycleConfig,
    ReturnKind,
    SpotReturn,
)

__all__ = [
    "CheckpointVerdict",
    "Decision",
    "DecisionKind",
    "LaunchIntent",
    "LifecycleConfig",
    "LifecycleManager",
    "ReturnKind",
    "SpotReturn",
    "UnavailableOfferings",
]
