"""The provider contract, run over every provider in ``markets.registry``.

Every registered provider must have an offline opener here (a new provider
without one fails ``test_every_registered_provider_has_an_offline_opener``):
``aws`` is boto3 against moto's HTTP server, ``gcp`` the real REST clients
against the fake Compute Engine (``tests/fakes/gcp.py``), ``sim`` the
simulated cloud over a tiny market. Each is opened through the registry, as
the daemon opens it.

Contract (``markets.protocols.Provider``), the same words for the three:

- **launch by idempotency key**: the same request twice launches once; the
  second answer is ``replayed`` with the same instances, listed once;
- **listing by owner tag**: ``list_fleet(owner)`` lists the owner's
  instances and never another owner's;
- **partial terminate** (least privilege): the owner's ids end, another
  owner's are refused with ``ok=False``, ``ErrorKind.INPUT`` and their ids in
  ``error``, and keep running; an accepted terminate sent again answers
  ``replayed`` with the same ids;
- **capacity**: a pool out of capacity raises ``CapacityUnavailableError``
  naming the pool (the caller tries the next one), launching nothing;
- **throttling**: a launch throttled past the provider's own retries raises
  ``ThrottledError`` (a ``TransientError``: retry later), launching nothing;
- **quota**: a launch past an account quota (EC2's ``VcpuLimitExceeded``,
  GCP's ``QUOTA_EXCEEDED`` from the fake's GPU quota) raises
  ``QuotaExceededError`` (``ErrorKind.QUOTA``: the daemon tries elsewhere),
  launching nothing;
- **reservations** (AWS, ``use_reservations``): an on-demand launch goes into
  the held Capacity Block or ODCR of its pool that is active with room for
  it (a Capacity Block with the ``capacity-block`` market type); spot, or no
  such reservation, launches as before; a replay reads and sends nothing.
"""

from __future__ import annotations

import functools
import importlib.util
import types
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from markets.clock import ManualClock
from markets.cloud_fleet import ErrorKind, LaunchRequest, TerminateRequest
from markets.errors import (
    CapacityUnavailableError,
    QuotaExceededError,
    ThrottledError,
    TransientError,
)
from markets.model import Tier
from markets.protocols import Provider
from markets.registry import PROVIDERS

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


@dataclass
class Rig:
    """One provider, opened offline for the contract.

    ``provider`` acts for ``owner``; ``other`` for ``other_owner`` in the same
    account (the simulated cloud serves every owner: there it is the same
    object). ``stockout()`` takes ``pool``'s capacity away; ``throttle()``
    makes every later launch call throttled.
    """

    provider: Provider
    owner: str
    other: Provider
    other_owner: str
    pool: str
    stockout: Callable[[], None]
    throttle: Callable[[], None]
    quota_full: Callable[[], None]


# -- openers -----------------------------------------------------------------------

AWS_REGION = "us-east-1"
AWS_AMI = "ami-03cf127a"  # one of moto's built-in us-east-1 images


def _aws_fault(client: Any, action: str, code: str, status: int) -> None:
    """Answer every ``action`` call with an AWS error, before it is sent (so
    botocore's own retry handler sees it as it would a server reply)."""
    from botocore.awsrequest import AWSResponse

    body = (
        f"<Response><Errors><Error><Code>{code}</Code><Message>injected</Message>"
        "</Error></Errors><RequestID>r</RequestID></Response>"
    ).encode()

    def reply(request: Any, **_: Any) -> AWSResponse:
        raw = types.SimpleNamespace(stream=lambda **_: iter([body]))
        return AWSResponse(request.url, status, {}, raw)  # type: ignore[arg-type]

    client.meta.events.register(f"before-send.ec2.{action}", reply)


@functools.cache
def _aws_session() -> Any:
    """One boto3 session for the module: a client built from it reuses the
    loaded service models (a fresh session costs ~0.5 s per provider)."""
    import boto3

    return boto3.Session(
        region_name=AWS_REGION, aws_access_key_id="testing", aws_secret_access_key="testing"
    )


