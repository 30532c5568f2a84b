"""The daemon's cloud market reads the account's quotas into each snapshot
(the local Compute Engine fake), unless ``market_options`` turns it off;
a market without quotas (``default``) is opened as before."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from broker.daemon.config import DaemonConfig
from broker.daemon.wiring import open_config_market
from tests.fakes.gcp import FakeCompute
from tests.unit.markets.gcp.test_market import PROJECT


@pytest.fixture
def fake() -> Iterator[FakeCompute]:
    with FakeCompute(lifetime_s=60.0) as f:
        f.set_quota("NVIDIA_A100_GPUS", 16, region="us-central1")
        f.set_quota("GPUS_ALL_REGIONS", 24)
        yield f


def _config(fake: FakeCompute, **extra: object) -> DaemonConfig:
    options = {
        "project": PROJECT,
        "endpoint": fake.url,
        "anonymous": True,
        "regions": "us-central1",
        "instance_types": "a2-highgpu-1g",
        **extra,
    }
    return DaemonConfig.model_validate(
        {"owner": "team-a", "market": "gcp", "market_options": options}
    )


def test_a_cloud_market_carries_the_quotas(fake: FakeCompute) -> None:
    snap = open_config_market(_config(fake)).snapshot()
    assert {(q.key, q.limit) for q in snap.quotas} == {
        ("gcp/us-central1/NVIDIA_A100_GPUS/any", 16.0),  # no preemptible metric: any tier
        ("gcp/*/GPUS_ALL_REGIONS/any", 24.0),
    }
    assert "compute.regions.get" in fake.calls


def test_read_quotas_false_reads_none(fake: FakeCompute) -> None:
    snap = open_config_market(_config(fake, read_quotas=False)).snapshot()
    assert snap.quotas == ()
    assert "compute.regions.get" not in fake.calls


def test_the_default_market_has_no_quotas() -> None:
    market = open_config_market(
        DaemonConfig.model_validate({"owner": "team-a", "market": "default"})
    )
    assert market.snapshot().quotas == ()
