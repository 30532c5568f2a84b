"""The lifecycle looks ahead to account quotas: a replacement, a break-glass
launch and the daemon's substitution skip a pool whose quota has no room for
the instances, rather than learning it from a refused launch; the live fleet
and the launches decided but not yet seen take their share."""

from __future__ import annotations

from broker.lifecycle import DecisionKind
from broker.lifecycle.headroom import QuotaRoom
from markets.cloud_fleet import Instance
from markets.model import MarketSnapshot, Provider, Quota, QuotaUnit, Tier
from policies.workloads.spec import WorkloadSet
from tests.unit.broker.lifecycle.test_manager import (
    inst,
    key,
    manager,
    market,
    revoke,
    workloads,
)

P3A, P3B = key("us-east-1a", "p3.2xlarge"), key("us-east-1b", "p3.2xlarge")


def _with(*quotas: Quota) -> MarketSnapshot:
    return market().model_copy(update={"quotas": quotas})


def _p_spot(limit: float) -> Quota:
    # the hand-built p3.2xlarge has 12 vCPUs
    return Quota(
        provider=Provider.AWS,
        region="us-east-1",
        group="P",
        tier=Tier.SPOT,
        limit=limit,
        unit=QuotaUnit.VCPUS,
        code="L-7212CCBC",
    )


def _fleet() -> tuple[Instance, ...]:
    return (inst("sweeps", P3A, 1), inst("sweeps", P3B, 1))


def _fast_g5() -> WorkloadSet:
    # g5.12xlarge: $1.02 per work-hour effective on spot, just after p3 at $1.01
    return workloads(sweeps={"throughput": {"p3.2xlarge": 1.0, "g5.12xlarge": 0.47}})


def test_replacement_keeps_to_the_type_when_the_quota_has_room() -> None:
    m, clock = manager()
    fleet = _fleet()
    # 24 vCPUs: the other p3 (12) and the replacement (12); the revoked one
    # is not counted twice
    d = m.handle(revoke(fleet[0], clock.now()), fleet, _with(_p_spot(24)))
    assert d.kind is DecisionKind.REPLACE, d.reason
    assert d.launches[0].pool_key.endswith("p3.2xlarge")


def test_no_room_anywhere_waits_and_says_why() -> None:
    m, clock = manager()
    fleet = _fleet()
    d = m.handle(revoke(fleet[0], clock.now()), fleet, _with(_p_spot(12)))
    assert d.kind is not DecisionKind.REPLACE and d.launches == ()
    assert "over quota" in d.reason  # no launch the account would refuse


def test_replacement_skips_a_pool_over_quota() -> None:
    m, clock = manager(_fast_g5())
    fleet = _fleet()
    d = m.handle(revoke(fleet[0], clock.now()), fleet, _with(_p_spot(12)))
    assert d.kind is DecisionKind.REPLACE, d.reason
    (launch,) = d.launches
    assert launch.pool_key.endswith("g5.12xlarge") and launch.tier is Tier.SPOT
    # without the quota, the same revocation replaces on p3
    m2, clock2 = manager(_fast_g5())
    d2 = m2.handle(revoke(fleet[0], clock2.now()), fleet, market())
    assert d2.launches[0].pool_key.endswith("p3.2xlarge")


def test_decided_launches_take_their_share() -> None:
    snap = _with(_p_spot(36))
    room = QuotaRoom(snap, _fleet(), [(key("us-east-1c", "p3.2xlarge"), Tier.SPOT, 1)])
    assert room.left("aws/us-east-1/P/spot") == 0.0  # 2 live + 1 decided, 12 vCPUs each
    assert not room.fits(P3A, Tier.SPOT, 1)
    assert room.fits(P3A, Tier.ON_DEMAND, 5)  # the spot limit does not count on-demand
    assert room.fits(key("us-east-1a", "g5.12xlarge"), Tier.SPOT, 3)  # group G, not P
    assert QuotaRoom(snap, _fleet()).fits(P3A, Tier.SPOT, 1)
    assert not QuotaRoom(snap, _fleet()).fits(P3A, Tier.SPOT, 2)


def test_substitution_skips_a_pool_over_quota() -> None:
    m, _clock = manager(_fast_g5())
    m.on_market(_with(_p_spot(0)))
    got = m.instead("sweeps", P3A, Tier.SPOT, 1, {P3A})
    assert got is not None and got[0].endswith("g5.12xlarge")
    m.on_market(market())
    got = m.instead("sweeps", P3A, Tier.SPOT, 1, {P3A})
    assert got is not None and got[0].endswith("p3.2xlarge")