def _open_aws(request: pytest.FixtureRequest, stack: ExitStack) -> Rig:
    import botocore.endpoint

    monkeypatch: pytest.MonkeyPatch = request.getfixturevalue("monkeypatch")
    for var in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    # botocore's retry back-off: not slept (the retries themselves still run).
    monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=lambda s: None))
    url: str = request.getfixturevalue("moto_server")
    session = _aws_session()
    owner = f"contract-{uuid.uuid4().hex[:12]}"  # moto's server is shared by the session

    def open_(who: str) -> Provider:
        return PROVIDERS.get("aws")(
            owner=who,
            endpoint_url=url,
            session=session,
            retry_mode="standard",
            max_attempts=2,
            launch={AWS_REGION: {"image_id": AWS_AMI}},
        )

    provider = open_(owner)
    ec2 = provider.ec2_clients[AWS_REGION]  # type: ignore[attr-defined]
    return Rig(
        provider=provider,
        owner=owner,
        other=open_(owner + "-other"),
        other_owner=owner + "-other",
        pool=f"aws/{AWS_REGION}/us-east-1b/g5.xlarge",
        stockout=lambda: _aws_fault(ec2, "RunInstances", "InsufficientInstanceCapacity", 500),
        throttle=lambda: _aws_fault(ec2, "RunInstances", "RequestLimitExceeded", 503),
        quota_full=lambda: _aws_fault(ec2, "RunInstances", "VcpuLimitExceeded", 400),
    )


GCP_ZONE = "us-central1-a"
GCP_TYPE = "a2-highgpu-1g"


def _open_gcp(request: pytest.FixtureRequest, stack: ExitStack) -> Rig:
    from markets.gcp.sdk import CallPolicy
    from tests.fakes.gcp import FakeCompute

    clock = ManualClock(T0)
    fake = stack.enter_context(FakeCompute(now=clock.now, lifetime_s=60.0))
    # api-core retries 429 for up to retry_timeout_s: kept short here.
    policy = CallPolicy(retry_timeout_s=0.3, initial_s=0.01, maximum_s=0.05, request_s=5.0)

    def open_(who: str) -> Provider:
        return PROVIDERS.get("gcp")(
            project=fake.project,
            owner=who,
            zones=[GCP_ZONE, "us-central1-b"],
            source_image="projects/debian-cloud/global/images/family/debian-12",
            endpoint=fake.url,
            anonymous=True,
            clock=clock,
            policy=policy,
        )

    return Rig(
        provider=open_("team-ml"),
        owner="team-ml",
        other=open_("team-other"),
        other_owner="team-other",
        pool=f"gcp/us-central1/{GCP_ZONE}/{GCP_TYPE}",
        stockout=lambda: fake.stockout(GCP_ZONE, GCP_TYPE),
        throttle=lambda: fake.fail_next(
            "compute.instances.insert", 429, "rateLimitExceeded", times=10_000
        ),
        quota_full=lambda: [fake.set_quota(m, 0, region="us-central1")  # type: ignore[arg-type, func-returns-value]
                            for m in ("NVIDIA_A100_GPUS", "PREEMPTIBLE_NVIDIA_A100_GPUS")],
    )  # fmt: skip


def _open_sim(request: pytest.FixtureRequest, stack: ExitStack) -> Rig:
    from markets.sim.cloud import SimCloud
    from tests.fakes.tiny_market import T0 as TINY_T0
    from tests.fakes.tiny_market import TinyMarket, pool_key

    cloud = PROVIDERS.get("sim")(market=TinyMarket(), clock=ManualClock(TINY_T0), seed=1)
    assert isinstance(cloud, SimCloud)
    pool = pool_key("a")
    return Rig(
        provider=cloud,
        owner="team-ml",
        other=cloud,
        other_owner="team-other",
        pool=pool,
        stockout=lambda: cloud.exhaust(pool, until=TINY_T0 + timedelta(days=1)),
        throttle=lambda: cloud.inject("launch", ThrottledError("sim: throttled"), times=10_000),
        quota_full=lambda: cloud.inject("launch", QuotaExceededError("sim: quota"), times=10_000),
    )


OPENERS: dict[str, Callable[[pytest.FixtureRequest, ExitStack], Rig]] = {
    "aws": _open_aws,
    "gcp": _open_gcp,
    "sim": _open_sim,
}


def test_every_registered_provider_has_an_offline_opener() -> None:
    assert set(OPENERS) == set(PROVIDERS)


def test_every_registered_provider_module_exists() -> None:
    # Checked without importing: a target naming no module is a registry bug.
    for name in PROVIDERS:
        target = PROVIDERS.target(name)
        assert target is not None, name
        assert importlib.util.find_spec(target.split(":")[0]) is not None, target


@pytest.fixture(params=sorted(PROVIDERS))
def rig(request: pytest.FixtureRequest) -> Iterator[Rig]:
    with ExitStack() as stack:
        yield OPENERS[request.param](request, stack)


