"""The GCP provider against a local fake of the Compute Engine REST API.

Real google-cloud-compute REST clients talk HTTP to ``tests/fakes/gcp.py``; the
fake and the provider share one ``ManualClock`` so that preemption times and
deadlines are exact. Each test starts its own fake (they launch and delete).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from broker.jsondoc import at, obj
from broker.lifecycle import LifecycleManager
from broker.lifecycle.values import DecisionKind
from markets.clock import ManualClock
from markets.cloud_fleet import (
    OWNER_TAG,
    WORKLOAD_TAG,
    InstanceState,
    LaunchRequest,
    NoticeKind,
    TerminateRequest,
)
from markets.errors import AuthError, CapacityUnavailableError, InputError, QuotaExceededError
from markets.gcp.labels import (
    LAUNCH_KEY_TAG,
    OWNER_LABEL,
    instance_name,
    label_value,
    request_id,
)
from markets.gcp.market import open_gcp_market
from markets.gcp.preemption import OVERLAP_S
from markets.gcp.provider import GcpProvider
from markets.gcp.sdk import (
    GCP_API_CALLS,
    GCP_COMMITMENT_API_CALLS,
    GCP_MARKET_API_CALLS,
    GCP_PROVIDER_API_CALLS,
    GCP_QUOTA_API_CALLS,
    CallPolicy,
    build_compute_clients,
)
from markets.model import Tier
from markets.protocols import Provider
from markets.registry import open_provider
from policies.workloads.spec import WorkloadSet
from tests.fakes.gcp import FakeCompute

PROJECT = "spotfolio-test"
OWNER = "team-ml"
ZONE = "us-central1-a"
POOL = f"gcp/us-central1/{ZONE}/a2-highgpu-1g"
T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
FAST = CallPolicy(retry_timeout_s=1.0, initial_s=0.01, maximum_s=0.05, request_s=5.0)
IMAGE = "projects/debian-cloud/global/images/family/debian-12"
LABEL = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def fake(clock: ManualClock) -> Iterator[FakeCompute]:
    with FakeCompute(now=clock.now, lifetime_s=60.0) as f:
        yield f


def provider(fake: FakeCompute, clock: ManualClock, **options: object) -> GcpProvider:
    opts: dict[str, object] = {
        "project": PROJECT,
        "owner": OWNER,
        "zones": [ZONE, "us-central1-b"],
        "source_image": IMAGE,
        "endpoint": fake.url,
        "anonymous": True,
        "clock": clock,
        "policy": FAST,
        **options,
    }
    p = open_provider("gcp", **opts)
    assert isinstance(p, GcpProvider)
    return p


def launch_request(
    key: str = "gen7-train-a2-0001", count: int = 1, tier: Tier = Tier.SPOT, pool: str = POOL
) -> LaunchRequest:
    return LaunchRequest(
        idempotency_key=key,
        pool_key=pool,
        tier=tier,
        workload="LLM.Train",
        count=count,
        owner=OWNER,
        plan_generation=7,
    )


def inserted_bodies(fake: FakeCompute) -> list[Mapping[str, object]]:
    """The instance bodies the fake was sent (its JSON, camelCase), by zone and name."""
    return [i for (_, _), i in sorted(fake.instances.items())]


def test_launches_a_spot_vm_with_delete_on_preemption_and_valid_labels(
    fake: FakeCompute, clock: ManualClock
) -> None:
    p = provider(fake, clock)
    assert isinstance(p, Provider)
    result = p.launch(launch_request(count=2))
    assert result.ok and not result.replayed
    assert result.instance_ids == tuple(
        f"{ZONE}/{instance_name(OWNER, 'gen7-train-a2-0001', i)}" for i in range(2)
    )
    for body in inserted_bodies(fake):
        assert at(body, "scheduling", "provisioningModel") == "SPOT"
        assert at(body, "scheduling", "instanceTerminationAction") == "DELETE"
        assert at(body, "scheduling", "onHostMaintenance") == "TERMINATE"
        assert at(body, "labels", OWNER_LABEL) == OWNER
        labels = obj(body["labels"])
        assert all(LABEL.match(k) and VALUE.match(str(v)) for k, v in labels.items())
    fleet = p.list_fleet(OWNER)
    assert [i.instance_id for i in fleet] == list(result.instance_ids)
    vm = fleet[0]
    assert (vm.tier, vm.state, vm.units, vm.pool_key) == (Tier.SPOT, InstanceState.RUNNING, 1, POOL)
    assert vm.workload == "LLM.Train"  # exact, from metadata (the label is lowercased)
    assert vm.tags[OWNER_TAG] == OWNER and vm.tags[LAUNCH_KEY_TAG] == "gen7-train-a2-0001"


def test_the_same_launch_twice_creates_once(fake: FakeCompute, clock: ManualClock) -> None:
    p = provider(fake, clock)
    first = p.launch(launch_request(count=2))
    again = p.launch(launch_request(count=2))
    assert again.replayed and again.instance_ids == first.instance_ids
    assert len(fake.instances) == 2
    assert fake.calls["compute.instances.insert"] == 2


def test_a_retried_insert_with_the_same_request_id_creates_one_vm(
    fake: FakeCompute, clock: ManualClock
) -> None:
    # The VM is created, then the reply is lost (503): api-core retries the
    # same request, requestId included, and Compute Engine answers with the
    # first operation.
    fake.fail_next("compute.instances.insert", 503, "backendError", after=True)
    result = provider(fake, clock).launch(launch_request())
    assert result.ok and len(fake.instances) == 1
    ids = [q["requestId"] for m, _, q in fake.requests if m == "compute.instances.insert"]
    assert len(ids) == 2 and ids[0] == ids[1] == request_id(OWNER, "gen7-train-a2-0001", 0)


def test_a_name_already_taken_counts_as_launched(
    fake: FakeCompute, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = provider(fake, clock)
    p.launch(launch_request())
    monkeypatch.setattr(p, "launched_by", lambda zone, key: {})  # a stale list
    result = p.launch(launch_request())
    assert result.ok and len(fake.instances) == 1


def test_quota_errors_fail_fast_http_and_operation(fake: FakeCompute, clock: ManualClock) -> None:
    p = provider(fake, clock)
    fake.quota("a2-highgpu-1g")
    with pytest.raises(QuotaExceededError, match=r"(?i)quota"):
        p.launch(launch_request(key="quota-http-0001"))
    assert fake.calls["compute.instances.insert"] == 1  # 403: not retried
    fake.quota("a2-highgpu-1g", mode="operation")
    with pytest.raises(QuotaExceededError):
        p.launch(launch_request(key="quota-op-0001"))
    assert not fake.instances


def test_a_stockout_is_capacity_unavailable_and_a_later_retry_can_succeed(
    fake: FakeCompute, clock: ManualClock
) -> None:
    p = provider(fake, clock)
    fake.stockout(ZONE, "a2-highgpu-1g")
    with pytest.raises(CapacityUnavailableError) as caught:
        p.launch(launch_request())
    assert caught.value.pool_key == POOL
    fake.stockout(ZONE, "a2-highgpu-1g", spare=-1)
    result = p.launch(launch_request())
    assert result.ok and len(fake.instances) == 1
    # A failed request id answers "failed" forever: the retry used a new one.
    ids = [q["requestId"] for m, _, q in fake.requests if m == "compute.instances.insert"]
    assert len(set(ids)) == 2


def test_a_gang_cut_short_by_a_stockout_is_completed_by_a_retry(
    fake: FakeCompute, clock: ManualClock
) -> None:
    p = provider(fake, clock)
    fake.stockout(ZONE, "a2-highgpu-1g", spare=1)
    with pytest.raises(CapacityUnavailableError):
        p.launch(launch_request(count=3))
    assert len(p.list_fleet(OWNER)) == 1  # kept, labelled, visible to the reconciler
    fake.stockout(ZONE, "a2-highgpu-1g", spare=-1)
    result = p.launch(launch_request(count=3))
    assert result.ok and not result.replayed and len(result.instance_ids) == 3
    assert len(fake.instances) == 3
    assert fake.calls["compute.instances.insert"] == 3 + 2


def test_delete_refuses_vms_without_our_label(fake: FakeCompute, clock: ManualClock) -> None:
    p = provider(fake, clock)
    ours = p.launch(launch_request()).instance_ids[0]
    fake.add_instance(ZONE, "web-1", "n2-standard-8", labels={"team": "web"})
    fake.add_instance(ZONE, "other-1", "n2-standard-8", labels={OWNER_LABEL: "team-other"})
    asked = (ours, f"{ZONE}/web-1", f"{ZONE}/other-1", "i-0123456789")
    result = p.terminate(
        TerminateRequest(idempotency_key="term-0001", instance_ids=asked, owner=OWNER)
    )
    assert not result.ok and result.error_kind == "input"
    assert result.instance_ids == (ours,)
    assert set(fake.instances) == {(ZONE, "web-1"), (ZONE, "other-1")}
    assert fake.calls["compute.instances.delete"] == 1


def test_deleting_what_is_gone_is_a_replay(fake: FakeCompute, clock: ManualClock) -> None:
    p = provider(fake, clock)
    gone = f"{ZONE}/{instance_name(OWNER, 'never-launched', 0)}"
    result = p.terminate(
        TerminateRequest(idempotency_key="term-0002", instance_ids=(gone,), owner=OWNER)
    )
    assert result.ok and result.replayed and result.instance_ids == (gone,)
    assert fake.calls["compute.instances.delete"] == 0


def test_list_fleet_shows_only_ours_and_stopped_vms_as_stopping(
    fake: FakeCompute, clock: ManualClock
) -> None:
    p = provider(fake, clock, termination_action="STOP")
    ours = p.launch(launch_request()).instance_ids[0]
    fake.add_instance(ZONE, "other-1", "n2-standard-8", labels={OWNER_LABEL: "team-other"})
    zone, name = ours.split("/")
    fake.preempt(zone, name)  # STOP: the VM stays, TERMINATED
    fleet = p.list_fleet(OWNER)
    assert [(i.instance_id, i.state) for i in fleet] == [(ours, InstanceState.STOPPING)]


def test_a_preemption_becomes_one_notice_inside_the_30s_window(
    fake: FakeCompute, clock: ManualClock
) -> None:
    p = provider(fake, clock)
    vm = p.launch(launch_request()).instance_ids[0]
    clock.advance(600)
    zone, name = vm.split("/")
    op = fake.preempt(zone, name, at=clock.now())
    clock.advance(4)  # the next notice poll
    notices = p.poll_notices()
    assert len(notices) == 1
    n = notices[0]
    assert (n.kind, n.notice_id, n.instance_id, n.pool_key) == (
        NoticeKind.PREEMPTED,
        op["id"],
        vm,
        POOL,
    )
    assert n.at == clock.now() - timedelta(seconds=4)
    assert n.deadline == n.at + timedelta(seconds=30)
    assert clock.now() < n.deadline  # seen inside the window
    assert p.poll_notices() == []  # the same operation is not a new notice
    p.ack_notice(n)  # a no-op: operations are a log, not a queue


def test_a_preemption_flows_into_a_lifecycle_decision_inside_the_window(
    fake: FakeCompute, clock: ManualClock, tmp_path: Path
) -> None:
    """Fake Compute Engine -> GcpMarket snapshot + GcpProvider fleet ->
    preemption operation -> Notice -> LifecycleManager decision, all before
    the 30 s deadline; a 60 s checkpoint is known not to fit GCP's window."""

    def batch(name: str, write_s: float) -> dict[str, object]:
        return {
            "name": name,
            "class": "batch",
            "instance_types": ["a2-highgpu-1g"],
            "unit_hours": 500,
            "checkpoint_write_seconds": write_s,
        }

    workloads = WorkloadSet.model_validate(
        {"workloads": [batch("sweeps-slow", 60.0), batch("sweeps-fast", 20.0)]}
    )
    prices = tmp_path / "prices.csv"
    prices.write_text(
        "snapshot_date,generated,machine_type,region,hour,hour_spot,month,month_1y,month_3y\n"
        "2026-02-15,,a2-highgpu-1g,us-central1,3.6,1.5,2628,1460,730\n"
    )
    market = open_gcp_market(
        project=PROJECT,
        clients=build_compute_clients(endpoint=fake.url, anonymous=True),
        instance_types=["a2-highgpu-1g"],
        prices=prices,
        clock=clock,
        policy=FAST,
    )
    p = provider(fake, clock)
    lost = {}
    for w in workloads.workloads:
        req = launch_request(key=f"gen7-{w.name}-0001").model_copy(update={"workload": w.name})
        lost[w.name] = p.launch(req).instance_ids[0]
    fleet = p.list_fleet(OWNER)
    manager = LifecycleManager(workloads, clock)
    clock.advance(600)
    for iid in lost.values():
        zone, name = iid.split("/")
        fake.preempt(zone, name, at=clock.now())
    clock.advance(3)
    snapshot = market.snapshot()
    decisions = {}
    for n in p.poll_notices():
        d = manager.handle(n, fleet, snapshot)
        assert n.deadline is not None and d.decided_at < n.deadline
        decisions[d.workload] = d
    assert set(decisions) == set(lost)
    for workload, d in decisions.items():
        assert workload is not None and d.lost_instance_id == lost[workload]
        assert d.checkpoint is not None and d.checkpoint.window_s == 30.0
        # Same spot price in the region's other zones: replaced there.
        assert d.kind is DecisionKind.REPLACE, d.reason
        assert [(x.tier, x.count) for x in d.launches] == [(Tier.SPOT, 1)]
        assert d.launches[0].pool_key != POOL  # not back into the lost pool
    fast = decisions["sweeps-fast"].checkpoint
    assert fast is not None and fast.fits
    slow = decisions["sweeps-slow"].checkpoint
    assert slow is not None and not slow.fits and "last periodic checkpoint" in slow.note


