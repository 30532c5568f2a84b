"""The simulated cloud: idempotency, revocations with notices, queue semantics,
faults, and the duplicate/orphan/cost accounting the daemon is judged by."""

from __future__ import annotations

from datetime import timedelta

import pytest

from markets.clock import ManualClock
from markets.cloud_fleet import (
    OWNER_TAG,
    ErrorKind,
    InstanceState,
    LaunchRequest,
    NoticeKind,
    TerminateRequest,
)
from markets.errors import CapacityUnavailableError, ThrottledError
from markets.model import Tier
from markets.sim.cloud import SimCloud, SimOptions
from tests.fakes.tiny_market import ON_DEMAND_USD, SPOT_USD, T0, TinyMarket, pool_key

A, B = pool_key("a"), pool_key("b")


def _launch(
    key: str, pool: str = A, tier: Tier = Tier.SPOT, count: int = 1, gen: int = 1, owner: str = "me"
) -> LaunchRequest:
    return LaunchRequest(
        idempotency_key=key,
        pool_key=pool,
        tier=tier,
        workload="w",
        count=count,
        owner=owner,
        plan_generation=gen,
    )


def _cloud(market: TinyMarket | None = None, **opts: object) -> tuple[SimCloud, ManualClock]:
    clock = ManualClock(T0)
    return SimCloud(market or TinyMarket(), clock, SimOptions(**opts)), clock  # type: ignore[arg-type]


def test_the_same_key_returns_the_same_instances() -> None:
    cloud, _ = _cloud()
    first = cloud.launch(_launch("sf-key-0001", count=2))
    again = cloud.launch(_launch("sf-key-0001", count=2))
    assert first.ok and not first.replayed and len(first.instance_ids) == 2
    assert again.replayed and again.instance_ids == first.instance_ids
    assert len(cloud.list_fleet("me")) == 2
    assert cloud.counters.launches == 1 and cloud.counters.replays == 1
    other = cloud.launch(_launch("sf-key-0001", count=3))
    assert not other.ok and other.error_kind == "input"
    assert len(cloud.list_fleet("me")) == 2


def test_terminate_refuses_what_is_not_ours_and_replays_by_key() -> None:
    cloud, _ = _cloud()
    ids = cloud.launch(_launch("sf-key-0002", owner="them")).instance_ids
    res = cloud.terminate(
        TerminateRequest(idempotency_key="sf-term-0001", instance_ids=ids, owner="me")
    )
    assert not res.ok and res.error_kind is ErrorKind.INPUT and res.instance_ids == ()
    assert ids[0] in (res.error or "")
    assert len(cloud.list_fleet("them")) == 1
    req = TerminateRequest(idempotency_key="sf-term-0002", instance_ids=ids, owner="them")
    assert cloud.terminate(req).instance_ids == ids
    assert cloud.terminate(req).replayed
    assert cloud.list_fleet("them") == []


def test_a_partly_foreign_terminate_ends_ours_and_refuses_the_rest_as_aws_does() -> None:
    cloud, _ = _cloud()
    ours = cloud.launch(_launch("sf-key-0020", count=2)).instance_ids
    theirs = cloud.launch(_launch("sf-key-0021", owner="them")).instance_ids
    never = "i-sim-never-launched"
    req = TerminateRequest(
        idempotency_key="sf-term-0010", instance_ids=(*ours, *theirs, never), owner="me"
    )
    res = cloud.terminate(req)
    assert not res.ok and res.error_kind is ErrorKind.INPUT
    assert res.instance_ids == (*ours, never)  # an id the account never had counts as ended
    assert theirs[0] in (res.error or "") and ours[0] not in (res.error or "")
    assert cloud.list_fleet("me") == [] and len(cloud.list_fleet("them")) == 1
    assert cloud.counters.terminations == 2
    again = cloud.terminate(req)  # not remembered: judged (and refused) again
    assert not again.ok and not again.replayed and again.instance_ids == res.instance_ids
    assert cloud.counters.terminations == 2


def test_a_revocation_is_noticed_two_minutes_ahead_then_takes_the_instance() -> None:
    at = T0 + timedelta(minutes=10)
    cloud, clock = _cloud(TinyMarket(events={A: [at]}))
    (iid,) = cloud.launch(_launch("sf-key-0003")).instance_ids
    clock.set(at - timedelta(seconds=121))
    assert cloud.poll_notices() == []
    assert cloud.next_event_at() == at - timedelta(seconds=120)
    clock.set(at - timedelta(seconds=120))
    (n,) = cloud.poll_notices()
    assert (n.kind, n.instance_id, n.deadline, n.pool_key) == (NoticeKind.INTERRUPTION, iid, at, A)
    assert [i.instance_id for i in cloud.list_fleet("me")] == [iid]
    cloud.ack_notice(n)
    clock.set(at)
    assert cloud.list_fleet("me") == []
    (gone,) = cloud.poll_notices()
    assert gone.kind is NoticeKind.STATE_CHANGE and gone.state is InstanceState.TERMINATED
    assert cloud.counters.revocations == 1


def test_events_in_pools_we_do_not_hold_take_nothing() -> None:
    at = T0 + timedelta(minutes=10)
    cloud, clock = _cloud(TinyMarket(events={B: [at]}))
    cloud.launch(_launch("sf-key-0004", pool=A))
    cloud.launch(_launch("sf-key-0005", pool=B, tier=Tier.ON_DEMAND))
    clock.set(at + timedelta(minutes=1))
    assert cloud.poll_notices() == [] and cloud.counters.revocations == 0


