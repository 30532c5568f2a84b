"""The simulated cloud sends rebalance recommendations from its stated model:
a share of revocations is preceded by one (minutes before the interruption
notice), and a share of all recommendations are false alarms."""

from __future__ import annotations

from datetime import timedelta

from markets.clock import ManualClock
from markets.cloud_fleet import LaunchRequest, Notice, NoticeKind
from markets.model import Tier
from markets.sim.cloud import SimCloud, SimOptions
from tests.fakes.tiny_market import T0, TinyMarket, pool_key

A = pool_key("a")
HOURS = 200


def _run(**opts: float) -> tuple[list[Notice], SimCloud]:
    # One revocation an hour in A, at minute 40, with 400 spot instances held there.
    events = [T0 + timedelta(hours=h, minutes=40) for h in range(1, HOURS)]
    clock = ManualClock(T0)
    cloud = SimCloud(TinyMarket(events={A: events}), clock, SimOptions(seed=3, **opts))  # type: ignore[arg-type]
    cloud.launch(
        LaunchRequest(
            idempotency_key="sf-rebalance-1",
            pool_key=A,
            tier=Tier.SPOT,
            workload="w",
            count=400,
            owner="me",
            plan_generation=1,
        )
    )
    seen: list[Notice] = []
    while clock.now() < T0 + timedelta(hours=HOURS):
        clock.advance(60)
        for n in cloud.poll_notices(10):
            seen.append(n)
            cloud.ack_notice(n)
    return seen, cloud


def test_no_recommendation_unless_the_model_is_on() -> None:
    seen, _ = _run()
    assert not [n for n in seen if n.kind is NoticeKind.REBALANCE]


def test_recommendations_follow_the_stated_shares_and_lead() -> None:
    seen, cloud = _run(rebalance_coverage=0.6, rebalance_precision=0.4, rebalance_lead_s=1200.0)
    revoked = {n.instance_id: n for n in seen if n.kind is NoticeKind.INTERRUPTION}
    recs = [n for n in seen if n.kind is NoticeKind.REBALANCE]
    assert len(revoked) == cloud.counters.revocations == HOURS - 1

    def lead_s(n: Notice) -> float | None:
        r = revoked.get(n.instance_id)
        return None if r is None else (r.at - n.at).total_seconds()

    # Followed by its instance's interruption notice within the lead (a false
    # alarm's instance may be revoked by chance, hours later).
    true = [n for n in recs if (x := lead_s(n)) is not None and 0.0 <= x <= 1200.0]
    # 199 revocations: 60 % preceded (sd ~3.5 %), 40 % of all recommendations true.
    assert 0.5 < len(true) / len(revoked) < 0.7
    assert 0.3 < len(true) / len(recs) < 0.5
    leads = [lead_s(n) or 0.0 for n in true]
    assert max(leads) > 600.0  # minutes ahead, not only with the notice


def test_a_relaunch_after_a_recommendation_is_a_replacement_not_a_duplicate() -> None:
    # One revocation at 01:40 whose recommendation comes up to 20 min before
    # its notice; the caller replaces on the recommendation, before the notice.
    # The listing lags past it all, so each launch sees the fleet as empty.
    revoke_at = T0 + timedelta(hours=1, minutes=40)
    clock = ManualClock(T0)
    options = SimOptions(
        seed=3,
        rebalance_coverage=1.0,
        rebalance_precision=1.0,
        rebalance_lead_s=1200.0,
        listing_lag_s=7200.0,
    )
    cloud = SimCloud(TinyMarket(events={A: [revoke_at]}), clock, options)

    def launch(key: str) -> None:
        cloud.launch(
            LaunchRequest(
                idempotency_key=key,
                pool_key=A,
                tier=Tier.SPOT,
                workload="w",
                count=2,
                owner="me",
                plan_generation=1,
            )
        )

    launch("sf-rebalance-10")
    clock.advance(600)
    launch("sf-rebalance-11")  # nothing heard between: a retry that lost its key
    assert cloud.counters.duplicate_launches == 1
    rec: list[Notice] = []
    while not rec:
        clock.advance(30)
        rec = [n for n in cloud.poll_notices(10) if n.kind is NoticeKind.REBALANCE]
    notice_at = revoke_at - timedelta(seconds=cloud.options.notice_seconds)
    assert clock.now() < notice_at  # heard before the interruption notice
    launch("sf-rebalance-12")
    assert cloud.counters.duplicate_launches == 1
    launch("sf-rebalance-13")  # and again, with nothing new heard: a duplicate
    assert cloud.counters.duplicate_launches == 2
