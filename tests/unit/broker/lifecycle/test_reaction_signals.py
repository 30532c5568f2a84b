"""Signals read at reaction time: the failure domain that just revoked, and
the placement score now (per its TTL), each changing a replacement."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from broker.lifecycle import DecisionKind, LifecycleConfig, LifecycleManager
from markets.clock import ManualClock
from markets.errors import ThrottledError
from markets.model import FailureDomain, MarketSnapshot, Tier
from markets.ttl import SPOT_PLACEMENT_SCORE_TTL_S
from tests.unit.broker.lifecycle.test_manager import T0, inst, key, market, revoke, workloads

P4D = "p4d.24xlarge"


def _rigid_fleet() -> tuple[Any, ...]:
    return tuple(inst("rigid", key("us-east-1a", P4D), 8) for _ in range(2))


def _domain(*zones: str) -> FailureDomain:
    return FailureDomain(
        name=f"aws/{zones[0]}",
        zones=tuple(f"aws/{z}" for z in zones),
        co_share=0.3,
        baseline=0.03,
        events=40,
        window_s=600.0,
    )


class _Reader:
    """Placement scores as a cloud would answer now; ``fail`` raises throttling."""

    def __init__(self, scores: Mapping[str, int]) -> None:
        self.scores = dict(scores)
        self.calls = 0
        self.fail = False

    def placement_scores(self) -> Mapping[str, int]:
        self.calls += 1
        if self.fail:
            raise ThrottledError("GetSpotPlacementScores throttled")
        return self.scores


def _manager(reader: _Reader | None = None, **cfg: object) -> tuple[LifecycleManager, ManualClock]:
    clock = ManualClock(T0)
    config = LifecycleConfig.model_validate({"horizon_start": T0, **cfg})
    return LifecycleManager(workloads(), clock, config, placement=reader), clock


def test_without_domains_the_replacement_goes_to_the_next_cheapest_zone() -> None:
    m, clock = _manager()
    fleet = _rigid_fleet()
    d = m.handle(revoke(fleet[0], clock.now()), fleet, market())
    assert d.kind is DecisionKind.REPLACE
    assert d.launches[0].pool_key == key("us-east-1b", P4D)
    assert "failure domain" not in d.reason


def test_a_replacement_avoids_the_failure_domain_that_just_revoked() -> None:
    m, clock = _manager()
    fleet = _rigid_fleet()
    snap = market().model_copy(update={"failure_domains": (_domain("us-east-1a", "us-east-1b"),)})
    d = m.handle(revoke(fleet[0], clock.now()), fleet, snap)
    # 1b is cheaper than 1c but revokes with 1a: 1c it is, and the reason says why.
    assert d.kind is DecisionKind.REPLACE
    assert d.launches[0].pool_key == key("us-east-1c", P4D)
    assert "outside failure domain aws/us-east-1a+aws/us-east-1b" in d.reason


def test_a_domain_covering_every_zone_still_replaces_on_spot_and_says_so() -> None:
    m, clock = _manager()
    fleet = _rigid_fleet()
    every = _domain("us-east-1a", "us-east-1b", "us-east-1c")
    snap = market().model_copy(update={"failure_domains": (every,)})
    d = m.handle(revoke(fleet[0], clock.now()), fleet, snap)
    assert d.launches[0].pool_key == key("us-east-1b", P4D)
    assert d.launches[0].tier is Tier.SPOT
    assert "inside failure domain" in d.reason and "no pool outside it passes" in d.reason


def test_the_current_placement_score_moves_a_replacement_off_an_unlikely_pool() -> None:
    reader = _Reader({key("us-east-1b", P4D): 2, key("us-east-1c", P4D): 8})
    m, clock = _manager(reader)
    fleet = _rigid_fleet()
    clock.advance(1800)  # the snapshot in force is half an hour old
    d = m.handle(revoke(fleet[0], clock.now()), fleet, market())
    assert d.launches[0].pool_key == key("us-east-1c", P4D)
    assert "placement score 8/10 (live, 0 min old)" in d.reason
    assert reader.calls == 1


def test_without_a_reader_the_snapshot_score_is_used_and_its_age_said() -> None:
    m, clock = _manager()
    fleet = _rigid_fleet()
    scores = {key("us-east-1b", P4D): 2, key("us-east-1c", P4D): 6}
    scored = [
        p.model_copy(update={"placement_score": scores[p.pool.key]}) if p.pool.key in scores else p
        for p in market().pools
    ]
    clock.advance(600)
    d = m.handle(revoke(fleet[0], clock.now()), fleet, MarketSnapshot(at=T0, pools=tuple(scored)))
    assert d.launches[0].pool_key == key("us-east-1c", P4D)
    assert "placement score 6/10 (snapshot, 10 min old)" in d.reason


def test_scores_are_read_once_per_ttl_and_kept_when_a_read_is_throttled() -> None:
    reader = _Reader({key("us-east-1b", P4D): 9, key("us-east-1c", P4D): 9})
    m, clock = _manager(reader, churn_max_share=1.0)  # three replacements: not this test
    fleet = tuple(inst("rigid", key("us-east-1a", P4D), 8) for _ in range(4))
    snap = market()
    m.handle(revoke(fleet[0], clock.now()), fleet, snap)
    clock.advance(SPOT_PLACEMENT_SCORE_TTL_S - 1)
    m.handle(revoke(fleet[1], clock.now()), fleet, snap)
    assert reader.calls == 1  # inside the TTL: the reading in force
    clock.advance(1)
    reader.fail = True
    reader.scores = {}
    d = m.handle(revoke(fleet[2], clock.now()), fleet, snap)
    assert reader.calls == 2
    # The throttled read kept the last good reading, now a TTL old.
    assert f"(live, {SPOT_PLACEMENT_SCORE_TTL_S / 60:.0f} min old)" in d.reason


def test_an_out_of_capacity_fallback_ranks_with_the_current_score() -> None:
    reader = _Reader({key("us-east-1b", P4D): 1, key("us-east-1c", P4D): 7})
    m, clock = _manager(reader)
    m.on_market(market())
    failed = key("us-east-1a", P4D)
    m.record_launch_failure(failed, Tier.SPOT)
    assert m.instead("rigid", failed, Tier.SPOT, 1, {failed}, clock.now()) == (
        key("us-east-1c", P4D),
        1,
    )
    plain, clock2 = _manager()
    plain.on_market(market())
    assert plain.instead("rigid", failed, Tier.SPOT, 1, {failed}, clock2.now()) == (
        key("us-east-1b", P4D),
        1,
    )


def test_an_out_of_capacity_fallback_tries_the_refusing_pools_domain_last() -> None:
    m, clock = _manager()
    snap = market().model_copy(update={"failure_domains": (_domain("us-east-1a", "us-east-1b"),)})
    m.on_market(snap)
    failed = key("us-east-1a", P4D)
    assert m.instead("rigid", failed, Tier.SPOT, 1, {failed}, clock.now()) == (
        key("us-east-1c", P4D),
        1,
    )
    # the domain's pools are still there when nothing outside it is left
    tried = {failed, key("us-east-1c", P4D)}
    assert m.instead("rigid", failed, Tier.SPOT, 1, tried, clock.now()) == (
        key("us-east-1b", P4D),
        1,
    )
