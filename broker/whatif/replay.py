"""What the daemon would have done over a past period: its planning loop, replayed.

Owns: ``replay``. At every step of ``step_hours`` the daemon's planning loop
(``broker.planning.rolling``: ``window_problem`` on the carried
``RollingState``, solved by the daemon's planner) plans ``horizon_hours``
ahead on what was known then: the market snapshot of that hour and a
serving forecast made from the demand history before it, refreshed, sensed
and planned in the daemon's job order (``broker.daemon.jobs``). It keeps the first
step and carries forward what *actually* happened in it (``MarketActuals``):
spot work delivered at the share of each hour spot was really held (as
``broker.whatif.billing`` credits it), dollars at the hour's actual spot
price. The what-if's
``spotfolio`` scenario and the portfolio bench are this replay, billed on
actuals.

Must not: bill (``broker.whatif.billing``), react to lost spot (the
lifecycle does, in the bill's reaction replay) or look past a step's hour
for anything but the actuals of the step just taken.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

import numpy as np

from broker.daemon.jobs import Job, run_in_order
from broker.planning.demand import DemandSet
from broker.planning.optimizer.budgets import Charge, spent_by_key
from broker.planning.optimizer.problem import FloatArray, PlanningProblem, PlanOptions
from broker.planning.plan import Plan
from broker.planning.rolling import (
    RollingResult,
    RollingState,
    StepOutcome,
    initial_state,
    rolling_horizon,
    window_problem,
)
from broker.whatif.billing import MarketActuals, launch_usd
from broker.whatif.reaction import Reactor, work_per_held_hour
from markets.model import MarketSnapshot, Tier
from markets.protocols import HistorySource, PriceSource
from policies.cost_table import CostTable
from policies.workloads.spec import WorkloadSet

__all__ = ["DECIDED_BY", "replay"]

# The code that makes the replay's decisions (reported as ``decided_by``): the
# problem each step solves, built from the carried state, as the daemon's plan
# job builds it at every re-plan (solved by the same optimizer).
DECIDED_BY = "broker.planning.rolling:window_problem"


def replay(
    market: PriceSource,
    workloads: WorkloadSet,
    demand: DemandSet,
    start: datetime,
    hours: int,
    actuals: MarketActuals,
    *,
    committed: Mapping[str, int] | None,
    step_hours: int = 6,
    horizon_hours: int = 24,
    options: PlanOptions | None = None,
    solve_fn: Callable[[PlanningProblem], Plan] | None = None,
    fallback_demand: Mapping[str, FloatArray] | None = None,
    progress: Callable[[str], None] | None = None,
    first: tuple[MarketSnapshot, CostTable] | None = None,
    reactor: Reactor | None = None,
) -> RollingResult:
    """Replay the planning loop over ``[start, start + hours)`` (module
    docstring). ``committed``: the commitments held over the period (bought
    before it starts; ``None``: the first step buys them). A market without
    history (a live one) gives its snapshot of ``start`` at every step, a
    recorded one its last snapshot at the steps past its span.
    ``fallback_demand``: per serving workload, hourly demand over the period
    to plan on where no forecast can be made yet (no history before it).
    ``first``: the snapshot of ``start`` and its cost table, when the caller
    has them (priced with ``options``): the first step plans on them.
    ``reactor``: the lifecycle manager each step's plan and snapshot are
    handed to (as the daemon's plan job hands its plan and its market to
    its manager): the step's lost spot
    goes through it, and what its decisions did (replacements and
    break-glass on-demand working too) is what the state carries, as the
    daemon's measured progress; without one, a step carries the plan's own
    work at the held share of spot."""
    opts = options or PlanOptions(period_hours=1)
    first_snap, first_costs = first if first is not None else (market.snapshot(start), None)
    # A recorded market knows nothing past its span: a step after it plans
    # on the last snapshot it has (as a live market's start snapshot).
    last_at = market.span()[1] if isinstance(market, HistorySource) else start
    held: list[MarketSnapshot] = [first_snap]
    steps = -(-hours // step_hours)

    def window(t: int, state: RollingState) -> PlanningProblem:
        # The step's instant in the daemon's job order: the market refreshed,
        # the demand sensed (a forecast from the history before it), the plan
        # job's problem built on both (the loop solves it); what happens in
        # the step (notices, upkeep, reconcile) is the reactor's, in ``happened``.
        at = start + timedelta(hours=t)
        fc: dict[str, FloatArray] = {}
        made: list[PlanningProblem] = []

        def refresh_market() -> None:
            if t > 0 and at <= last_at:
                held[0] = market.snapshot(at)

        def sense_demand() -> None:
            fc.update(
                (n, _finite_or(f.point.to_numpy(dtype=float), fallback_demand, n, t))
                for n, f in demand.forecast(at, horizon_hours).items()
            )

        def plan() -> None:
            snap = held[0]
            if progress is not None and (t // step_hours) % 20 == 0:
                progress(f"replaying the planning loop: step {t // step_hours + 1} of {steps}")
            costs = first_costs if snap is first_snap else None
            problem = window_problem(
                snap,
                workloads,
                fc,
                state,
                hours=horizon_hours,
                step_hours=step_hours,
                options=opts,
                costs=costs,
            )
            if reactor is not None:
                # The daemon's plan job hands its manager the snapshot it planned
                # on at every re-plan: the step's lost spot is decided on it.
                reactor.on_market(snap, problem.costs)
            made.append(problem)

        run_in_order({Job.MARKET: refresh_market, Job.DEMAND: sense_demand, Job.PLAN: plan})
        return made[0]

    def happened(state: RollingState, plan: Plan, step: int) -> StepOutcome:
        t = state.hour
        if reactor is None:
            return _step_actuals(plan, step, actuals, t)
        before = len(reactor.launched)
        reactor.run(plan, t, step)
        return _step_reacted(plan, step, actuals, t, reactor, first_snap, before)

    if solve_fn is None:
        from broker.planning.optimizer.solve import solve  # PuLP only when planning

        # the steps' allocations are kept, their reasons never read
        solve_fn = functools.partial(solve, explain=False)
    return rolling_horizon(
        window,
        hours,
        step_hours=step_hours,
        initial=initial_state(workloads, committed=committed),
        solve_fn=solve_fn,
        happened=happened,
    )


def _finite_or(
    forecast: FloatArray, fallback: Mapping[str, FloatArray] | None, name: str, t: int
) -> FloatArray:
    """The forecast, with hours it cannot say (no history yet) taken from the
    fallback demand at the same hours (its last value past its end)."""
    if fallback is None or name not in fallback or np.all(np.isfinite(forecast)):
        return forecast
    src = np.asarray(fallback[name], dtype=float)
    idx = np.minimum(np.arange(t, t + len(forecast)), len(src) - 1)
    return np.where(np.isfinite(forecast), forecast, src[idx])


def _plan_rows(
    plan: Plan,
    step: int,
    actuals: MarketActuals,
    offset: int,
    held_share: Callable[[str, str, int], float],
) -> tuple[dict[str, float], list[Charge]]:
    """Work and charges of the plan's own rows in its first ``step`` hours:
    spot at ``held_share(workload, pool key, hour)`` of each hour and the
    hour's actual price."""
    a = plan.hourly_instances()
    a = a[a["hour"] < step]
    done: dict[str, float] = {}
    charges: list[Charge] = []
    spot = Tier.SPOT.value
    for name, key, hour, n, work, usd, tier in zip(
        a["workload"],
        a["pool_key"],
        a["hour"],
        a["instances"],
        a["work_per_hour"],
        a["usd_per_instance_hour"],
        a["tier"],
        strict=True,
    ):
        h = offset + int(hour)
        w_done, paid = float(work), float(n) * float(usd)
        if tier == spot:
            held = held_share(str(name), str(key), h)
            w_done *= held
            paid = float(n) * actuals.price(str(key), h, float(usd)) * held
        done[str(name)] = done.get(str(name), 0.0) + w_done
        charges.append((str(name), Tier(str(tier)), int(hour), paid))
    return done, charges