def _launch(rig: Rig, owner: str, count: int = 2, key: str | None = None) -> LaunchRequest:
    return LaunchRequest(
        idempotency_key=key or f"contract-{uuid.uuid4().hex[:16]}",
        pool_key=rig.pool,
        tier=Tier.SPOT,
        workload="train",
        count=count,
        owner=owner,
        plan_generation=3,
    )


def _ids(provider: Provider, owner: str) -> set[str]:
    return {i.instance_id for i in provider.list_fleet(owner)}


# -- the contract ------------------------------------------------------------------


def test_the_same_launch_twice_launches_once_and_replays_the_same_instances(rig: Rig) -> None:
    req = _launch(rig, rig.owner)
    first = rig.provider.launch(req)
    again = rig.provider.launch(req)
    assert first.ok and not first.replayed and len(first.instance_ids) == 2
    assert again.ok and again.replayed and set(again.instance_ids) == set(first.instance_ids)
    assert _ids(rig.provider, rig.owner) == set(first.instance_ids)
    assert all(i.pool_key == rig.pool for i in rig.provider.list_fleet(rig.owner))


def test_the_fleet_is_listed_by_owner_tag(rig: Rig) -> None:
    ours = rig.provider.launch(_launch(rig, rig.owner)).instance_ids
    theirs = rig.other.launch(_launch(rig, rig.other_owner, count=1)).instance_ids
    assert _ids(rig.provider, rig.owner) == set(ours)
    assert _ids(rig.other, rig.other_owner) == set(theirs)


def test_a_terminate_ends_ours_and_refuses_another_owners_with_one_error_kind(rig: Rig) -> None:
    ours = rig.provider.launch(_launch(rig, rig.owner)).instance_ids
    theirs = rig.other.launch(_launch(rig, rig.other_owner, count=1)).instance_ids
    res = rig.provider.terminate(
        TerminateRequest(
            idempotency_key=f"contract-term-{uuid.uuid4().hex[:8]}",
            instance_ids=(*ours, *theirs),
            owner=rig.owner,
        )
    )
    assert not res.ok and res.error_kind is ErrorKind.INPUT
    assert set(res.instance_ids) == set(ours)
    assert all(t in (res.error or "") for t in theirs)
    assert not any(o in (res.error or "") for o in ours)
    assert _ids(rig.provider, rig.owner) == set()
    assert _ids(rig.other, rig.other_owner) == set(theirs)


def test_an_accepted_terminate_sent_again_is_a_replay(rig: Rig) -> None:
    ours = rig.provider.launch(_launch(rig, rig.owner)).instance_ids
    req = TerminateRequest(
        idempotency_key=f"contract-term-{uuid.uuid4().hex[:8]}", instance_ids=ours, owner=rig.owner
    )
    first = rig.provider.terminate(req)
    again = rig.provider.terminate(req)
    assert first.ok and set(first.instance_ids) == set(ours)
    assert again.ok and again.replayed and set(again.instance_ids) == set(ours)
    assert _ids(rig.provider, rig.owner) == set()


def test_a_pool_out_of_capacity_raises_capacity_unavailable_naming_it(rig: Rig) -> None:
    rig.stockout()
    with pytest.raises(CapacityUnavailableError) as info:
        rig.provider.launch(_launch(rig, rig.owner))
    assert info.value.pool_key == rig.pool
    assert _ids(rig.provider, rig.owner) == set()


def test_a_launch_throttled_past_the_retries_raises_a_transient_throttled_error(rig: Rig) -> None:
    rig.throttle()
    with pytest.raises(ThrottledError) as info:
        rig.provider.launch(_launch(rig, rig.owner))
    assert isinstance(info.value, TransientError)
    assert _ids(rig.provider, rig.owner) == set()


def test_a_launch_past_an_account_quota_raises_quota_exceeded(rig: Rig) -> None:
    rig.quota_full()
    with pytest.raises(QuotaExceededError):
        rig.provider.launch(_launch(rig, rig.owner))
    assert _ids(rig.provider, rig.owner) == set()


# -- launching into a held reservation (AWS) ---------------------------------------
# moto serves RunInstances; it has no Capacity Reservations API, so the
# provider reads the held ones through a botocore Stubber on a second client
# (in production the same EC2 client does both).

RESERVED_POOL = f"aws/{AWS_REGION}/us-east-1b/p5.48xlarge"
NOW = datetime(2026, 12, 7, 12, tzinfo=UTC)


