"""GCP GPU quotas from regions.get and projects.get (the local Compute Engine
fake): the offered GPU models' regional metrics on their tiers, the global
quota, read once per TTL, and left out when never asked for."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from markets import ttl
from markets.clock import ManualClock
from markets.gcp.market import GcpMarket
from markets.gcp.sdk import GCP_MARKET_API_CALLS, GCP_QUOTA_API_CALLS, build_compute_clients
from markets.model import Tier
from tests.fakes.gcp import FakeCompute
from tests.unit.markets.gcp.test_market import FAST, PROJECT, T0


@pytest.fixture
def fake() -> Iterator[FakeCompute]:
    with FakeCompute(lifetime_s=60.0) as f:
        f.set_quota("NVIDIA_A100_GPUS", 16, region="us-central1")
        f.set_quota("PREEMPTIBLE_NVIDIA_A100_GPUS", 64, region="us-central1")
        f.set_quota("NVIDIA_H100_GPUS", 8, region="us-central1")  # no preemptible metric
        f.set_quota("NVIDIA_T4_GPUS", 4, region="us-central1")  # no T4 type asked for
        f.set_quota("CPUS", 96, region="us-central1")
        f.set_quota("GPUS_ALL_REGIONS", 24)
        yield f


def _market(fake: FakeCompute, clock: ManualClock, *, read_quotas: bool) -> GcpMarket:
    return GcpMarket.from_clients(
        build_compute_clients(endpoint=fake.url, anonymous=True),
        project=PROJECT,
        read_quotas=read_quotas,
        regions=("us-central1",),
        instance_types=("a2-highgpu-1g", "a3-highgpu-8g"),
        clock=clock,
        policy=FAST,
    )


def test_the_snapshot_carries_each_offered_models_quotas_and_the_global_one(
    fake: FakeCompute,
) -> None:
    clock = ManualClock(T0)
    m = _market(fake, clock, read_quotas=True)
    snap = m.snapshot()
    assert {(q.key, q.limit, q.code) for q in snap.quotas} == {
        ("gcp/us-central1/NVIDIA_A100_GPUS/on_demand", 16.0, "NVIDIA_A100_GPUS"),
        ("gcp/us-central1/NVIDIA_A100_GPUS/spot", 64.0, "PREEMPTIBLE_NVIDIA_A100_GPUS"),
        # No preemptible H100 quota: Spot VMs take the standard one (any tier).
        ("gcp/us-central1/NVIDIA_H100_GPUS/any", 8.0, "NVIDIA_H100_GPUS"),
        ("gcp/*/GPUS_ALL_REGIONS/any", 24.0, "GPUS_ALL_REGIONS"),
    }
    h100 = next(q for q in snap.quotas if q.group == "NVIDIA_H100_GPUS")
    assert h100.counts_tier(Tier.SPOT) and h100.counts_tier(Tier.ON_DEMAND)
    assert set(fake.calls) == GCP_MARKET_API_CALLS | GCP_QUOTA_API_CALLS
    before = fake.calls["compute.regions.get"]
    clock.advance(timedelta(seconds=ttl.QUOTA_TTL_S / 2))
    assert m.snapshot(clock.now()).quotas == snap.quotas
    assert fake.calls["compute.regions.get"] == before
    clock.advance(timedelta(seconds=ttl.QUOTA_TTL_S))
    m.snapshot(clock.now())
    assert fake.calls["compute.regions.get"] == before + 1


def test_without_read_quotas_no_quota_is_read(fake: FakeCompute) -> None:
    snap = _market(fake, ManualClock(T0), read_quotas=False).snapshot()
    assert snap.quotas == ()
    assert set(fake.calls) == GCP_MARKET_API_CALLS


def test_an_unreadable_quota_leaves_none_known_and_marks_the_snapshot_stale(
    fake: FakeCompute,
) -> None:
    fake.fail_next("compute.regions.get", 503, "backendError", times=50)
    snap = _market(fake, ManualClock(T0), read_quotas=True).snapshot()
    assert snap.quotas == () and snap.stale
