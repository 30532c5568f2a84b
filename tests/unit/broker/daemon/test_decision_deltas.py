"""How the lifecycle's decisions since the plan adjust its counts
(``broker.daemon.book.decision_deltas``)."""

from __future__ import annotations

from datetime import UTC, datetime

from broker.daemon.book import decision_deltas
from broker.daemon.store.notices import DecisionRecord
from broker.daemon.store.tx import Json
from broker.planning.reconcile import apply_deltas

T0 = datetime(2026, 2, 1, tzinfo=UTC)
A_SPOT = ("w", "aws/us-west-2/us-west-2a/p3.2xlarge", "spot")
B_OD = ("w", "aws/us-west-2/us-west-2b/p3.2xlarge", "on_demand")


def _return_to_spot(count: int) -> DecisionRecord:
    """A break-glass stretch of ``count`` on-demand in B returned to spot in A."""
    payload: Json = {
        "kind": "return_to_spot",
        "launches": [{"pool_key": A_SPOT[1], "tier": "spot", "count": count}],
        "ended_slots": [list(B_OD)] * count,
    }
    return DecisionRecord(None, "return_to_spot", "w", "calm", 0.0, 0.0, payload, T0)


def _break_glass(count: int) -> list[DecisionRecord]:
    """``count`` notices on A's spot, each answered with on-demand in B."""
    payload: Json = {
        "kind": "break_glass",
        "launches": [{"pool_key": B_OD[1], "tier": "on_demand", "count": 1}],
        "lost_slot": list(A_SPOT),
        "lost_count": 1,
        "taken_out": True,
    }
    return [
        DecisionRecord(f"n{i}", "break_glass", "w", "", 0.0, 0.0, payload, T0) for i in range(count)
    ]


def test_a_return_of_on_demand_the_plan_no_longer_holds_launches_nothing() -> None:
    # The re-plan already put the 8 back on spot in A; the stretch's 8
    # on-demand it opened under the plan before are not in this plan's counts.
    planned = {A_SPOT: 8}
    deltas = decision_deltas([_return_to_spot(8)], planned)
    assert apply_deltas(planned, deltas) == {A_SPOT: 8}  # not 16


def test_a_return_within_the_plan_moves_its_on_demand_back_to_spot() -> None:
    planned = {A_SPOT: 8}
    decisions = [*_break_glass(8), _return_to_spot(8)]
    assert apply_deltas(planned, decision_deltas(decisions, planned)) == {A_SPOT: 8}
    # Half of it still held by the plan's counts: half the return.
    assert apply_deltas({B_OD: 4}, decision_deltas([_return_to_spot(8)], {B_OD: 4})) == {A_SPOT: 4}


def test_without_the_plan_the_deltas_are_summed() -> None:
    assert decision_deltas([_return_to_spot(8)]) == {A_SPOT: 8, B_OD: -8}


def test_break_glass_onto_on_demand_a_return_ended_gives_its_count_back() -> None:
    # A return moved the 8 on-demand to spot in A; the spot is revoked before
    # it is ready, and each notice takes back one on-demand the return ended
    # (still running: make before break) instead of launching one.
    planned = {A_SPOT: 8}
    kept: Json = {
        "kind": "break_glass",
        "launches": [],
        "kept": [{"pool_key": B_OD[1], "tier": "on_demand", "count": 1}],
        "lost_slot": list(A_SPOT),
        "lost_count": 1,
        "taken_out": True,
    }
    took_back = [
        DecisionRecord(f"k{i}", "break_glass", "w", "", 0.0, 0.0, kept, T0) for i in range(8)
    ]
    decisions = [*_break_glass(8), _return_to_spot(8), *took_back]
    # the 8 on-demand stay (reconcile ends none), no spot is wanted in A
    assert apply_deltas(planned, decision_deltas(decisions, planned)) == {B_OD: 8}
