"""What the GCP project owns, read from the local Compute Engine fake
(tests/fakes/gcp.py: regionCommitments.aggregatedList, paginated)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from markets.commitments import CommitmentKind, PaymentOption
from markets.errors import InputError
from markets.gcp.commitments import GcpCommitments
from markets.gcp.sdk import GCP_COMMITMENT_API_CALLS, CallPolicy, build_compute_clients
from tests.fakes.gcp import FakeCompute

START = datetime(2026, 1, 1, tzinfo=UTC)
END = datetime(2027, 1, 1, tzinfo=UTC)
FAST = CallPolicy(retry_timeout_s=2.0, initial_s=0.05, maximum_s=0.1, request_s=5.0)


@pytest.fixture
def fake() -> Iterator[FakeCompute]:
    with FakeCompute(lifetime_s=60.0, page_size=1) as f:
        yield f


def _reader(fake: FakeCompute) -> GcpCommitments:
    client = build_compute_clients(endpoint=fake.url, anonymous=True).region_commitments
    assert client is not None
    return GcpCommitments(client, fake.project, policy=FAST)


def test_gpu_commitments_are_read_as_machines_across_pages(fake: FakeCompute) -> None:
    fake.add_commitment(
        "us-east1", "cud-l4", accelerator="nvidia-l4", amount=30, start=START, end=END
    )
    fake.add_commitment(
        "us-central1",
        "cud-h100",
        accelerator="nvidia-h100-80gb",
        amount=16,
        start=START,
        end=END,
        plan="THIRTY_SIX_MONTH",
    )
    fake.add_commitment("us-central1", "cud-cpu", accelerator=None, amount=96, start=START, end=END)
    fake.add_commitment(
        "us-central1",
        "cud-old",
        accelerator="nvidia-l4",
        amount=8,
        start=START,
        end=END,
        status="EXPIRED",
    )
    owned = {c.id: c for c in _reader(fake).owned()}
    assert set(owned) == {"cud-l4", "cud-h100"}  # vCPU-only and expired skipped
    l4, h100 = owned["cud-l4"], owned["cud-h100"]
    assert l4.group == "gcp/us-east1/g2-standard-4" and l4.count == 30
    assert h100.group == "gcp/us-central1/a3-highgpu-8g" and h100.count == 2
    assert l4.kind is CommitmentKind.CUD and l4.payment is PaymentOption.NO_UPFRONT
    assert (l4.start, l4.end) == (START, END)
    assert set(fake.calls) == GCP_COMMITMENT_API_CALLS


def test_an_accelerator_without_a_machine_type_is_named(fake: FakeCompute) -> None:
    fake.add_commitment(
        "us-east1", "cud-t4", accelerator="nvidia-tesla-t4", amount=4, start=START, end=END
    )
    with pytest.raises(InputError, match=r"us-east1/cud-t4\.resources\.acceleratorType"):
        _reader(fake).owned()