def test_foreign_and_old_preemptions_are_not_notices(fake: FakeCompute, clock: ManualClock) -> None:
    p = provider(fake, clock)  # looks back 600 s at first
    old = fake.add_instance(ZONE, instance_name(OWNER, "old-key-0001", 0), "a2-highgpu-1g")
    fake.preempt(ZONE, old["name"], at=clock.now() - timedelta(seconds=900))
    fake.add_instance(ZONE, "web-1", "n2-standard-8")
    fake.preempt(ZONE, "web-1", at=clock.now())
    assert p.poll_notices() == []
    assert p.notices.foreign == 1


def test_later_polls_stop_at_the_cursor(fake: FakeCompute, clock: ManualClock) -> None:
    p = provider(fake, clock)
    for i in range(5):
        vm = fake.add_instance(ZONE, instance_name(OWNER, f"key-{i:04d}-x", 0), "a2-highgpu-1g")
        fake.preempt(ZONE, vm["name"], at=clock.now() + timedelta(seconds=i))
    clock.advance(10)
    assert len(p.poll_notices(max_notices=3)) == 3
    assert len(p.poll_notices(max_notices=3)) == 2  # kept, not dropped
    clock.advance(OVERLAP_S + 60)
    assert p.poll_notices() == []  # reads back to the old cursor, then moves it
    vm = fake.add_instance(ZONE, instance_name(OWNER, "key-late-x", 0), "a2-highgpu-1g")
    fake.preempt(ZONE, vm["name"], at=clock.now())
    clock.advance(2)

    def pages() -> int:
        return sum(
            1 for m, path, _ in fake.requests if m == "compute.zoneOperations.list" and ZONE in path
        )

    before = pages()
    assert [n.instance_id for n in p.poll_notices()] == [f"{ZONE}/{vm['name']}"]
    # 6 operations at 2 a page; newest first, the first older than the cursor
    # (on page 1) ends the read.
    assert pages() - before == 1