def test_notices_are_at_least_once_and_come_back_until_acknowledged() -> None:
    events = [T0 + timedelta(minutes=5 + i) for i in range(3)]
    cloud, clock = _cloud(
        TinyMarket(events={A: events}), duplicate_rate=1.0, reorder=True, state_change_notices=False
    )
    cloud.launch(_launch("sf-key-0006", count=3))
    clock.set(T0 + timedelta(minutes=30))
    seen = list(cloud.poll_notices(max_notices=10))
    assert len(seen) == 6 and len({n.notice_id for n in seen}) == 3
    assert len({n.receipt for n in seen}) == 6
    for n in seen[:2]:
        cloud.ack_notice(n)
    assert cloud.poll_notices() == []  # in flight: invisible for the timeout
    clock.advance(31)
    assert len(cloud.poll_notices()) == 4
    acked = {n.notice_id for n in seen[:2]}
    assert cloud.unacked() == 3 - len(acked)


def test_spot_is_granted_by_the_hours_available_share() -> None:
    cloud, _ = _cloud(TinyMarket(share={A: 0.0}))
    with pytest.raises(CapacityUnavailableError) as e:
        cloud.launch(_launch("sf-key-0007", pool=A))
    assert e.value.pool_key == A
    assert cloud.launch(_launch("sf-key-0008", pool=A, tier=Tier.ON_DEMAND)).ok
    assert cloud.launch(_launch("sf-key-0009", pool=B)).ok
    assert cloud.counters.capacity_refusals == 1


def test_injected_faults_and_exhausted_pools() -> None:
    cloud, clock = _cloud()
    cloud.inject("launch", ThrottledError("slow down"), times=2)
    for _ in range(2):
        with pytest.raises(ThrottledError):
            cloud.launch(_launch("sf-key-0010"))
    assert cloud.launch(_launch("sf-key-0010")).ok
    cloud.exhaust(B, until=T0 + timedelta(minutes=5))
    with pytest.raises(CapacityUnavailableError):
        cloud.launch(_launch("sf-key-0011", pool=B, tier=Tier.ON_DEMAND))
    clock.advance(300)
    assert cloud.launch(_launch("sf-key-0011", pool=B, tier=Tier.ON_DEMAND)).ok
    assert cloud.counters.throttled == 2


def test_a_retry_without_its_key_is_counted_as_a_duplicate_launch() -> None:
    # EC2's listing lags: a client that lost its key sees the same fleet and
    # launches the same thing again.
    cloud, clock = _cloud(listing_lag_s=60.0)
    cloud.launch(_launch("sf-key-0012", count=2))
    clock.advance(10)
    cloud.launch(_launch("sf-key-0013", count=2))
    assert cloud.counters.duplicate_launches == 1
    # the same intent after the first launch's instances were lost is a replacement
    cloud2, _ = _cloud()
    ids = cloud2.launch(_launch("sf-key-0014")).instance_ids
    cloud2.terminate(TerminateRequest(idempotency_key="sf-term-0003", instance_ids=ids, owner="me"))
    cloud2.launch(_launch("sf-key-0015"))
    assert cloud2.counters.duplicate_launches == 0


def test_two_replacements_of_two_losses_into_one_pool_are_not_a_duplicate() -> None:
    # Two notices in a row, each about its own instance, each replaced by one
    # instance of the same pool before any re-plan: same shape, own keys.
    cloud, clock = _cloud(listing_lag_s=60.0)
    held = cloud.launch(_launch("sf-key-0020", pool=B, count=2)).instance_ids
    clock.advance(600)
    cloud.revoke(held[0], T0 + timedelta(seconds=720))  # its notice: now
    clock.advance(5)
    cloud.launch(_launch("sf-key-0021"))  # the replacement of held[0]
    clock.advance(5)
    cloud.revoke(held[1], T0 + timedelta(seconds=730))
    clock.advance(5)
    cloud.launch(_launch("sf-key-0022"))  # the replacement of held[1]
    assert cloud.counters.duplicate_launches == 0
    # the same second launch with no loss heard in between is still one
    clock.advance(5)
    cloud.launch(_launch("sf-key-0023"))
    assert cloud.counters.duplicate_launches == 1


def test_orphans_are_live_instances_the_caller_does_not_know() -> None:
    cloud, _ = _cloud()
    a = cloud.launch(_launch("sf-key-0016")).instance_ids
    b = cloud.launch(_launch("sf-key-0017", pool=B)).instance_ids
    assert cloud.orphaned(set(a)) == list(b)
    assert cloud.orphaned(set(a) | set(b)) == []
    assert all(i.tags[OWNER_TAG] == "me" for i in cloud.alive())


def test_billing_is_per_second_at_the_tiers_price() -> None:
    cloud, clock = _cloud(TinyMarket(spot_usd={A: 0.5}))
    cloud.launch(_launch("sf-key-0018", pool=B, tier=Tier.ON_DEMAND))
    clock.advance(timedelta(minutes=30))
    cloud.launch(_launch("sf-key-0019", pool=A))
    clock.advance(timedelta(minutes=60))
    hourly, by_tier = cloud.hourly_cost_usd(T0, 3)
    # on-demand 1.5 h at $3; spot 1 h at $0.50, half in each hour
    assert hourly.tolist() == pytest.approx([ON_DEMAND_USD + 0.25, ON_DEMAND_USD / 2 + 0.25, 0.0])
    assert by_tier == pytest.approx({"committed": 0.0, "on_demand": 4.5, "spot": 0.5})
    assert cloud.cost_rate_usd_per_hour() == pytest.approx(
        {"committed": 0.0, "on_demand": ON_DEMAND_USD, "spot": 0.5}
    )
    assert SPOT_USD != 0.5  # the pool's own price was used
