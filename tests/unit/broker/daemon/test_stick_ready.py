"""``stick`` with ready counts: a serving replacement still warming up gives
way to a ready surplus replica of an equivalent pool (``broker.daemon.book``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from broker.daemon.book import FleetBook, stick
from broker.planning.reconcile import diff, warm_up_seconds
from markets.cloud_fleet import OWNER_TAG, Instance, InstanceState, TerminateRequest
from markets.model import Tier
from policies.workloads.spec import parse_workloads
from tests.fakes.lifecycle import QuietLifecycle

NOW = datetime(2026, 1, 1, tzinfo=UTC)
A = "aws/us-west-2/us-west-2a/p3.2xlarge"
B = "aws/us-west-2/us-west-2b/p3.2xlarge"
WS = parse_workloads(
    {
        "workloads": [
            {
                "name": "chat",
                "class": "serving",
                "instance_types": ["p3.2xlarge"],
                "demand": {"base_units": 2, "peak_units": 2},
            },
        ]
    }
)
WARM = warm_up_seconds(WS)


def _inst(iid: str, pool: str, age_s: float, tier: Tier = Tier.ON_DEMAND) -> Instance:
    return Instance(
        instance_id=iid,
        pool_key=pool,
        tier=tier,
        workload="chat",
        state=InstanceState.RUNNING,
        units=1,
        launched_at=NOW - timedelta(seconds=age_s),
        tags={OWNER_TAG: "me"},
    )


def _book(prices: dict[str, float] | None = None) -> FleetBook:
    book = FleetBook("me", WS, QuietLifecycle())
    if prices is not None:
        book.price = lambda pool_key, tier: prices[pool_key]  # type: ignore[method-assign]
    return book


def _fleet() -> tuple[Instance, ...]:
    # Two ready on-demand in zone a, kept by make before break; two launched
    # in zone b a minute ago (a notice's replacements), which the want holds.
    ready = (_inst("i-a1", A, 900), _inst("i-a2", A, 900))
    return (*ready, _inst("i-b1", B, 60), _inst("i-b2", B, 60))


def test_a_warming_replacement_gives_way_to_a_ready_surplus_replica() -> None:
    book, fleet = _book(), _fleet()
    want = {("chat", B, "on_demand"): 2}
    running, ready = book.counts(fleet), book.ready_counts(fleet, NOW, WARM)
    assert ready == {("chat", A, "on_demand"): 2.0}
    assert stick(want, running, book, 0.1) == want  # all running: nothing to stick to
    kept = stick(want, running, book, 0.1, ready)
    assert kept == {("chat", A, "on_demand"): 2}
    # diff ends the warming ones and keeps the ready ones: no cold start left
    # to wait for, so nothing else is held.
    reqs = diff(kept, fleet, 1, "me", now=NOW, warm_s=WARM)
    (end,) = reqs
    assert isinstance(end, TerminateRequest)
    assert end.instance_ids == ("i-b1", "i-b2")


def test_a_replacement_in_a_pool_much_cheaper_than_the_ready_one_stays() -> None:
    book, fleet = _book({A: 3.0, B: 2.0}), _fleet()
    want = {("chat", B, "on_demand"): 2}
    kept = stick(want, book.counts(fleet), book, 0.1, book.ready_counts(fleet, NOW, WARM))
    assert kept == want


def test_only_the_warming_part_moves_and_a_pool_under_notice_is_not_a_target() -> None:
    book = _book()
    fleet = (*_fleet(), _inst("i-b0", B, 900))
    # b holds one ready and two warming; the want of three there keeps its
    # ready one and takes the two ready ones of a for the warming two.
    want = {("chat", B, "on_demand"): 3}
    kept = stick(want, book.counts(fleet), book, 0.1, book.ready_counts(fleet, NOW, WARM))
    assert kept == {("chat", B, "on_demand"): 1, ("chat", A, "on_demand"): 2}
    # spot in a zone under notice: its other ready replica is no target
    spot = (
        _inst("s-a1", A, 900, Tier.SPOT),
        _inst("s-a2", A, 900, Tier.SPOT),
        _inst("s-b1", B, 60, Tier.SPOT),
    )
    book.doom("s-a1", NOW + timedelta(seconds=120), NOW)
    want = {("chat", B, "spot"): 1}
    ready = book.ready_counts(spot, NOW, WARM)
    assert ("chat", A, "spot") not in ready
    assert stick(want, book.counts(spot), book, 0.1, ready) == want


def test_a_replacement_in_a_pool_hit_by_another_notice_keeps_its_floor() -> None:
    """Zone b holds a replacement whose notice window is open (its floor,
    ``FleetBook.protected``) and, since, another instance under a notice of
    its own: nothing in b counts as ready, and without the floor the
    replacement would give way to a ready surplus replica of zone a and be
    ended before the revocation it replaces lands."""
    book = _book()
    fleet = (
        _inst("i-a1", A, 900),
        _inst("i-a2", A, 900),
        _inst("i-b1", B, 900),
        _inst("i-b2", B, 60),
    )
    book.doom("i-b1", NOW + timedelta(seconds=90), NOW - timedelta(seconds=30))
    slot_a, slot_b = ("chat", A, "on_demand"), ("chat", B, "on_demand")
    want = {slot_a: 1, slot_b: 1}  # the plan's one in b is the replacement i-b2
    running, ready = book.counts(fleet), book.ready_counts(fleet, NOW, WARM)
    assert ready == {slot_a: 2.0} and running == {slot_a: 2.0, slot_b: 1.0}
    doomed = frozenset(book.doomed)
    moved = stick(want, running, book, 0.1, ready)
    assert moved == {slot_a: 2}
    (end,) = diff(moved, fleet, 1, "me", doomed=doomed, now=NOW, warm_s=WARM)
    assert isinstance(end, TerminateRequest) and end.instance_ids == ("i-b2",)
    kept = stick(want, running, book, 0.1, ready, {slot_b: 1})
    assert kept == want
    # i-a2 stays while the replacement warms up (make before break): nothing ends.
    assert diff(kept, fleet, 1, "me", doomed=doomed, now=NOW, warm_s=WARM) == []