def test_committed_and_template_launches(fake: FakeCompute, clock: ManualClock) -> None:
    p = provider(fake, clock, source_image=None, instance_template="global/instanceTemplates/gpu")
    vm = p.launch(launch_request(tier=Tier.COMMITTED)).instance_ids[0]
    body = inserted_bodies(fake)[0]
    assert at(body, "scheduling", "provisioningModel") == "STANDARD"
    assert "metadata" not in body  # the template's (and its startup script) stay
    query = next(q for m, _, q in fake.requests if m == "compute.instances.insert")
    assert query["sourceInstanceTemplate"] == "global/instanceTemplates/gpu"
    [listed] = p.list_fleet(OWNER)
    assert (listed.instance_id, listed.tier) == (vm, Tier.COMMITTED)
    assert listed.tags[WORKLOAD_TAG] == label_value("LLM.Train")  # labels only, lossy case


def test_permission_denied_on_insert_is_an_auth_error(
    fake: FakeCompute, clock: ManualClock
) -> None:
    fake.fail_next("compute.instances.insert", 403, "forbidden", info="IAM_PERMISSION_DENIED")
    with pytest.raises(AuthError):
        provider(fake, clock).launch(launch_request())


@pytest.mark.parametrize(
    ("options", "field"),
    [
        pytest.param({"owner": "Team ML"}, "owner", id="owner-not-a-label-value"),
        pytest.param({"instance_template": "global/instanceTemplates/x"}, None, id="two-sources"),
        pytest.param({"zones": ["us-central1"]}, "zones", id="region-not-zone"),
        pytest.param({"termination_action": "HIBERNATE"}, "termination_action", id="action"),
    ],
)
def test_bad_settings_name_the_option(
    fake: FakeCompute, clock: ManualClock, options: dict[str, object], field: str | None
) -> None:
    with pytest.raises(InputError, match=field or "exactly one"):
        provider(fake, clock, **options)


