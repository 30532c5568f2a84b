"""The lifecycle's deadline tier rule on hand-made views: causal, Uniform
Progress's safety net, waits where spot is usually held, buys on-demand where
it is not, and one restart per outage at most."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from broker.lifecycle import (
    Decision,
    DecisionKind,
    LifecycleConfig,
    LifecycleManager,
    ReturnKind,
)
from broker.lifecycle.deadline import DeadlineTier, Prior, TierMemory
from markets.clock import ManualClock
from markets.cloud_fleet import Instance, InstanceState, Notice, NoticeKind
from markets.model import Tier
from policies.online.deadline import JobSpec, Mode, TickView
from policies.workloads.spec import parse_workloads
from tests.fakes.tiny_market import T0, TinyMarket, pool_key

JOB = JobSpec(compute_hours=1.0, deadline_hours=2.0, changeover_hours=0.2, tick_hours=0.1)
RULE = DeadlineTier()


def _seen(view: TickView, memory: TierMemory, job: JobSpec = JOB) -> tuple[Mode, TierMemory]:
    return RULE.decide(job, view, RULE.observe(memory, view.spot_available, job.tick_hours))


def test_the_rule_is_causal_and_keeps_the_safety_net() -> None:
    late_idle = TickView(1.5, 0.3, Mode.IDLE, True)
    mode, mem = _seen(late_idle, RULE.start(None))
    assert mode == Mode.ON_DEMAND and mem.committed
    # once committed, on-demand to the end, even with spot on offer
    assert _seen(TickView(1.6, 0.4, Mode.ON_DEMAND, True), mem)[0] == Mode.ON_DEMAND
    # the same inputs give the same answer whatever comes later
    early = TickView(0.0, 0.0, Mode.IDLE, True)
    assert _seen(early, RULE.start(None)) == _seen(early, RULE.start(None))


def test_the_rule_waits_for_spot_where_the_pool_is_usually_held() -> None:
    rich = Prior(held_share=0.95, losses_per_held_hour=8 / 160, hours=168.0)
    poor = Prior(held_share=0.2, losses_per_held_hour=60 / 34, hours=168.0)
    rich_mem = RULE.start(replace(rich, up_spells_hours=(20.0,) * 8))
    poor_mem = RULE.start(replace(poor, up_spells_hours=(0.5,) * 60))
    behind_up = TickView(0.6, 0.2, Mode.IDLE, False)  # cp 0.2 < ep(0.6) = 0.3
    assert _seen(behind_up, rich_mem)[0] == Mode.IDLE
    assert _seen(behind_up, poor_mem)[0] == Mode.ON_DEMAND


def test_on_demand_is_kept_through_an_outage_rather_than_restarted() -> None:
    # Behind Uniform Progress's line in an outage: on on-demand it stays
    # while behind the target at the outage's expected end.
    poor = RULE.start(Prior(held_share=0.2, losses_per_held_hour=2.0, hours=168.0))
    assert _seen(TickView(0.6, 0.31, Mode.ON_DEMAND, False), poor)[0] == Mode.ON_DEMAND


def test_where_outages_last_hours_on_demand_still_waits_for_the_lazy_reserve() -> None:
    # A 48 h job due in 60 h on a pool held 30 % of the time in 2 h spells
    # with 5 h outages. Ten hours in with 5 h done it is behind Uniform
    # Progress's line (8 h), but 50 h are left for 43 h of work: on-demand
    # waits until the slack is 2d + six outages of at most an hour
    # (LAZY_OUTAGE_CAP_HOURS). Six 5-hour outages (30 h of reserve) had it
    # follow the line from the start, finishing hours early with spot unused.
    job = JobSpec(compute_hours=48.0, deadline_hours=60.0, changeover_hours=0.2, tick_hours=1 / 6)
    scarce = Prior(
        held_share=0.3,
        losses_per_held_hour=0.5,
        hours=168.0,
        up_spells_hours=(2.0,) * 20,
        down_spells_hours=(5.0,) * 20,
    )
    mem = RULE.start(scarce)
    assert _seen(TickView(10.0, 5.0, Mode.IDLE, False), mem, job)[0] == Mode.IDLE
    # with less done the reserve is reached: on-demand now
    assert _seen(TickView(10.0, 4.0, Mode.IDLE, False), mem, job)[0] == Mode.ON_DEMAND


def test_spot_is_kept_while_held_even_when_behind() -> None:
    assert _seen(TickView(1.0, 0.2, Mode.SPOT, True), RULE.start(None))[0] == Mode.SPOT


def test_the_watch_counts_spells_whose_start_it_saw() -> None:
    mem = RULE.start(None)
    for avail in (True, True, False, False, False, True, False):
        mem = RULE.observe(mem, avail, 0.5)
    assert mem.spells.up == (0.5,)  # the first spell began before the watch
    assert mem.spells.down == (1.5,)
    assert mem.losses == 2 and mem.held_hours == 1.5 and mem.spells.seen_hours == 3.5


# --- in the manager: a rigid gang with a deadline and reported progress ---------------

A = pool_key("a")
ONE_JOB = parse_workloads(
    {
        "workloads": [
            {
                "name": "job",
                "class": "training",
                "instance_types": ["p3.2xlarge"],
                "throughput": {"p3.2xlarge": 1.0},
                "min_units": 1,
                "max_units": 1,
                "min_on_non_revocable": False,
                "restart_minutes": 10,
                "unit_hours": 10,
                "deadline_hours": 20,
            }
        ]
    }
)


def _revoked(done_unit_hours: float) -> tuple[LifecycleManager, ManualClock, Decision]:
    """The job's spot instance revoked at 5 h of 20 with no spot left in its pool."""
    clock = ManualClock(T0 + timedelta(hours=5))
    m = LifecycleManager(ONE_JOB, clock, LifecycleConfig(horizon_start=T0))
    m.report_progress("job", done_unit_hours)
    lost = Instance(
        instance_id="i-spot",
        pool_key=A,
        tier=Tier.SPOT,
        workload="job",
        state=InstanceState.RUNNING,
        units=1,
        launched_at=T0,
    )
    notice = Notice(
        notice_id="n-1",
        kind=NoticeKind.INTERRUPTION,
        instance_id="i-spot",
        at=clock.now(),
        pool_key=A,
    )
    return m, clock, m.handle(notice, (lost,), TinyMarket([A], share={A: 0.0}).snapshot())


