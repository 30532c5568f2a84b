"""The lifecycle's deadline tier rule on hand-made views: causal, Uniform
Progress's safety net, waits where spot is usually held, buys on-demand where
it is not, and one restart per outage at most."""

from __future__ import annotations

from dataclasses import replace

from broker.lifecycle.deadline import DeadlineTier, Prior, TierMemory
from policies.online.deadline import JobSpec, Mode, TickView

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


def test_spot_is_kept_while_held_even_when_behind() -> None:
    assert _seen(TickView(1.0, 0.2, Mode.SPOT, True), RULE.start(None))[0] == Mode.SPOT


def test_the_watch_counts_spells_whose_start_it_saw() -> None:
    mem = RULE.start(None)
    for avail in (True, True, False, False, False, True, False):
        mem = RULE.observe(mem, avail, 0.5)
    assert mem.up == (0.5,)  # the first spell began before the watch
    assert mem.down == (1.5,)
    assert mem.losses == 2 and mem.held_hours == 1.5 and mem.seen_hours == 3.5