def test_pools_outside_the_configured_zones_are_refused(
    fake: FakeCompute, clock: ManualClock
) -> None:
    p = provider(fake, clock)
    with pytest.raises(InputError, match="configured zone"):
        p.launch(launch_request(pool="gcp/us-east1/us-east1-b/a2-highgpu-1g"))
    with pytest.raises(InputError, match="owner"):
        p.list_fleet("someone-else")


def test_a_full_round_calls_exactly_the_provider_manifest(
    fake: FakeCompute, clock: ManualClock
) -> None:
    p = provider(fake, clock)
    ids = p.launch(launch_request()).instance_ids
    p.list_fleet(OWNER)
    p.poll_notices()
    p.terminate(TerminateRequest(idempotency_key="term-0003", instance_ids=ids, owner=OWNER))
    assert set(fake.calls) == GCP_PROVIDER_API_CALLS
    assert GCP_API_CALLS == (
        GCP_MARKET_API_CALLS
        | GCP_PROVIDER_API_CALLS
        | GCP_COMMITMENT_API_CALLS
        | GCP_QUOTA_API_CALLS
    )


def test_labels_stay_valid_for_any_text() -> None:
    for text in ("LLM.Train", "a" * 200, "gcp/us-central1/us-central1-a/a2-highgpu-1g", "Ünï"):
        assert VALUE.match(label_value(text))
    assert label_value("a" * 200) != label_value("a" * 199)
    assert request_id(OWNER, "k" * 8, 0) == request_id(OWNER, "k" * 8, 0)
    assert request_id(OWNER, "k" * 8, 0, 1) != request_id(OWNER, "k" * 8, 0)
    assert json.loads(json.dumps(instance_name(OWNER, "k" * 64, 12)))
    assert re.match(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$", instance_name(OWNER, "k" * 64, 12))