def test_a_revoked_deadline_job_ahead_of_its_target_waits_for_spot() -> None:
    # 5 of 10 unit-hours done at 5 h of 20: ahead of Uniform Progress's 2.5.
    m, _, d = _revoked(5.0)
    assert d.kind is DecisionKind.CHECKPOINT_ONLY and d.launches == ()
    assert "the deadline rule waits" in d.reason
    assert m.break_glass_committed_usd == 0.0


def test_a_revoked_deadline_job_behind_breaks_glass_then_returns_to_spot_in_tick() -> None:
    m, clock, d = _revoked(0.0)  # nothing done at 5 h: behind the line
    assert d.kind is DecisionKind.BREAK_GLASS
    assert [(x.pool_key, x.tier, x.count) for x in d.launches] == [(A, Tier.ON_DEMAND, 1)]
    assert "the deadline rule: on-demand now" in d.reason
    clock.advance(600)
    od = Instance(
        instance_id="i-od",
        pool_key=A,
        tier=Tier.ON_DEMAND,
        workload="job",
        state=InstanceState.RUNNING,
        units=1,
        launched_at=clock.now(),
    )
    # still no spot: the stretch stays (nothing to do until it is due)
    assert m.tick(None, (od,), TinyMarket([A], share={A: 0.0}).snapshot()) == ()
    clock.advance(600)
    # spot is back in its pool (the breaker opened by the revocation is
    # still open, 20 min later: the rule's watch stands in for it here)
    (r,) = m.tick(None, (od,), TinyMarket([A]).snapshot())
    assert r.kind is ReturnKind.RETURN_TO_SPOT and r.allocation_id == "n-1"
    assert [(x.pool_key, x.tier, x.count) for x in r.launches] == [(A, Tier.SPOT, 1)]
    assert r.terminate_instance_ids == ("i-od",)
    assert m.break_glass_stretches() == {}
