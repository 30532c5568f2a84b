"""A gang's broker-made stops, paid and unpaid, per gang-day
(broker.daemon.accelerated.gang_stop_counts)."""

from __future__ import annotations

from datetime import timedelta

from broker.daemon.accelerated import gang_stop_counts
from tests.fakes.tiny_market import T0


def test_unpaid_stops_are_counted_per_day_the_gang_held_capacity() -> None:
    stops = [(T0 + timedelta(hours=k), k % 3 == 0) for k in range(9)]  # 3 paid, 6 unpaid
    got = gang_stop_counts(stops, job_hours=72)
    assert got == {"broker_stops": 9, "broker_stops_paid": 3, "broker_stops_unpaid": 6,
                   "unpaid_stops_per_gang_day": 2.0}  # fmt: skip


def test_a_gang_that_held_capacity_under_a_day_counts_one_day() -> None:
    got = gang_stop_counts([(T0, False)], job_hours=5)
    assert got["unpaid_stops_per_gang_day"] == 1.0