def _step_actuals(plan: Plan, step: int, actuals: MarketActuals, offset: int) -> StepOutcome:
    """Work and dollars of the plan's first ``step`` hours as they happened:
    spot at the held share and the actual price of each hour."""
    done, charges = _plan_rows(plan, step, actuals, offset, lambda _w, key, h: actuals.held(key, h))
    # Commitments count once, as bought (``budgets.spent_by_key``).
    return done, spent_by_key(plan.start, step, plan.committed_usd_per_hour(), charges)


def _step_reacted(
    plan: Plan,
    step: int,
    actuals: MarketActuals,
    offset: int,
    reactor: Reactor,
    snapshot: MarketSnapshot,
    before: int = 0,
) -> StepOutcome:
    """Work and dollars of the plan's first ``step`` hours once the lifecycle
    reacted (``reactor`` has run them), counted as ``broker.whatif.billing``
    bills a reaction: the plan's spot at the share its whole instances held,
    the lifecycle's launches for the hours they ran. ``before``: how many
    launch tallies the reactor held before these hours ran; a tally is keyed
    by its hour and first made while that hour runs, so the step's are the
    ones after it (a year's replay read every earlier one at every step)."""
    spot = Tier.SPOT.value

    def held_share(name: str, key: str, h: int) -> float:
        k = (h, name, key, spot)
        whole = reactor.plan_instances.get(k, 0)
        return reactor.plan_held.get(k, 0.0) / whole if whole else actuals.held(key, h)

    done, charges = _plan_rows(plan, step, actuals, offset, held_share)
    pools = snapshot.by_key()
    costs = reactor.costs
    for (h, name, key, tier_name), ih in itertools.islice(reactor.launched.items(), before, None):
        if not offset <= h < offset + step or ih <= 0:
            continue
        tier = Tier(tier_name)
        unit_usd = launch_usd(pools.get(key), actuals, key, h, tier)
        done[name] = done.get(name, 0.0) + ih * work_per_held_hour(costs, name, key, tier)
        charges.append((name, tier, h - offset, ih * unit_usd))
    return done, spent_by_key(plan.start, step, plan.committed_usd_per_hour(), charges)
