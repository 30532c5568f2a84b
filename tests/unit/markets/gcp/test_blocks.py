"""GCP future reservations read from the local Compute Engine fake
(tests/fakes/gcp.py: futureReservations.aggregatedList, one item a page) as
held reserved-ahead blocks; requests GCP has not approved hold nothing."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from markets.blocks import BlockKind
from markets.gcp.blocks import fetch_future_reservations
from markets.gcp.sdk import CallPolicy, build_compute_clients
from markets.model import Provider
from tests.fakes.gcp import FakeCompute

START = datetime(2026, 12, 14, 8, tzinfo=UTC)
FAST = CallPolicy(retry_timeout_s=2.0, initial_s=0.05, maximum_s=0.1, request_s=5.0)


@pytest.fixture
def fake() -> Iterator[FakeCompute]:
    with FakeCompute(lifetime_s=60.0, page_size=1) as f:
        yield f


def test_approved_future_reservations_are_held_blocks_across_pages(fake: FakeCompute) -> None:
    end = START + timedelta(days=9)
    fake.add_future_reservation("us-central1-a", "fr-h100", machine_type="a3-highgpu-8g",
                                count=4, start=START, end=end)  # fmt: skip
    fake.add_future_reservation("us-central1-b", "fr-approved", machine_type="a2-highgpu-1g",
                                count=2, start=START, end=end, procurement="APPROVED")  # fmt: skip
    for state in ("PENDING_APPROVAL", "DECLINED", "CANCELLED", "FAILED"):
        fake.add_future_reservation("us-central1-a", f"fr-{state.lower()}",
                                    machine_type="a3-highgpu-8g", count=8, start=START, end=end,
                                    procurement=state)  # fmt: skip
    client = build_compute_clients(endpoint=fake.url, anonymous=True).future_reservations
    assert client is not None
    got = fetch_future_reservations(client, fake.project, policy=FAST)
    assert [(b.block_id, b.zone, b.instance_type, b.count) for b in got] == [
        ("fr-h100", "us-central1-a", "a3-highgpu-8g", 4),
        ("fr-approved", "us-central1-b", "a2-highgpu-1g", 2),
    ]
    for b in got:
        assert b.kind is BlockKind.GCP_FUTURE_RESERVATION and b.provider is Provider.GCP
        assert b.region == "us-central1" and b.held and b.cost_usd == 0.0  # sunk
        assert (b.start, b.end, b.hours) == (START, end, 216.0)
    assert fake.calls["compute.futureReservations.aggregatedList"] >= 2  # paged