def _held_row(rid: str, rtype: str, free: int, start: datetime, zone: str = "us-east-1b"
              ) -> dict[str, Any]:  # fmt: skip
    return {"CapacityReservationId": rid, "InstanceType": "p5.48xlarge",
            "AvailabilityZone": zone, "TotalInstanceCount": 4, "AvailableInstanceCount": free,
            "State": "active", "StartDate": start, "EndDate": start + timedelta(days=7),
            "ReservationType": rtype, "EndDateType": "limited"}  # fmt: skip


def _reserving_aws(request: pytest.FixtureRequest, rows: list[dict[str, Any]]
                   ) -> tuple[Provider, list[dict[str, Any]], Any]:  # fmt: skip
    """An AWS provider over moto that reads ``rows`` as the held reservations,
    the RunInstances parameters it sends, and the Stubber (to check it was read)."""
    from botocore.stub import Stubber

    from markets.aws.provider import AwsProvider
    from markets.aws.settings import settings_from_options

    rig = _open_aws(request, ExitStack())
    ec2 = rig.provider.ec2_clients[AWS_REGION]  # type: ignore[attr-defined]
    sent: list[dict[str, Any]] = []
    ec2.meta.events.register("provide-client-params.ec2.RunInstances",
                             lambda params, **_: sent.append(dict(params)))  # fmt: skip
    reader = _aws_session().client("ec2", region_name=AWS_REGION)
    stub = Stubber(reader)
    usable = {"Filters": [{"Name": "state", "Values": ["active", "scheduled"]}]}
    stub.add_response("describe_capacity_reservations", {"CapacityReservations": rows}, usable)
    stub.activate()
    settings = settings_from_options({"owner": rig.owner, "use_reservations": True,
                                      "launch": {AWS_REGION: {"image_id": AWS_AMI}}})  # fmt: skip
    provider = AwsProvider(owner=rig.owner, ec2_clients={AWS_REGION: ec2},
                           launch=settings.launch, reservations={AWS_REGION: reader},
                           now=lambda: NOW)  # fmt: skip
    return provider, sent, stub


@pytest.mark.parametrize(
    "rtype,market",
    [("capacity-block", {"MarketType": "capacity-block"}), ("default", None)],
    ids=["capacity-block", "odcr"],
)
def test_aws_on_demand_launch_goes_into_the_held_reservation(
    request: pytest.FixtureRequest, rtype: str, market: dict[str, str] | None
) -> None:
    rows = [_held_row("cr-later", rtype, 2, NOW + timedelta(hours=1)),  # not started yet
            _held_row("cr-elsewhere", rtype, 2, NOW, zone="us-east-1a"),
            _held_row("cr-small", rtype, 1, NOW),  # no room for 2
            _held_row("cr-0a1", rtype, 2, NOW - timedelta(hours=1))]  # fmt: skip
    provider, sent, stub = _reserving_aws(request, rows)
    req = LaunchRequest(idempotency_key=f"contract-{uuid.uuid4().hex[:16]}",
                        pool_key=RESERVED_POOL, tier=Tier.ON_DEMAND, workload="finetune",
                        count=2, owner=provider.owner, plan_generation=1)  # type: ignore[attr-defined]  # fmt: skip
    result = provider.launch(req)
    stub.assert_no_pending_responses()
    assert result.ok and len(result.instance_ids) == 2
    [params] = sent
    assert params["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": "cr-0a1"}}  # fmt: skip
    assert params.get("InstanceMarketOptions") == market
    again = provider.launch(req)  # the same key: replayed, nothing sent, nothing read
    assert again.replayed and set(again.instance_ids) == set(result.instance_ids)
    assert len(sent) == 1


def test_aws_spot_and_launches_without_a_fitting_reservation_target_none(
    request: pytest.FixtureRequest,
) -> None:
    provider, sent, stub = _reserving_aws(request, [_held_row("cr-small", "default", 1, NOW)])
    owner = provider.owner  # type: ignore[attr-defined]
    for tier in (Tier.SPOT, Tier.ON_DEMAND):  # spot reads none; on-demand finds no room for 2
        provider.launch(LaunchRequest(idempotency_key=f"contract-{uuid.uuid4().hex[:16]}",
                                      pool_key=RESERVED_POOL, tier=tier, workload="w", count=2,
                                      owner=owner, plan_generation=1))  # fmt: skip
    stub.assert_no_pending_responses()
    assert [p.get("CapacityReservationSpecification") for p in sent] == [None, None]
    assert sent[0]["InstanceMarketOptions"]["MarketType"] == "spot"
    assert "InstanceMarketOptions" not in sent[1]
