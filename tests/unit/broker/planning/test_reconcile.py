"""Plan versus fleet: rounding, requests, keys, ownership."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest

from broker.planning.plan import ALLOCATION_COLUMNS, Plan
from broker.planning.reconcile import (
    apply_deltas,
    desired_now,
    diff,
    launch_key,
    plan_hour,
    serving_spot_instances,
    surplus,
    warm_up_seconds,
    whole_gangs,
)
from markets.cloud_fleet import OWNER_TAG, Instance, InstanceState, LaunchRequest, TerminateRequest
from markets.model import Provider, Tier
from policies.workloads.spec import default_workloads

T0 = datetime(2026, 2, 1, tzinfo=UTC)
WS = default_workloads()  # chat-api serving, llm-finetune training, research-sweeps batch
P1 = "aws/us-east-1/us-east-1a/g5.xlarge"
P2 = "aws/us-east-1/us-east-1b/g5.xlarge"
P3 = "aws/us-east-1/us-east-1c/g5.xlarge"


def _plan(rows: list[tuple[int, str, str, str, float]], hours: int = 3) -> Plan:
    data = [
        {
            "period": h,
            "hour_start": h,
            "hour_end": h + 1,
            "workload": w,
            "tier": t,
            "pool_key": p,
            "instances": n,
            "units": n,
            "work_per_hour": n,
            "usd_per_instance_hour": 1.0,
        }
        for h, w, t, p, n in rows
    ]
    frame = pd.DataFrame(data, columns=ALLOCATION_COLUMNS)
    return Plan(T0, hours, 1, (), frame, 0.0, "test", "hand", 0.0, False)


def _inst(
    iid: str,
    pool: str,
    tier: Tier = Tier.SPOT,
    workload: str = "chat-api",
    owner: str = "me",
    minutes: int = 0,
) -> Instance:
    return Instance(
        instance_id=iid,
        pool_key=pool,
        tier=tier,
        workload=workload,
        state=InstanceState.RUNNING,
        units=1,
        launched_at=T0 + timedelta(minutes=minutes),
        tags={OWNER_TAG: owner},
    )


def test_serving_rounds_up_every_pool() -> None:
    plan = _plan([(0, "chat-api", "spot", P1, 2.01), (0, "chat-api", "on_demand", P2, 0.3)])
    assert desired_now(plan, T0, WS) == {
        ("chat-api", P1, "spot"): 3,
        ("chat-api", P2, "on_demand"): 1,
    }


def test_jobs_round_the_tier_total_by_largest_remainder() -> None:
    # Spot: 1.4 + 1.4 + 0.7 = 3.5 -> 4 (half up). Floors 1, 1, 0; the two
    # left go to the largest remainders: 0.7 (P3), then 0.4 (P1, listed
    # first). Rounding each pool alone would give 1 + 1 + 1 = 3. On-demand
    # 0.2 rounds to nothing.
    plan = _plan(
        [
            (0, "research-sweeps", "spot", P1, 1.4),
            (0, "research-sweeps", "spot", P2, 1.4),
            (0, "research-sweeps", "spot", P3, 0.7),
            (0, "research-sweeps", "on_demand", P1, 0.2),
        ]
    )
    assert desired_now(plan, T0, WS) == {
        ("research-sweeps", P1, "spot"): 2,
        ("research-sweeps", P2, "spot"): 1,
        ("research-sweeps", P3, "spot"): 1,
    }


def test_the_hour_in_force_is_read_and_clamped() -> None:
    plan = _plan([(0, "chat-api", "spot", P1, 1.0), (2, "chat-api", "spot", P1, 5.0)])
    assert plan_hour(plan, T0 + timedelta(minutes=59)) == 0
    assert desired_now(plan, T0 + timedelta(hours=1, minutes=5), WS) == {}
    assert desired_now(plan, T0 + timedelta(hours=7), WS) == {("chat-api", P1, "spot"): 5}


def test_diff_launches_the_gap_and_terminates_the_newest_surplus() -> None:
    fleet = [_inst("i-a", P1, minutes=0), _inst("i-b", P1, minutes=5), _inst("i-c", P2)]
    want = {("chat-api", P1, "spot"): 1, ("chat-api", P3, "spot"): 2}
    reqs = diff(want, fleet, 7, "me")
    launches = [r for r in reqs if isinstance(r, LaunchRequest)]
    terms = [r for r in reqs if isinstance(r, TerminateRequest)]
    assert [(r.pool_key, r.count, r.plan_generation) for r in launches] == [(P3, 2, 7)]
    assert sorted(r.instance_ids for r in terms) == [("i-b",), ("i-c",)]
    assert launches[0].idempotency_key == launch_key("me", 7, "chat-api", P3, "spot", 0)


def test_keys_are_the_same_for_the_same_state_and_differ_otherwise() -> None:
    want = {("chat-api", P1, "spot"): 3}
    one = diff(want, [_inst("i-a", P1)], 1, "me")
    again = diff(want, [_inst("i-a", P1)], 1, "me")
    grown = diff(want, [_inst("i-a", P1), _inst("i-b", P1)], 1, "me")
    next_gen = diff(want, [_inst("i-a", P1)], 2, "me")
    assert one == again
    keys = {one[0].idempotency_key, grown[0].idempotency_key, next_gen[0].idempotency_key}
    assert len(keys) == 3
    assert all(8 <= len(k) <= 64 for k in keys)


def test_instances_without_our_tag_are_never_counted_or_terminated() -> None:
    fleet = [_inst("i-theirs", P1, owner="someone-else"), _inst("i-mine", P1)]
    reqs = diff({}, fleet, 1, "me")
    assert [r.instance_ids for r in reqs if isinstance(r, TerminateRequest)] == [("i-mine",)]
    reqs = diff({("chat-api", P1, "spot"): 2}, fleet, 1, "me")
    assert [(r.pool_key, r.count) for r in reqs if isinstance(r, LaunchRequest)] == [(P1, 1)]


def test_doomed_instances_count_as_gone_and_are_left_alone() -> None:
    fleet = [_inst("i-a", P1), _inst("i-doomed", P1)]
    reqs = diff({("chat-api", P1, "spot"): 1}, fleet, 1, "me", doomed=frozenset({"i-doomed"}))
    assert reqs == []
    reqs = diff({}, fleet, 1, "me", doomed=frozenset({"i-doomed"}))
    assert [r.instance_ids for r in reqs if isinstance(r, TerminateRequest)] == [("i-a",)]


@pytest.mark.parametrize(
    ("deltas", "expected"),
    [
        pytest.param({("w", P1, "spot"): -1}, {("w", P1, "spot"): 1}, id="take-out"),
        pytest.param({("w", P1, "spot"): -5}, {}, id="never-below-zero"),
        pytest.param(
            {("w", P2, "on_demand"): 1}, {("w", P1, "spot"): 2, ("w", P2, "on_demand"): 1}, id="add"
        ),
    ],
)
def test_apply_deltas(
    deltas: dict[tuple[str, str, str], int], expected: dict[tuple[str, str, str], int]
) -> None:
    assert apply_deltas({("w", P1, "spot"): 2}, deltas) == expected


def test_a_ready_serving_replica_stays_until_its_replacement_is_ready() -> None:
    # the plan moves chat-api from on-demand in P1 to spot in P2: the two
    # ready on-demand replicas stay while the spot warms up (3 min), one per
    # warming replica; once the spot is ready the next diff ends them
    warm = warm_up_seconds(WS)
    assert warm == {"chat-api": 180.0}  # the serving class's replica warm-up
    od = [_inst("od-1", P1, Tier.ON_DEMAND), _inst("od-2", P1, Tier.ON_DEMAND)]
    want = {("chat-api", P2, "spot"): 2}
    now = T0 + timedelta(hours=1)
    first = diff(want, od, 2, "me", now=now, warm_s=warm)
    assert [type(r) for r in first] == [LaunchRequest]  # launch only, nobody ends
    spot = [_inst("s-1", P2, minutes=59), _inst("s-2", P2, minutes=59)]  # launched 1 min ago
    warming = diff(want, od + spot, 2, "me", now=now, warm_s=warm)
    assert warming == []
    one_ready = [_inst("s-1", P2, minutes=57), _inst("s-2", P2, minutes=59)]
    (half,) = diff(want, od + one_ready, 2, "me", now=now, warm_s=warm)
    assert isinstance(half, TerminateRequest) and len(half.instance_ids) == 1
    ready = [_inst("s-1", P2, minutes=56), _inst("s-2", P2, minutes=56)]
    (end,) = diff(want, od + ready, 2, "me", now=now, warm_s=warm)
    assert isinstance(end, TerminateRequest) and set(end.instance_ids) == {"od-1", "od-2"}
    # without warm-ups (or for a job) the move breaks at once
    assert any(isinstance(r, TerminateRequest) for r in diff(want, od + spot, 2, "me"))


def test_surplus_names_what_make_before_break_keeps_newest_first() -> None:
    # the plan moved chat-api to spot in P2 while two on-demand in P1 still
    # run (kept while the spot warms up): they are the surplus, newest first
    # as diff would end them; doomed and foreign instances are not counted
    want = {("chat-api", P2, "spot"): 2, ("chat-api", P1, "on_demand"): 1}
    fleet = [
        _inst("od-old", P1, Tier.ON_DEMAND),
        _inst("od-new", P1, Tier.ON_DEMAND, minutes=5),
        _inst("od-newer", P1, Tier.ON_DEMAND, minutes=9),
        _inst("s-1", P2, minutes=59),
        _inst("s-2", P2, minutes=59),
        _inst("s-3", P2, minutes=59),
        _inst("theirs", P1, Tier.ON_DEMAND, owner="other"),
    ]
    assert surplus(want, fleet, "me") == ("od-newer", "od-new", "s-3")
    assert surplus(want, fleet, "me", tier=Tier.ON_DEMAND) == ("od-newer", "od-new")
    assert surplus(want, fleet, "me", doomed=frozenset({"od-newer"})) == ("od-new", "s-3")


def test_make_before_break_ends_surplus_that_is_not_ready_first() -> None:
    # a scale-down while one replica warms up: the warming one goes (it
    # serves nobody) and the ready ones the plan keeps stay
    warm = warm_up_seconds(WS)
    now = T0 + timedelta(hours=1)
    fleet = [_inst("a", P1, minutes=50), _inst("b", P1, minutes=50), _inst("c", P1, minutes=59)]
    (req,) = diff({("chat-api", P1, "spot"): 2}, fleet, 2, "me", now=now, warm_s=warm)
    assert isinstance(req, TerminateRequest) and req.instance_ids == ("c",)


def test_a_plan_row_outside_the_workloads_allow_lists_is_never_launched_and_is_ended() -> None:
    # A plan made before chat-api was limited to GCP: the daemon launches
    # nothing in AWS for it and ends what runs there.
    limited = WS.model_copy(
        update={
            "workloads": [
                w.model_copy(update={"providers": [Provider.GCP]}) if w.name == "chat-api" else w
                for w in WS.workloads
            ]
        }
    )
    gcp = "gcp/us-central1/us-central1-a/g2-standard-4"
    plan = _plan([(0, "chat-api", "spot", P1, 2.0), (0, "chat-api", "spot", gcp, 1.0)])
    assert desired_now(plan, T0, WS) == {
        ("chat-api", P1, "spot"): 2,
        ("chat-api", gcp, "spot"): 1,
    }
    want = desired_now(plan, T0, limited)
    assert want == {("chat-api", gcp, "spot"): 1}
    requests = diff(want, [_inst("i-1", P1)], owner="me", generation=1)
    assert [r.pool_key for r in requests if isinstance(r, LaunchRequest)] == [gcp]
    assert [r.instance_ids for r in requests if isinstance(r, TerminateRequest)] == [("i-1",)]


def _serving_row(n: float, work: float) -> Plan:
    plan = _plan([(0, "chat-api", "spot", P1, n)])
    plan.allocations["work_per_hour"] = work
    return plan


def test_serving_spot_rounds_the_hazard_overhead_to_the_nearest_instance() -> None:
    # 4 replicas of work on a calm pool: the spot factor's 4.0001 instances
    # are 4, not 5 (ceil bought a whole replica for any hazard at all).
    assert desired_now(_serving_row(4.0001, 4.0), T0, WS) == {("chat-api", P1, "spot"): 4}
    # An overhead of 0.6 replica rounds to one more; the work's own fraction
    # (2.3 replicas of demand) still rounds up.
    assert desired_now(_serving_row(4.6, 4.0), T0, WS) == {("chat-api", P1, "spot"): 5}
    assert desired_now(_serving_row(2.31, 2.3), T0, WS) == {("chat-api", P1, "spot"): 3}


def test_serving_spot_without_its_work_rounds_up() -> None:
    plan = _plan([(0, "chat-api", "spot", P1, 4.0001)])
    plan = Plan(
        plan.start,
        plan.hours,
        plan.period_hours,
        (),
        plan.allocations.drop(columns=["units", "work_per_hour"]),
        0.0,
        "test",
        "hand",
        0.0,
        False,
    )
    assert desired_now(plan, T0, WS) == {("chat-api", P1, "spot"): 5}
    assert serving_spot_instances(4.0001, None) == 5


def test_a_gang_split_across_zones_by_slot_adjustments_takes_the_plans_counts_whole() -> None:
    """``stick`` kept the on-demand node in us-east-1a (same price there)
    while the plan moved the gang, spot and all, to us-east-1b: the gang
    would run across two zones. It takes the plan's whole move instead, and
    when the move is held back, it stays whole where it runs."""
    ws = default_workloads()
    a = "aws/us-east-1/us-east-1a/p4d.24xlarge"
    b = "aws/us-east-1/us-east-1b/p4d.24xlarge"
    chat = ("chat-api", "aws/us-east-1/us-east-1a/g5.xlarge", "spot")
    planned = {("llm-finetune", b, "on_demand"): 2, ("llm-finetune", b, "spot"): 3, chat: 4}
    split = {("llm-finetune", a, "on_demand"): 2, ("llm-finetune", b, "spot"): 3, chat: 4}
    assert whole_gangs(split, ws, planned) == planned
    running = {("llm-finetune", a, "on_demand"): 2.0, ("llm-finetune", a, "spot"): 3.0}
    assert whole_gangs(split, ws, running) == {
        ("llm-finetune", a, "on_demand"): 2,
        ("llm-finetune", a, "spot"): 3,
        chat: 4,
    }
    # one placement already: untouched; a region contract allows both zones
    assert whole_gangs(planned, ws, running) == planned
    region = ws.model_copy(
        update={
            "workloads": [
                w.model_copy(update={"placement": "region"}) if w.name == "llm-finetune" else w
                for w in ws.workloads
            ]
        }
    )
    assert whole_gangs(split, region, planned) == split
