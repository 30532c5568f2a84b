"""The lifecycle manager: each rule with a hand-built market and fleet, the
breakers, hysteresis, duplicates, the caps over long random runs, and a storm."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.lifecycle import (
    Decision,
    DecisionKind,
    LaunchIntent,
    LifecycleConfig,
    LifecycleManager,
    ReturnKind,
    SpotReturn,
)
from markets.clock import ManualClock
from markets.cloud_fleet import Instance, InstanceState, Notice, NoticeKind
from markets.model import (
    Hazard,
    HazardSource,
    InstanceType,
    MarketSnapshot,
    Pool,
    PoolSnapshot,
    Provider,
    Tier,
)
from markets.ttl import UNAVAILABLE_OFFERING_TTL_S
from policies.cost_table import CostTable
from policies.workloads.spec import WorkloadSet, parse_workloads

T0 = datetime(2026, 3, 1, tzinfo=UTC)
P4D_OD = 32.77
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")

# --- a hand-built market ---------------------------------------------------------


def _itype(provider: Provider, name: str, units: int) -> InstanceType:
    return InstanceType(
        provider=provider,
        name=name,
        family=name.split(".")[0].split("-")[0],
        units=units,
        gpus=units,
        vcpus=12 * units,
        memory_gib=96.0 * units,
    )


def _pool(
    zone: str,
    name: str,
    units: int,
    od: float,
    spot: float | None,
    hazard: float = 0.01,
    provider: Provider = Provider.AWS,
) -> PoolSnapshot:
    region = zone[:-1]
    return PoolSnapshot(
        pool=Pool(provider=provider, region=region, zone=zone, instance_type=name),
        instance=_itype(provider, name, units),
        on_demand_usd_per_hour=od,
        spot_usd_per_hour=spot,
        hazard=Hazard(rate_per_hour=hazard, source=HazardSource.OBSERVED),
        observed_at=T0,
    )


def key(zone: str, name: str, provider: str = "aws") -> str:
    return f"{provider}/{zone[:-1]}/{zone}/{name}"


def market(*extra: PoolSnapshot, drop: Iterable[str] = ()) -> MarketSnapshot:
    pools = [
        # p4d: zone a cheapest on spot, zone c the calmest.
        _pool("us-east-1a", "p4d.24xlarge", 8, P4D_OD, 9.8, 0.02),
        _pool("us-east-1b", "p4d.24xlarge", 8, P4D_OD, 10.5, 0.01),
        _pool("us-east-1c", "p4d.24xlarge", 8, P4D_OD, 11.0, 0.005),
        _pool("us-east-1a", "g5.12xlarge", 4, 5.672, 1.9),
        _pool("us-east-1b", "g5.12xlarge", 4, 5.672, 2.0),
        _pool("us-east-1c", "g5.12xlarge", 4, 5.672, 2.1),
        _pool("us-east-1a", "p3.2xlarge", 1, 3.06, 0.95),
        _pool("us-east-1b", "p3.2xlarge", 1, 3.06, 0.92),
        _pool("us-east-1c", "p3.2xlarge", 1, 3.06, 1.0),
        _pool("us-central1-a", "a2-highgpu-8g", 8, 29.39, 8.8, 0.02, Provider.GCP),
        *extra,
    ]
    gone = set(drop)
    return MarketSnapshot(at=T0, pools=tuple(p for p in pools if p.pool.key not in gone))


def workloads(cap: float | None = 5000.0, **overrides: dict[str, object]) -> WorkloadSet:
    specs: dict[str, dict[str, object]] = {
        "chat": {
            "class": "serving",
            "instance_types": ["g5.12xlarge"],
            "demand": {"base_units": 8, "peak_units": 16},
        },
        "ft": {
            "class": "training",
            "instance_types": ["p4d.24xlarge", "a2-highgpu-8g"],
            "elastic": True,
            "min_units": 16,
            "step_units": 8,
            "max_units": 64,
            "unit_hours": 10000,
            "deadline_hours": 480,
            # These gangs are spread over zones to exercise the rules below;
            # the zone contract has its own tests (``placement``).
            "placement": "any",
        },
        "rigid": {
            "class": "training",
            "instance_types": ["p4d.24xlarge"],
            "min_units": 16,
            "unit_hours": 1000,
            "deadline_hours": 480,
            "placement": "any",
        },
        "sweeps": {
            "class": "batch",
            "instance_types": ["p3.2xlarge", "g5.12xlarge"],
            "throughput": {"p3.2xlarge": 1.0, "g5.12xlarge": 0.3},
            "unit_hours": 6000,  # no deadline: restart-tolerant, waits when dear
            "max_units": 64,
        },
    }
    for name, extra in overrides.items():
        specs[name] = {**specs[name], **extra}
    data: dict[str, object] = {"workloads": [{"name": n, **s} for n, s in specs.items()]}
    if cap is not None:
        data["break_glass_cap_usd"] = cap
    return parse_workloads(data)


# --- fleets and notices ------------------------------------------------------------

_ids = itertools.count()


def inst(
    workload: str,
    pool_key: str,
    units: int,
    tier: Tier = Tier.SPOT,
    at: datetime = T0,
    iid: str | None = None,
) -> Instance:
    return Instance(
        instance_id=iid or f"i-{next(_ids):05d}",
        pool_key=pool_key,
        tier=tier,
        workload=workload,
        state=InstanceState.RUNNING,
        units=units,
        launched_at=at,
    )


def revoke(
    i: Instance,
    at: datetime,
    nid: str | None = None,
    kind: NoticeKind = NoticeKind.INTERRUPTION,
    window_s: float | None = 120.0,
) -> Notice:
    return Notice(
        notice_id=nid or f"n-{i.instance_id}-{kind.value}",
        kind=kind,
        instance_id=i.instance_id,
        at=at,
        deadline=None if window_s is None else at + timedelta(seconds=window_s),
        pool_key=i.pool_key,
    )


def manager(
    ws: WorkloadSet | None = None, clock: ManualClock | None = None, **cfg: object
) -> tuple[LifecycleManager, ManualClock]:
    clock = clock or ManualClock(T0)
    config = LifecycleConfig.model_validate({"horizon_start": T0, **cfg})
    return LifecycleManager(ws or workloads(), clock, config), clock


def ft_fleet() -> tuple[Instance, ...]:
    """ft: 2 on-demand p4d (the gang minimum) + 4 spot p4d over three zones = 48 units."""
    base = [inst("ft", key("us-east-1a", "p4d.24xlarge"), 8, Tier.ON_DEMAND) for _ in range(2)]
    spot = [inst("ft", key(z, "p4d.24xlarge"), 8) for z in (*ZONES, "us-east-1c")]
    return (*base, *spot)


def spot_of(fleet: tuple[Instance, ...], zone: str | None = None) -> list[Instance]:
    return [i for i in fleet if i.tier is Tier.SPOT and (zone is None or f"/{zone}/" in i.pool_key)]


# --- elastic shrink ----------------------------------------------------------------


def test_elastic_job_shrinks_in_whole_steps_without_launching() -> None:
    m, clock = manager()
    fleet = ft_fleet()
    d = m.handle(revoke(spot_of(fleet)[0], clock.now()), fleet, market())
    assert d.kind is DecisionKind.SHRINK
    assert d.new_size == 40  # 48 - 8, an allowed size (16..64 by 8)
    assert d.launches == ()
    assert d.lost_units == 8
    assert d.workload == "ft"
    record = json.loads(json.dumps(d.as_record()))
    assert record["kind"] == "shrink" and record["new_size"] == 40
    assert record["checkpoint"]["window_s"] == 120.0


def test_shrink_rounds_down_to_an_allowed_step() -> None:
    ws = workloads(ft={"instance_types": ["p4d.24xlarge", "g5.12xlarge"]})
    m, clock = manager(ws)
    fleet = (*ft_fleet(), inst("ft", key("us-east-1b", "g5.12xlarge"), 4))  # 52 units
    d = m.handle(revoke(fleet[2], clock.now()), fleet, market())  # lose 8 -> 44
    assert d.kind is DecisionKind.SHRINK
    assert d.new_size == 40
    assert "releasing 4 more" in d.reason


def test_no_shrink_below_min_units_replaces_instead() -> None:
    # 5,000 unit-hours: 16 units finish in 313 h of the 480 (at 10,000 they could
    # not, and the deadline would call for break-glass instead).
    m, clock = manager(workloads(ft={"unit_hours": 5000}))
    fleet = (
        inst("ft", key("us-east-1a", "p4d.24xlarge"), 8),
        inst("ft", key("us-east-1b", "p4d.24xlarge"), 8),
    )
    d = m.handle(revoke(fleet[0], clock.now()), fleet, market())
    assert d.kind is DecisionKind.REPLACE
    assert "below min_units 16" in d.reason
    assert len(d.launches) == 1 and d.launches[0].tier is Tier.SPOT


def test_no_second_shrink_inside_the_dwell_then_one_after_it() -> None:
    m, clock = manager()
    fleet = ft_fleet()
    spot = spot_of(fleet)
    assert m.handle(revoke(spot[0], clock.now()), fleet, market()).kind is DecisionKind.SHRINK
    clock.advance(timedelta(minutes=20))
    d = m.handle(revoke(spot[1], clock.now()), fleet, market())
    assert d.kind is DecisionKind.REPLACE
    assert "minimum dwell 60 min" in d.reason
    clock.advance(timedelta(minutes=41))  # 61 min after the shrink
    d = m.handle(revoke(spot[2], clock.now()), fleet, market())
    assert d.kind is DecisionKind.SHRINK


def test_inside_the_dwell_with_no_spot_to_replace_an_early_job_shrinks_not_breaks_glass() -> None:
    # docs/concepts/tiers.md: on-demand when the deadline requires it,
    # otherwise shrink. The dwell held the second shrink back; with no spot
    # pool left to replace from, the gang re-forms anyway, so it re-forms
    # smaller (breaking glass here instead, the portfolio loop would do so 27
    # times a month on seed 0).
    m, clock = manager()
    fleet = ft_fleet()
    spot = spot_of(fleet)
    assert m.handle(revoke(spot[0], clock.now()), fleet, market()).kind is DecisionKind.SHRINK
    clock.advance(timedelta(minutes=20))
    _close_all_p4d_spot(m)
    for z in ("us-central1-a", "us-central1-b", "us-central1-c"):
        m.record_launch_failure(key(z, "a2-highgpu-8g", "gcp"))
    d = m.handle(revoke(spot[1], clock.now()), fleet, market())
    assert d.kind is DecisionKind.SHRINK and not d.launches
    assert "re-forms the gang within its dwell" in d.reason
    assert m.break_glass_committed_usd == 0


def test_the_preemption_budget_allows_one_resize_an_hour_even_without_a_dwell() -> None:
    m, clock = manager(workloads(ft={"min_dwell_minutes": 0}))
    fleet = ft_fleet()
    spot = spot_of(fleet)
    assert m.handle(revoke(spot[0], clock.now()), fleet, market()).kind is DecisionKind.SHRINK
    clock.advance(timedelta(minutes=30))
    d = m.handle(revoke(spot[1], clock.now()), fleet, market())
    assert d.kind is not DecisionKind.SHRINK
    assert "preemption budget" in d.reason


def test_shrink_refused_when_the_deadline_slack_would_not_allow_running_smaller() -> None:
    # At 400 h of 480 (80 h left) with 3,300 unit-hours to go: 48 units need
    # 68.75 h + 0.5 h restart (slack 10.75 h); 40 units need 83 h (slack -3 h).
    # Margin: what spot is expected to lose before the deadline in 1a (hazard
    # 0.02/h): 0.02 x 80 h x (0.5 h restart + half of Daly's interval for a
    # 3-min write at M = 50 h, 2.2029 h) = 2.56 h.
    m, clock = manager()
    clock.set(T0 + timedelta(hours=400))
    m.report_progress("ft", 6700.0)
    fleet = ft_fleet()
    d = m.handle(revoke(spot_of(fleet)[0], clock.now()), fleet, market())
    assert d.kind is DecisionKind.REPLACE
    assert "at 40 units deadline slack would be -3.0 h < 2.6 h" in d.reason


def test_deadline_slack_gone_breaks_glass_first() -> None:
    # 9,000 unit-hours left at 400 h: even 48 units need 188 h of the 80 left.
    m, clock = manager()
    clock.set(T0 + timedelta(hours=400))
    m.report_progress("ft", 1000.0)
    fleet = ft_fleet()
    d = m.handle(revoke(spot_of(fleet)[0], clock.now()), fleet, market())
    assert d.kind is DecisionKind.BREAK_GLASS
    assert [(x.tier, x.count) for x in d.launches] == [(Tier.ON_DEMAND, 1)]
    assert "deadline slack" in d.reason
    assert d.break_glass_usd_committed > 0


# --- replace: breakers, availability, cost ------------------------------------------


def test_replace_avoids_the_pool_that_just_revoked_even_if_cheapest() -> None:
    m, clock = manager()
    fleet = (
        inst("rigid", key("us-east-1a", "p4d.24xlarge"), 8),
        inst("rigid", key("us-east-1b", "p4d.24xlarge"), 8),
    )
    d = m.handle(revoke(fleet[0], clock.now()), fleet, market())
    assert d.kind is DecisionKind.REPLACE
    (launch,) = d.launches
    assert launch.pool_key != key("us-east-1a", "p4d.24xlarge")
    assert launch.tier is Tier.SPOT and launch.count == 1
    assert m.open_breakers()["pools"] == [key("us-east-1a", "p4d.24xlarge")]


def test_a_zone_that_revoked_twice_in_five_minutes_is_avoided_for_every_type() -> None:
    m, clock = manager()
    a_p3 = inst("sweeps", key("us-east-1a", "p3.2xlarge"), 1)
    a_p4 = inst("rigid", key("us-east-1a", "p4d.24xlarge"), 8)
    b_g5 = inst("chat", key("us-east-1b", "g5.12xlarge"), 4)
    base = inst("chat", key("us-east-1a", "g5.12xlarge"), 4, Tier.ON_DEMAND)
    fleet = (a_p3, a_p4, b_g5, base, inst("rigid", key("us-east-1c", "p4d.24xlarge"), 8))
    m.handle(revoke(a_p3, clock.now()), fleet, market())
    clock.advance(60)
    m.handle(revoke(a_p4, clock.now()), fleet, market())
    assert "aws/us-east-1a" in m.open_breakers()["zones"]
    clock.advance(60)
    d = m.handle(revoke(b_g5, clock.now()), fleet, market())
    # g5 in 1a is the cheapest spot and its pool never revoked; 1a's zone breaker
    # is open and 1b's pool breaker just opened: 1c it is.
    assert d.kind is DecisionKind.REPLACE
    assert d.launches[0].pool_key == key("us-east-1c", "g5.12xlarge")
    assert "zone breaker open" in d.reason or d.reason.startswith("replace")


def test_breakers_close_after_the_cooldown_and_the_pool_is_used_again() -> None:
    m, clock = manager()
    fleet = tuple(inst("rigid", key(z, "p4d.24xlarge"), 8) for z in ZONES)
    m.handle(revoke(fleet[0], clock.now()), fleet, market())
    clock.advance(899)
    assert key("us-east-1a", "p4d.24xlarge") in m.open_breakers()["pools"]
    clock.advance(1)
    assert m.open_breakers()["pools"] == []
    d = m.handle(revoke(fleet[1], clock.now()), fleet, market())
    assert d.launches[0].pool_key == key("us-east-1a", "p4d.24xlarge")  # cheapest again


def test_replace_prefers_low_effective_cost_over_a_low_sticker_price() -> None:
    # 1b's p3 is the cheapest sticker but revokes twice an hour; 1c's is calm.
    snap = market(drop=[key("us-east-1b", "p3.2xlarge"), key("us-east-1c", "p3.2xlarge")])
    snap = MarketSnapshot(
        at=T0,
        pools=(
            *snap.pools,
            _pool("us-east-1b", "p3.2xlarge", 1, 3.06, 0.80, hazard=2.0),
            _pool("us-east-1c", "p3.2xlarge", 1, 3.06, 1.00, hazard=0.001),
        ),
    )
    m, clock = manager()
    lost = inst("sweeps", key("us-east-1a", "p3.2xlarge"), 1)
    d = m.handle(revoke(lost, clock.now()), (lost,), snap)
    assert d.kind is DecisionKind.REPLACE
    assert d.launches[0].pool_key == key("us-east-1c", "p3.2xlarge")


def test_an_unavailable_pool_is_skipped_until_its_ttl_passes() -> None:
    m, clock = manager(churn_max_share=1.0)  # two replacements in 3 min: not this test
    fleet = tuple(inst("rigid", key(z, "p4d.24xlarge"), 8) for z in ZONES)
    m.record_launch_failure(key("us-east-1b", "p4d.24xlarge"))
    d = m.handle(revoke(fleet[0], clock.now()), fleet, market())
    assert d.launches[0].pool_key == key("us-east-1c", "p4d.24xlarge")
    clock.advance(UNAVAILABLE_OFFERING_TTL_S)
    # 1c now revokes (its breaker opens); 1b's TTL has passed: b is tried again.
    d = m.handle(revoke(fleet[2], clock.now()), fleet, market())
    assert d.launches[0].pool_key == key("us-east-1b", "p4d.24xlarge")


def test_replacements_in_a_burst_spread_over_zones_within_the_zone_share() -> None:
    # sweeps: 2 p3 in each zone (max 50 % of its spot in one zone). Both in 1a
    # revoke; 1b is the cheapest: the first goes there (3 of 6), the second
    # would make 4 of 6 and goes to 1c although the fleet passed is unchanged.
    m, clock = manager()
    fleet = tuple(inst("sweeps", key(z, "p3.2xlarge"), 1) for z in ZONES for _ in range(2))
    d1 = m.handle(revoke(fleet[0], clock.now()), fleet, market())
    d2 = m.handle(revoke(fleet[1], clock.now()), fleet, market())
    assert d1.launches[0].pool_key == key("us-east-1b", "p3.2xlarge")
    assert d2.launches[0].pool_key == key("us-east-1c", "p3.2xlarge")


@pytest.mark.parametrize(
    ("providers", "expected"),
    [
        pytest.param(None, DecisionKind.REPLACE, id="any-provider"),
        pytest.param(("aws",), DecisionKind.CHECKPOINT_ONLY, id="aws-account-only"),
    ],
)
def test_replacements_stay_in_the_providers_the_daemon_can_launch_in(
    providers: tuple[str, ...] | None, expected: DecisionKind
) -> None:
    ws = workloads(
        sweeps={
            "instance_types": ["p3.2xlarge", "a2-highgpu-8g"],
            "throughput": {"p3.2xlarge": 1.0, "a2-highgpu-8g": 2.2},
        }
    )
    m, clock = manager(ws, providers=providers)
    for z in ZONES[1:]:
        m.record_launch_failure(key(z, "p3.2xlarge"))
    lost = inst("sweeps", key("us-east-1a", "p3.2xlarge"), 1)
    d = m.handle(revoke(lost, clock.now()), (lost,), market())
    # a2 spot: $8.80 for 8 x 2.2 work = $0.50 per work-hour before overheads,
    # well within 1.25 x p3's ~$0.95.
    assert d.kind is expected
    if expected is DecisionKind.REPLACE:
        assert d.launches[0].pool_key == key("us-central1-a", "a2-highgpu-8g", "gcp")


def test_a_training_gang_is_replaced_with_its_own_instance_type() -> None:
    m, clock = manager()
    fleet = tuple(inst("rigid", key(z, "p4d.24xlarge"), 8) for z in ZONES)
    for i in fleet[1:]:
        m.record_launch_failure(i.pool_key)
    d = m.handle(revoke(fleet[0], clock.now()), fleet, market())
    # No p4d spot pool passes; the GCP a2 type is acceptable to ft but not to rigid.
    assert d.kind is DecisionKind.BREAK_GLASS
    assert d.launches[0].pool_key.endswith("/p4d.24xlarge")


@pytest.mark.parametrize(
    ("placement", "zones"),
    [
        pytest.param("zone", {"us-east-1b"}, id="zone-gang-stays-in-its-zone"),
        pytest.param("any", set(ZONES), id="any-gang-may-go-elsewhere"),
    ],
)
def test_a_revoked_gang_node_is_replaced_inside_the_gangs_placement(
    placement: str, zones: set[str]
) -> None:
    """A zone gang in us-east-1b: the cheaper p4d spot of us-east-1a is not
    taken (the gang's all-reduce would cross zones); the replacement, or the
    break-glass on-demand, stays in us-east-1b. A spot return too."""
    m, clock = manager(workloads(rigid={"placement": placement}))
    fleet = (
        inst("rigid", key("us-east-1b", "p4d.24xlarge"), 8, Tier.ON_DEMAND),
        inst("rigid", key("us-east-1b", "p4d.24xlarge"), 8),
    )
    d = m.handle(revoke(fleet[1], clock.now()), fleet, market())
    assert d.kind in (DecisionKind.REPLACE, DecisionKind.BREAK_GLASS)
    assert {launch.pool_key.split("/")[2] for launch in d.launches} <= zones
    if placement == "any":  # the cheapest spot, as before the contract
        assert d.launches[0].pool_key == key("us-east-1a", "p4d.24xlarge")
    else:
        assert d.launches[0].pool_key == key("us-east-1b", "p4d.24xlarge")


def test_a_zone_gang_with_no_spot_in_its_zone_breaks_glass_there() -> None:
    m, clock = manager(workloads(rigid={"placement": "zone"}))
    m.record_launch_failure(key("us-east-1b", "p4d.24xlarge"))
    fleet = (
        inst("rigid", key("us-east-1b", "p4d.24xlarge"), 8, Tier.ON_DEMAND),
        inst("rigid", key("us-east-1b", "p4d.24xlarge"), 8),
    )
    d = m.handle(revoke(fleet[1], clock.now()), fleet, market())
    assert d.kind is DecisionKind.BREAK_GLASS
    (launch,) = d.launches
    assert (launch.pool_key, launch.tier) == (key("us-east-1b", "p4d.24xlarge"), Tier.ON_DEMAND)


def test_a_gang_move_larger_than_the_churn_limit_goes_alone_into_an_empty_window() -> None:
    """A mixed-type zone gang loses its H100 node (3 x an A100's work); the
    A100 spot in its zone needs 3 nodes, 24 units, over the fleet's limit
    (floor 8 units). The nodes move together or not at all, so the move
    takes an empty window alone (``ChurnBudget.allowing``). (Breaking glass
    instead, such a gang could never return: the what-if's ``mixed_types``
    run would hold 3 x a2 on-demand for 160 h, spend the cap and leave the
    serving API 180 unit-hours short.)"""
    p5 = _pool("us-east-1a", "p5.48xlarge", 8, 98.32, 30.0)
    ws = workloads(
        rigid={
            "placement": "zone",
            "mixed_types": True,
            "instance_types": ["p5.48xlarge", "p4d.24xlarge"],
            "throughput": {"p5.48xlarge": 3.0, "p4d.24xlarge": 1.0},
        }
    )
    m, clock = manager(ws)
    m.record_launch_failure(key("us-east-1a", "p5.48xlarge"))
    base = tuple(
        inst("rigid", key("us-east-1a", "p4d.24xlarge"), 8, Tier.ON_DEMAND) for _ in range(2)
    )
    h100 = (
        inst("rigid", key("us-east-1a", "p5.48xlarge"), 8),
        inst("rigid", key("us-east-1a", "p5.48xlarge"), 8),
    )
    fleet = (*base, *h100)
    d = m.handle(revoke(h100[0], clock.now()), fleet, market(p5))
    assert d.kind is DecisionKind.REPLACE, d.reason
    assert [(x.pool_key, x.tier, x.count) for x in d.launches] == [
        (key("us-east-1a", "p4d.24xlarge"), Tier.SPOT, 3)
    ]
    assert "churn" not in d.reason


def test_a_churn_window_without_room_for_one_instance_skips_the_pools_walk() -> None:
    """``find_spot`` reads the churn window first: with no room for one
    instance of the smallest type (a g5.12xlarge, 4 units), no pool can
    pass, and it says so without looking at each; with room for exactly
    one, the cheapest pool is found as before (the bound is not too high)."""
    fleet = tuple(inst("chat", key(z, "g5.12xlarge"), 4) for z in ZONES)
    for floor, replaced in ((3.9, False), (4.0, True)):
        m, clock = manager(churn_max_share=0.0, churn_floor_units=floor)
        d = m.handle(revoke(fleet[0], clock.now()), fleet, market())
        if replaced:
            assert d.kind is DecisionKind.REPLACE, d.reason
            assert [(x.tier, x.count) for x in d.launches] == [(Tier.SPOT, 1)]
        else:
            assert d.kind is not DecisionKind.REPLACE
            assert all(x.tier is not Tier.SPOT for x in d.launches)
            assert "the churn budget has no room left" in d.reason, d.reason


def test_out_of_capacity_a_zone_gang_is_offered_no_pool_outside_its_zone() -> None:
    """The daemon's substitution of a refused pool (``instead``): a zone
    gang gets nothing in another zone (the plan's next move is whole);
    a gang placed ``any`` gets the next zone as before."""
    b = key("us-east-1b", "p4d.24xlarge")
    for placement, expected in (("zone", None), ("any", key("us-east-1a", "p4d.24xlarge"))):
        m, clock = manager(workloads(rigid={"placement": placement}))
        m.on_market(market())
        m.record_launch_failure(b)
        found = m.instead("rigid", b, Tier.SPOT, 2, {b}, clock.now())
        assert (found[0] if found else None) == expected


# --- break-glass and the cap ----------------------------------------------------------


def _close_all_p4d_spot(m: LifecycleManager) -> None:
    for z in ZONES:
        m.record_launch_failure(key(z, "p4d.24xlarge"))


def test_break_glass_when_spot_is_adverse_commits_the_estimated_extra_dollars() -> None:
    m, clock = manager()
    _close_all_p4d_spot(m)
    fleet = (inst("rigid", key("us-east-1a", "p4d.24xlarge"), 8),)
    d = m.handle(revoke(fleet[0], clock.now()), fleet, market())
    assert d.kind is DecisionKind.BREAK_GLASS
    (launch,) = d.launches
    assert (launch.pool_key, launch.tier, launch.count) == (fleet[0].pool_key, Tier.ON_DEMAND, 1)
    # (on-demand - lost spot) x max(1 h, (15 min breaker + 30 min dwell)) = 1 h
    assert d.break_glass_usd_committed == pytest.approx(P4D_OD - 9.8)
    assert m.break_glass_committed_usd == pytest.approx(P4D_OD - 9.8)
    assert "out of capacity" in d.reason


@pytest.mark.parametrize(
    ("workload", "expected"),
    [
        pytest.param("rigid", DecisionKind.CHECKPOINT_ONLY, id="rigid-left-unmet"),
        pytest.param("chat", DecisionKind.SHRINK, id="serving-loses-hedge"),
    ],
)
def test_break_glass_beyond_the_cap_is_refused_and_said_so(
    workload: str, expected: DecisionKind
) -> None:
    m, clock = manager(workloads(cap=1.0))
    for z in ZONES:
        m.record_launch_failure(key(z, "p4d.24xlarge"))
        m.record_launch_failure(key(z, "g5.12xlarge"))
    itype, units = ("p4d.24xlarge", 8) if workload == "rigid" else ("g5.12xlarge", 4)
    lost = inst(workload, key("us-east-1a", itype), units)
    base = inst(workload, key("us-east-1b", itype), units, Tier.ON_DEMAND)
    d = m.handle(revoke(lost, clock.now()), (lost, base), market())
    assert d.kind is expected
    assert d.launches == ()
    assert "of the $1 cap is left" in d.reason
    assert m.break_glass_committed_usd == 0.0


def test_serving_never_shrinks_below_its_non_revocable_base() -> None:
    m, clock = manager(workloads(cap=0.0))
    for z in ZONES:
        m.record_launch_failure(key(z, "g5.12xlarge"))
    base = [inst("chat", key("us-east-1a", "g5.12xlarge"), 4, Tier.ON_DEMAND) for _ in range(2)]
    hedge = [inst("chat", key(z, "g5.12xlarge"), 4) for z in ZONES[:2]]
    fleet = (*base, *hedge)
    d1 = m.handle(revoke(hedge[0], clock.now()), fleet, market())
    d2 = m.handle(revoke(hedge[1], clock.now()), fleet, market())
    assert (d1.kind, d1.new_size) == (DecisionKind.SHRINK, 12)
    assert (d2.kind, d2.new_size) == (DecisionKind.SHRINK, 8)  # the base: 2 x 4 on-demand
    assert "break-glass is disabled" in d2.reason


@pytest.mark.parametrize(
    ("blocked", "expected"),
    [
        pytest.param([], DecisionKind.REPLACE, id="cheap-p3-left"),
        pytest.param(["us-east-1b", "us-east-1c"], DecisionKind.CHECKPOINT_ONLY, id="only-dear"),
    ],
)
def test_batch_replaces_only_when_cheap_else_waits(
    blocked: list[str], expected: DecisionKind
) -> None:
    m, clock = manager()
    for z in blocked:
        m.record_launch_failure(key(z, "p3.2xlarge"))
    lost = inst("sweeps", key("us-east-1a", "p3.2xlarge"), 1)
    d = m.handle(revoke(lost, clock.now()), (lost,), market())
    assert d.kind is expected
    if expected is DecisionKind.CHECKPOINT_ONLY:
        # g5 at $2.0 per 1.2 work units is far above 1.25 x p3's effective cost.
        assert "dearer than" in d.reason and d.launches == ()


def test_batch_on_schedule_with_modest_slack_replaces_rather_than_breaking_glass() -> None:
    # 6,000 unit-hours due in 720 h, on 9 units: 666.7 h + 10 min restart,
    # 53 h of slack. Spot in 1a (hazard 0.01/h) is expected to lose 0.01 x
    # 720 h x (1/6 h + ~0.91 h, half of Daly's interval for a 1-min write) =
    # ~7.7 h before the deadline: no reason for on-demand.
    m, clock = manager(workloads(sweeps={"deadline_hours": 720}))
    fleet = tuple(inst("sweeps", key(z, "p3.2xlarge"), 1) for z in ZONES for _ in range(3))
    d = m.handle(revoke(fleet[0], clock.now()), fleet, market())
    assert d.kind is DecisionKind.REPLACE
    assert "deadline" not in d.reason


# --- returning to spot: hysteresis and the cap -----------------------------------------


def _broken_glass(
    cap: float = 5000.0,
) -> tuple[LifecycleManager, ManualClock, tuple[Instance, ...], Decision]:
    m, clock = manager(workloads(cap=cap))
    _close_all_p4d_spot(m)
    lost = inst("rigid", key("us-east-1a", "p4d.24xlarge"), 8)
    other = inst("rigid", key("us-east-1c", "p4d.24xlarge"), 8)
    d = m.handle(revoke(lost, clock.now()), (lost, other), market())
    assert d.kind is DecisionKind.BREAK_GLASS
    clock.advance(20)
    od = inst("rigid", d.launches[0].pool_key, 8, Tier.ON_DEMAND, at=clock.now(), iid="i-od")
    return m, clock, (other, od), d


def test_no_flapping_back_to_spot_before_the_dwell() -> None:
    m, clock, fleet, d = _broken_glass()
    # Capacity is back after the 3-min TTL; the pool breaker closes at 15 min.
    returns, committed = [], d.break_glass_usd_committed
    for _ in range(59):
        clock.advance(60)
        for r in m.tick(None, fleet, market()):
            committed += r.break_glass_usd_committed
            if r.kind is not ReturnKind.EXTEND:
                returns.append(r)
    assert returns == []  # 60 min dwell (rigid's min_dwell_minutes) not yet over
    clock.advance(60)
    (r,) = m.tick(None, fleet, market())
    assert r.kind is ReturnKind.RETURN_TO_SPOT
    assert r.allocation_id == d.notice_id
    assert r.terminate_instance_ids == ("i-od",)
    assert [(x.tier, x.count) for x in r.launches] == [(Tier.SPOT, 1)]
    assert "beats the" in r.reason
    assert m.break_glass_stretches() == {}
    # Spent: (on-demand - spot) for the 3,620 s held (20 s + 60 ticks of 60 s);
    # the rest of the first hour and of the hour added 5 min before it ran out
    # is released.
    assert committed == pytest.approx(2 * (P4D_OD - 9.8))
    assert r.break_glass_usd_spent == pytest.approx((P4D_OD - 9.8) * 3620 / 3600)
    assert r.break_glass_usd_spent + r.break_glass_usd_released == pytest.approx(committed)
    assert m.break_glass_committed_usd == pytest.approx(r.break_glass_usd_spent)
    # What a store sums (commitments, then the return's delta) is the ledger's total.
    assert committed - r.break_glass_usd_committed + r.break_glass_usd_delta == pytest.approx(
        m.break_glass_committed_usd
    )


def test_dollars_committed_before_a_restart_count_against_the_cap() -> None:
    m, clock = manager(workloads(cap=30.0))
    m.restore_break_glass(10.0)
    _close_all_p4d_spot(m)
    lost = inst("rigid", key("us-east-1a", "p4d.24xlarge"), 8)
    d = m.handle(revoke(lost, clock.now()), (lost,), market())
    # $22.97 for the hour would fit an empty $30 cap, not one with $10 used.
    assert d.kind is DecisionKind.CHECKPOINT_ONLY
    assert "$20 of the $30 cap is left" in d.reason


def test_a_stretch_saved_before_a_restart_returns_to_spot_as_if_nothing_happened() -> None:
    # The same run twice: once straight, once with the manager replaced by a
    # new one restored from what a store would hold (the ledger's total and
    # the open stretch's record).
    straight, clock_a, fleet, d = _broken_glass()
    restarted, clock_b, fleet_b, d_b = _broken_glass()
    saved = restarted.stretch_state(d_b.notice_id)
    assert saved is not None and saved["open_usd"] == pytest.approx(d.break_glass_usd_committed)
    fresh, _ = manager(clock=clock_b)
    fresh.restore_break_glass(restarted.break_glass_committed_usd, [json.loads(json.dumps(saved))])
    assert fresh.break_glass_stretches() == restarted.break_glass_stretches()
    assert fresh.break_glass_committed_usd == pytest.approx(d.break_glass_usd_committed)
    for m in (straight, fresh):  # the guards (breakers, failures) are not carried over
        _close_all_p4d_spot(m)
    got = []
    for m, clock, f in ((straight, clock_a, fleet), (fresh, clock_b, fleet_b)):
        out = []
        for _ in range(70):
            clock.advance(60)
            out += [
                (r.kind, r.launches, r.terminate_instance_ids) for r in m.tick(None, f, market())
            ]
        got.append((out, round(m.break_glass_committed_usd, 6)))
    assert got[0] == got[1]
    assert any(k is ReturnKind.RETURN_TO_SPOT for k, _, _ in got[0][0])


def test_a_withdrawn_break_glass_releases_its_dollars_and_launch() -> None:
    m, clock = manager(workloads(cap=5000.0))
    _close_all_p4d_spot(m)
    lost = inst("rigid", key("us-east-1a", "p4d.24xlarge"), 8)
    d = m.handle(revoke(lost, clock.now()), (lost,), market())
    assert d.kind is DecisionKind.BREAK_GLASS and m.break_glass_committed_usd > 0
    m.withdraw(d.notice_id)
    assert m.break_glass_committed_usd == 0 and m.break_glass_stretches() == {}
    assert m.stretch_state(d.notice_id) is None


def test_the_horizon_start_can_be_set_once_the_daemon_knows_the_plan_epoch() -> None:
    # 9,000 unit-hours left: counted from T0, 400 h in, the deadline needs
    # on-demand; counted from an epoch 300 h later, the job is early.
    m, clock = manager()
    clock.set(T0 + timedelta(hours=400))
    m.report_progress("ft", 1000.0)
    m.set_horizon_start(T0 + timedelta(hours=300))
    assert m.horizon_start == T0 + timedelta(hours=300)
    fleet = ft_fleet()
    d = m.handle(revoke(spot_of(fleet)[0], clock.now()), fleet, market())
    assert d.kind is not DecisionKind.BREAK_GLASS


def test_a_stale_snapshot_counts_hazards_over_and_picks_the_calmer_pool() -> None:
    # p4d: 1a cheapest (hazard 0.02), 1c dearest and calmest (0.005); with
    # hazards x 40 while stale, the calm pool's effective cost wins.
    rigid = [inst("rigid", key(z, "p4d.24xlarge"), 8) for z in ("us-east-1b", "us-east-1b")]
    picks = []
    for stale in (False, True):
        m, clock = manager(stale_hazard_multiplier=40.0)
        snap = market().mark_stale() if stale else market()
        d = m.handle(revoke(rigid[0], clock.now()), tuple(rigid), snap)
        assert d.kind is DecisionKind.REPLACE
        picks.append(d.launches[0].pool_key)
    assert picks == [key("us-east-1a", "p4d.24xlarge"), key("us-east-1c", "p4d.24xlarge")]


def test_no_return_while_savings_do_not_pay_for_the_move() -> None:
    # Spot back at nearly the on-demand price: the move is not worth it.
    dear = MarketSnapshot(
        at=T0,
        pools=tuple(
            p.model_copy(update={"spot_usd_per_hour": P4D_OD - 0.01})
            if p.pool.instance_type == "p4d.24xlarge"
            else p
            for p in market().pools
        ),
    )
    m, clock, fleet, _ = _broken_glass()
    clock.advance(timedelta(hours=2))
    kinds = {r.kind for r in m.tick(None, fleet, dear)}
    assert ReturnKind.RETURN_TO_SPOT not in kinds
    assert kinds == {ReturnKind.EXTEND}


def test_a_stretch_the_cap_cannot_extend_ends_when_spot_stays_adverse() -> None:
    m, clock, fleet, _ = _broken_glass(cap=P4D_OD - 9.8 + 1.0)  # one hour and a dollar
    for _ in range(60):
        clock.advance(60)
        _close_all_p4d_spot(m)  # capacity never returns
        for r in m.tick(None, fleet, market()):
            assert r.kind is ReturnKind.END
            assert r.terminate_instance_ids == ("i-od",)
            assert "cannot pay another 1 h" in r.reason
            assert m.break_glass_committed_usd <= m.break_glass_cap_usd  # type: ignore[operator]
            return
    pytest.fail("the stretch was never ended")


def test_a_failed_break_glass_launch_releases_its_commitment() -> None:
    m, _, _, d = _broken_glass()
    assert m.break_glass_committed_usd > 0
    m.record_launch_failure(d.launches[0].pool_key, Tier.ON_DEMAND, notice_id=d.notice_id)
    assert m.break_glass_committed_usd == 0.0
    assert m.break_glass_stretches() == {}


# --- rebalance recommendations --------------------------------------------------------


def test_rebalance_is_ignored_without_a_predictive_record() -> None:
    m, clock = manager()
    i = inst("rigid", key("us-east-1a", "p4d.24xlarge"), 8)
    d = m.handle(revoke(i, clock.now(), kind=NoticeKind.REBALANCE), (i,), market())
    assert d.kind is DecisionKind.IGNORE
    assert "0 of 0 rebalances" in d.reason


def test_rebalance_launches_before_terminate_where_rebalances_predict() -> None:
    m, clock = manager()
    pk = key("us-east-1a", "p4d.24xlarge")
    m.seed_rebalance_history(pk, hits=8, resolved=10)
    i = inst("rigid", pk, 8)
    fleet = (i, inst("rigid", key("us-east-1b", "p4d.24xlarge"), 8))
    d = m.handle(revoke(i, clock.now(), kind=NoticeKind.REBALANCE), fleet, market())
    assert d.kind is DecisionKind.REPLACE
    assert d.launch_before_terminate
    assert d.launches[0].tier is Tier.SPOT
    # The interruption that follows is not decided twice, but is counted as a hit.
    clock.advance(300)
    d2 = m.handle(revoke(i, clock.now()), fleet, market())
    assert d2.kind is DecisionKind.IGNORE and "already handled" in d2.reason
    assert m.rebalance_counts(pk) == (9, 11)


def test_a_stale_rebalance_is_ignored() -> None:
    m, clock = manager()
    pk = key("us-east-1a", "p4d.24xlarge")
    m.seed_rebalance_history(pk, hits=10, resolved=10)
    i = inst("rigid", pk, 8)
    n = revoke(i, clock.now(), kind=NoticeKind.REBALANCE)
    clock.advance(timedelta(minutes=11))
    d = m.handle(n, (i,), market())
    assert d.kind is DecisionKind.IGNORE and "stale" in d.reason


# --- duplicates and notices that are not ours -------------------------------------------


def test_a_duplicate_notice_is_ignored_and_launches_nothing() -> None:
    m, clock = manager()
    fleet = tuple(inst("rigid", key(z, "p4d.24xlarge"), 8) for z in ZONES)
    n = revoke(fleet[0], clock.now())
    first = m.handle(n, fleet, market())
    again = m.handle(n, fleet, market())
    assert first.kind is DecisionKind.REPLACE
    assert again.kind is DecisionKind.IGNORE
    assert again.launches == () and "duplicate" in again.reason
    # A second notice id for the same instance is not decided twice either.
    other = m.handle(revoke(fleet[0], clock.now(), nid="another-id"), fleet, market())
    assert other.kind is DecisionKind.IGNORE and other.launches == ()


@pytest.mark.parametrize(
    ("case", "fragment"),
    [
        pytest.param("unknown-instance", "not in our fleet", id="not-ours"),
        pytest.param("on-demand", "nothing revokes it", id="on-demand"),
        pytest.param("state-change", "state change", id="state-change"),
    ],
)
def test_notices_that_need_no_decision(case: str, fragment: str) -> None:
    m, clock = manager()
    od = inst("rigid", key("us-east-1a", "p4d.24xlarge"), 8, Tier.ON_DEMAND)
    if case == "unknown-instance":
        n = revoke(inst("rigid", key("us-east-1a", "p4d.24xlarge"), 8), clock.now())
    elif case == "on-demand":
        n = revoke(od, clock.now())
    else:
        n = Notice(
            notice_id="sc",
            kind=NoticeKind.STATE_CHANGE,
            instance_id=od.instance_id,
            at=clock.now(),
            state=InstanceState.TERMINATED,
        )
    d = m.handle(n, (od,), market())
    assert d.kind is DecisionKind.IGNORE and fragment in d.reason


# --- checkpoint in the notice window -----------------------------------------------------


@pytest.mark.parametrize(
    ("pool_key", "write_s", "window_s", "fits"),
    [
        pytest.param(key("us-east-1a", "p4d.24xlarge"), 60.0, 120.0, True, id="aws-60s-fits"),
        pytest.param(key("us-east-1a", "p4d.24xlarge"), 180.0, 120.0, False, id="aws-3min"),
        pytest.param(
            key("us-central1-a", "a2-highgpu-8g", "gcp"), 180.0, 30.0, False, id="gcp-3min"
        ),
        pytest.param(
            key("us-central1-a", "a2-highgpu-8g", "gcp"), 20.0, 30.0, True, id="gcp-20s-fits"
        ),
        pytest.param(
            key("us-central1-a", "a2-highgpu-8g", "gcp"), 20.0, None, True, id="gcp-default"
        ),
    ],
)
def test_notice_checkpoint_fits_the_window_or_falls_back(
    pool_key: str, write_s: float, window_s: float | None, fits: bool
) -> None:
    m, clock = manager(workloads(ft={"checkpoint_write_seconds": write_s}))
    lost = inst("ft", pool_key, 8)
    fleet = (lost, *ft_fleet())
    clock.advance(2)  # decided 2 s after the notice
    d = m.handle(revoke(lost, T0, window_s=window_s), fleet, market())
    assert d.checkpoint is not None
    assert d.checkpoint.fits is fits
    window = 30.0 if window_s is None else window_s
    assert d.checkpoint.window_s == window
    assert d.checkpoint.hook_budget_s == pytest.approx(window - 2 - 5)  # latency, margin
    assert d.latency_s == pytest.approx(2.0)
    if not fits:
        assert "last periodic checkpoint" in d.checkpoint.note


# --- invariants over long random runs, and a storm ---------------------------------------


def _capacity_bound(fleet: Iterable[Instance], launched_units: float) -> float:
    return sum(i.units for i in fleet) + launched_units


@settings(deadline=None, max_examples=25)
@given(
    cap=st.floats(min_value=0.0, max_value=400.0),
    events=st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 40), st.integers(0, 900)), max_size=80
    ),
)
def test_caps_and_budgets_hold_over_a_random_run(
    cap: float, events: list[tuple[int, int, int]]
) -> None:
    m, clock = manager(workloads(cap=cap))
    fleet = tuple(
        [inst("sweeps", key(z, "p3.2xlarge"), 1) for z in ZONES for _ in range(6)]
        + [inst("rigid", key(z, "p4d.24xlarge"), 8) for z in ZONES for _ in range(2)]
        + [inst("ft", key(z, "p4d.24xlarge"), 8) for z in ZONES for _ in range(2)]
        + [inst("chat", key(z, "g5.12xlarge"), 4) for z in ZONES]
    )
    spot_launches: list[tuple[float, float]] = []
    shrinks: dict[str, list[float]] = {}
    launched_units = 0.0
    seen: set[str] = set()
    for op, who, dt in events:
        clock.advance(dt)
        now_s = clock.now().timestamp()
        if op <= 1:  # a revocation (or its duplicate) of one of the fleet
            target = fleet[who % len(fleet)]
            d = m.handle(revoke(target, clock.now()), fleet, market())
            if target.instance_id in seen:
                assert d.kind is DecisionKind.IGNORE and d.launches == ()
            seen.add(target.instance_id)
            units = [(x.tier, x.count * (8 if "p4d" in x.pool_key else 1)) for x in d.launches]
            # a shrink the dwell held back is taken before breaking glass
            # (docs/concepts/tiers.md) and says so; the others keep the budget
            forced = "within its dwell" in d.reason
            if d.kind is DecisionKind.SHRINK and d.workload == "ft" and not forced:
                shrinks.setdefault("ft", []).append(now_s)
        elif op == 2:
            returns = m.tick(None, fleet, market())
            units = [
                (x.tier, x.count * (8 if "p4d" in x.pool_key else 1))
                for r in returns
                for x in r.launches
            ]
        else:
            m.record_launch_failure(fleet[who % len(fleet)].pool_key)
            units = []
        for tier, u in units:
            launched_units += u
            if tier is Tier.SPOT:
                spot_launches.append((now_s, u))
        assert m.break_glass_committed_usd <= cap + 1e-6
        window = sum(u for t, u in spot_launches if t > now_s - 600.0)
        assert window <= max(0.05 * _capacity_bound(fleet, launched_units), 8.0) + 1e-9
    times = shrinks.get("ft", [])
    assert all(b - a >= 3600.0 for a, b in itertools.pairwise(times))


def test_a_storm_of_1000_revocations_in_one_zone() -> None:
    ws = workloads(cap=2000.0)
    m, clock = manager(ws)
    storm_zone = "us-east-1a"
    victims = [inst("sweeps", key(storm_zone, "p3.2xlarge"), 1) for _ in range(700)] + [
        inst("rigid", key(storm_zone, "p4d.24xlarge"), 8) for _ in range(300)
    ]
    bystanders = [inst("sweeps", key(z, "p3.2xlarge"), 1) for z in ZONES[1:] for _ in range(100)]
    fleet = (*victims, *bystanders)
    capacity = sum(i.units for i in fleet)
    notices = [
        revoke(v, clock.now() + timedelta(milliseconds=100 * k)) for k, v in enumerate(victims)
    ]
    snap = market()
    decisions: list[Decision] = []
    for n in notices:
        clock.set(max(clock.now(), n.at))
        decisions.append(m.handle(n, fleet, snap))
    assert [d.notice_id for d in decisions] == [n.notice_id for n in notices]
    kinds = [d.kind for d in decisions]
    assert DecisionKind.IGNORE not in kinds
    # The zone breaker opens on the second revocation: nothing goes back into 1a after.
    assert all(
        not x.pool_key.startswith(f"aws/us-east-1/{storm_zone}/") or x.tier is Tier.ON_DEMAND
        for d in decisions[1:]
        for x in d.launches
    )
    # Spot churn within the budget: 5 % of capacity (or one 8-GPU node) in 10 min.
    spot_units = sum(
        x.count * (8 if "p4d" in x.pool_key else 1)
        for d in decisions
        for x in d.launches
        if x.tier is Tier.SPOT
    )
    assert 0 < spot_units <= max(0.05 * capacity, 8.0)
    # Break-glass within its cap, the rest said why they wait.
    assert kinds.count(DecisionKind.BREAK_GLASS) > 0
    assert m.break_glass_committed_usd <= 2000.0
    assert sum(d.break_glass_usd_committed for d in decisions) == pytest.approx(
        m.break_glass_committed_usd
    )
    assert all(d.reason for d in decisions)
    # The same 1,000 again (at-least-once delivery): all ignored, nothing launched.
    again = [m.handle(n, fleet, snap) for n in reversed(notices)]
    assert all(d.kind is DecisionKind.IGNORE and d.launches == () for d in again)


# --- the cost table: once per snapshot ------------------------------------------------


def test_the_cost_table_is_computed_once_per_snapshot_not_per_notice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    computed: list[CostTable] = []
    compute = CostTable.compute.__func__  # type: ignore[attr-defined]

    def counting(cls: type[CostTable], *args: object, **kwargs: object) -> CostTable:
        table: CostTable = compute(cls, *args, **kwargs)
        computed.append(table)
        return table

    monkeypatch.setattr(CostTable, "compute", classmethod(counting))  # type: ignore[arg-type]
    m, clock = manager()
    fleet = ft_fleet()
    snap = market()
    m.on_market(snap)  # the daemon's market update
    for lost in spot_of(fleet)[:3]:
        clock.advance(1)
        m.handle(revoke(lost, clock.now()), fleet, snap)
    m.tick(None, fleet, snap)
    assert len(computed) == 1
    assert computed[0].snapshot is snap
    assert computed[0].options.interruption_multiplier == 1.0
    stale = snap.mark_stale()  # a new snapshot: one new table, hazards widened
    clock.advance(1)
    m.handle(revoke(spot_of(fleet)[3], clock.now()), fleet, stale)
    m.tick(None, fleet, stale)
    assert len(computed) == 2
    assert computed[1].options.interruption_multiplier == m.config.stale_hazard_multiplier


def test_a_return_whose_on_demand_is_gone_launches_no_spot_on_top_of_the_plan() -> None:
    # A re-plan ended the stretch's on-demand (its count is the plan's again):
    # the return has nothing to replace.
    m, clock = manager(workloads(chat={"max_spot_share": 1.0}))
    for z in ZONES:
        m.record_launch_failure(key(z, "g5.12xlarge"))
    lost = inst("chat", key("us-east-1a", "g5.12xlarge"), 4)
    other = inst("chat", key("us-east-1b", "g5.12xlarge"), 4)
    d = m.handle(revoke(lost, clock.now()), (lost, other), market())
    assert d.kind is DecisionKind.BREAK_GLASS
    returns = []
    for _ in range(120):
        clock.advance(60)
        returns += [r for r in m.tick(None, (other,), market()) if r.kind is not ReturnKind.EXTEND]
        if returns:
            break
    (ret,) = returns
    assert ret.kind is ReturnKind.RETURN_TO_SPOT
    assert ret.launches == () and ret.terminate_instance_ids == ()
    assert m.break_glass_stretches() == {}


def _serving_glass() -> tuple[LifecycleManager, ManualClock, tuple[Instance, ...], Decision]:
    """chat loses a spot g5 replica while every g5 pool refuses spot: break-glass."""
    m, clock = manager()
    for z in ZONES:
        m.record_launch_failure(key(z, "g5.12xlarge"))
    b = key("us-east-1b", "g5.12xlarge")
    base = tuple(inst("chat", b, 4, Tier.ON_DEMAND) for _ in range(2))
    lost = inst("chat", key("us-east-1a", "g5.12xlarge"), 4)
    d = m.handle(revoke(lost, clock.now()), (*base, lost), market())
    assert d.kind is DecisionKind.BREAK_GLASS
    clock.advance(20)
    od = inst("chat", d.launches[0].pool_key, 4, Tier.ON_DEMAND, at=clock.now(), iid="i-od")
    return m, clock, (*base, od), d


def test_a_serving_return_to_spot_is_not_held_by_the_dwell_floor() -> None:
    # A serving return is make before break (the on-demand serves until the
    # spot is ready): the verdict's savings x lifetime against the overlap
    # decides it, not the 30-min floor that keeps training from restarting
    # at the first quiet minute (test_no_flapping_back_to_spot_before_the_dwell).
    m, clock, fleet, d = _serving_glass()
    returned_s = None
    for minute in range(1, 30):
        clock.advance(60)
        rs = [r for r in m.tick(None, fleet, market()) if r.kind is ReturnKind.RETURN_TO_SPOT]
        if rs:
            returned_s = minute * 60
            (r,) = rs
            assert r.allocation_id == d.notice_id
            assert r.terminate_instance_ids == ("i-od",)
            assert r.after_ready  # the on-demand stays until the spot is ready
            assert [x.tier for x in r.launches] == [Tier.SPOT]
            break
    # back once spot can be launched again (the refusals' TTL), well inside 30 min
    assert returned_s is not None
    assert UNAVAILABLE_OFFERING_TTL_S <= returned_s + 20 <= UNAVAILABLE_OFFERING_TTL_S + 120


def _first_return(
    m: LifecycleManager, clock: ManualClock, fleet: tuple[Instance, ...]
) -> SpotReturn:
    for _ in range(60):
        clock.advance(60)
        rs = [r for r in m.tick(None, fleet, market()) if r.kind is ReturnKind.RETURN_TO_SPOT]
        if rs:
            (r,) = rs
            return r
    raise AssertionError("no return to spot within an hour")


def _warming_spot_revoked() -> tuple[LifecycleManager, ManualClock, tuple[Instance, ...], Decision]:
    """A serving return keeps its on-demand ("i-od") until its spot is
    ready; that spot is revoked while warming, every spot pool refuses, and
    the notice breaks glass: the manager, clock, fleet and that decision."""
    m, clock, fleet, _ = _serving_glass()
    first = _first_return(m, clock, fleet)
    assert first.terminate_instance_ids == ("i-od",) and first.after_ready
    (launch,) = first.launches
    clock.advance(30)
    warming = inst("chat", launch.pool_key, 4, Tier.SPOT, at=clock.now(), iid="i-warm")
    for z in ZONES:
        m.record_launch_failure(key(z, "g5.12xlarge"))
    d2 = m.handle(revoke(warming, clock.now()), (*fleet, warming), market())
    assert d2.kind is DecisionKind.BREAK_GLASS
    return m, clock, fleet, d2


def test_a_serving_return_retires_the_on_demand_serving_in_its_stretchs_stead() -> None:
    # The fleet bench's defect (seed 1, p3.16xlarge): a return keeps its
    # on-demand until its spot is ready; that spot is revoked while warming,
    # every spot pool refuses, and the notice breaks glass again. Reconcile
    # then holds the ready on-demand the first return kept and ends the new
    # break-glass one (the newest surplus). The second return must retire the
    # on-demand that serves in its stead and launch spot; it retired nothing,
    # launched nothing, and the break-glass count held the fleet on on-demand
    # until the next plan.
    m, clock, fleet, d2 = _warming_spot_revoked()
    # reconcile ended d2's on-demand: the kept one ("i-od") serves
    second = _first_return(m, clock, fleet)
    assert second.allocation_id == d2.notice_id
    assert second.terminate_instance_ids == ("i-od",)
    assert [x.tier for x in second.launches] == [Tier.SPOT]
    assert second.after_ready  # reconcile ends it once the spot is ready


def test_a_serving_break_glass_takes_back_the_on_demand_a_return_still_runs() -> None:
    # A return keeps the on-demand it retires until its spot is ready (make
    # before break). When that spot is revoked first, the retired on-demand
    # is ready and serving: break glass onto it, launch nothing. A launch
    # would be ready a cold start after a 2-minute notice has run out and
    # would run beside it, paid, until reconcile ended the surplus (fleet
    # bench, seed 1: ~2,800 such launches in the p3.16xlarge group).
    m, clock, fleet, d2 = _warming_spot_revoked()
    assert d2.launches == ()
    assert d2.kept_instance_ids == ("i-od",)
    od_pool = fleet[-1].pool_key
    assert d2.kept == (LaunchIntent(od_pool, Tier.ON_DEMAND, 1),)
    assert d2.break_glass_usd_committed > 0  # against the cap, as any break-glass
    assert d2.as_record()["kept"] == [{"pool_key": od_pool, "tier": "on_demand", "count": 1}]
    assert m.stretch_state(d2.notice_id)["kept"] == ["i-od"]  # type: ignore[index]  # stored with it
    # its own return retires what it took back
    second = _first_return(m, clock, fleet)
    assert second.allocation_id == d2.notice_id
    assert second.terminate_instance_ids == ("i-od",)
    assert [x.tier for x in second.launches] == [Tier.SPOT]


def test_a_withdrawn_take_back_leaves_the_on_demand_retired() -> None:
    # The daemon refused the decision (its cap or budget guard): the stretch
    # goes, and the on-demand it took back is the return's retired one again,
    # so the next revocation can take it back.
    m, clock, fleet, _ = _serving_glass()
    (launch,) = _first_return(m, clock, fleet).launches
    clock.advance(30)
    warm = [inst("chat", launch.pool_key, 4, Tier.SPOT, at=clock.now(), iid=f"i-w{i}")
            for i in range(2)]  # fmt: skip
    for z in ZONES:
        m.record_launch_failure(key(z, "g5.12xlarge"))
    d2 = m.handle(revoke(warm[0], clock.now()), (*fleet, *warm), market())
    assert d2.kept_instance_ids == ("i-od",)
    m.withdraw(d2.notice_id)
    assert d2.notice_id not in m.break_glass_stretches()
    d3 = m.handle(revoke(warm[1], clock.now()), (*fleet, *warm), market())
    assert d3.kept_instance_ids == ("i-od",) and d3.launches == ()


def test_with_no_retired_on_demand_running_serving_breaks_glass_onto_a_launch() -> None:
    # The on-demand a return retired is gone (reconcile ended it once its
    # spot was ready): a later revocation launches on-demand as before.
    m, clock, fleet, _ = _serving_glass()
    first = _first_return(m, clock, fleet)
    (launch,) = first.launches
    clock.advance(600)
    ready = inst("chat", launch.pool_key, 4, Tier.SPOT, at=clock.now(), iid="i-ready")
    running = (*fleet[:2], ready)  # "i-od" ended
    for z in ZONES:
        m.record_launch_failure(key(z, "g5.12xlarge"))
    d2 = m.handle(revoke(ready, clock.now()), running, market())
    assert d2.kind is DecisionKind.BREAK_GLASS
    assert [x.tier for x in d2.launches] == [Tier.ON_DEMAND]
    assert d2.kept == () and d2.kept_instance_ids == ()


def test_a_serving_return_names_the_newest_on_demand_as_reconcile_ends_it() -> None:
    # A serving return leaves the ending to reconcile, which ends a slot's
    # newest surplus first (``broker.planning.reconcile.diff``). The return
    # names the newest on-demand of its pool launched since the stretch
    # began, so the instance the manager takes as retired is the one that
    # ends (and a later break-glass takes back only on-demand that runs on
    # as surplus, not one the counts still hold).
    m, clock, fleet, _ = _serving_glass()
    od = fleet[-1]
    later = inst("chat", od.pool_key, 4, Tier.ON_DEMAND, at=od.launched_at + timedelta(minutes=5),
                 iid="i-newer")  # fmt: skip
    r = _first_return(m, clock, (*fleet, later))
    assert r.terminate_instance_ids == ("i-newer",)


def _spot_lost_beside_surplus_on_demand(
    named: list[list[str]],
) -> Decision:
    """chat: one spot g5 replica in 1a and one on-demand g5 in 1b that
    reconcile keeps only until the spot replacing it is ready (a plan moved
    the capacity back to spot); every g5 spot pool then refuses, and the
    spot is revoked. ``named``: the successive ``kept_until_ready`` sets."""
    m, clock = manager()
    od = inst("chat", key("us-east-1b", "g5.12xlarge"), 4, Tier.ON_DEMAND, iid="i-surplus")
    warm = inst("chat", key("us-east-1a", "g5.12xlarge"), 4, at=T0 + timedelta(minutes=1))
    clock.advance(90)
    for ids in named:
        m.kept_until_ready(ids)
    for z in ZONES:
        m.record_launch_failure(key(z, "g5.12xlarge"))
    return m.handle(revoke(warm, clock.now()), (od, warm), market())


def test_a_serving_break_glass_takes_back_on_demand_reconcile_keeps_until_ready() -> None:
    # A re-plan put the fleet back on spot while break-glass on-demand still
    # ran; reconcile keeps that on-demand until the spot is ready and names
    # it. The spot is revoked first: the notice keeps the on-demand serving
    # instead of launching another beside it (fleet bench, seed 1: 0.5499 ->
    # 0.5487 x on-demand).
    d = _spot_lost_beside_surplus_on_demand([["i-surplus"]])
    assert d.kind is DecisionKind.BREAK_GLASS
    assert d.launches == () and d.kept_instance_ids == ("i-surplus",)


def test_on_demand_reconcile_no_longer_names_counts_again() -> None:
    # A later reconcile no longer names it (the counts hold it again): it is
    # capacity the workload has, not surplus to take back.
    d = _spot_lost_beside_surplus_on_demand([["i-surplus"], []])
    assert d.kept_instance_ids == ()
    assert [x.tier for x in d.launches] == [Tier.ON_DEMAND]


def test_a_serving_return_never_retires_on_demand_no_return_retired() -> None:
    # The plan's own on-demand base (never retired by a return) is not the
    # stretch's: with the stretch's on-demand gone, the return launches
    # nothing on top of the plan.
    m, clock, fleet, _ = _serving_glass()
    base = fleet[:2]
    r = _first_return(m, clock, base)
    assert r.terminate_instance_ids == () and r.launches == ()


def test_without_the_dwell_floor_the_verdict_still_holds_a_serving_return() -> None:
    # Without the floor the hysteresis still decides: a pool revoking every
    # minute or so saves less over its expected lifetime than the overlap
    # costs, and serving stays on on-demand.
    m, clock, fleet, _ = _serving_glass()
    g5 = [key(z, "g5.12xlarge") for z in ZONES]
    stormy = market(*(_pool(z, "g5.12xlarge", 4, 5.672, 1.9, hazard=50.0) for z in ZONES), drop=g5)
    for _ in range(29):
        clock.advance(60)
        kinds = {r.kind for r in m.tick(None, fleet, stormy)}
        assert ReturnKind.RETURN_TO_SPOT not in kinds
