"""The AWS provider against moto's HTTP server (real HTTP on 127.0.0.1).

moto runs RunInstances / DescribeInstances / TerminateInstances for real
(tags, spot lifecycle, states). It does *not* honour ``ClientToken`` (a second
RunInstances with the same token launches again), so the idempotency tests
below check our own guarantee: the launch-key tag lookup. Errors are injected
*before send* on real clients, so botocore's own retry handler sees them as
it would a server reply. Every test uses its own owner id: the server is
shared by the session.
"""

from __future__ import annotations

import json
import types
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TypedDict, cast

import boto3
import botocore.endpoint
import pytest
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.client import BaseClient
from botocore.compat import HTTPHeaders

from markets.aws.launch import LAUNCH_KEY_TAG, TIER_TAG, UNITS_TAG
from markets.aws.provider import AwsProvider, open_aws_provider
from markets.aws.sdk import AWS_PROVIDER_API_CALLS
from markets.cloud_fleet import (
    GENERATION_TAG,
    OWNER_TAG,
    POOL_TAG,
    WORKLOAD_TAG,
    InstanceState,
    LaunchRequest,
    TerminateRequest,
)
from markets.errors import (
    AuthError,
    CapacityUnavailableError,
    InputError,
    QuotaExceededError,
    ThrottledError,
    TransientError,
)
from markets.model import Tier
from markets.protocols import Provider
from markets.registry import PROVIDERS, open_provider

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ec2.type_defs import InstanceTypeDef

REGION = "us-east-1"
ZONE = "us-east-1b"
POOL = f"aws/{REGION}/{ZONE}/g5.xlarge"
AMI = "ami-03cf127a"  # one of moto's built-in us-east-1 images


class _Creds(TypedDict):
    aws_access_key_id: str
    aws_secret_access_key: str


CREDS: _Creds = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
ATTEMPTS = 2  # botocore retries after the first try


@pytest.fixture(autouse=True)
def _no_real_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """Never reach real AWS from a test, whatever the environment holds."""
    for var in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """botocore's retry back-off sleeps, recorded instead of slept."""
    slept: list[float] = []
    monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=slept.append))
    return slept


@pytest.fixture
def owner() -> str:
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def raw_ec2(moto_server: str) -> EC2Client:
    """A plain client, for what another tool (not Spotfolio) would do."""
    return boto3.client("ec2", region_name=REGION, endpoint_url=moto_server, **CREDS)


# One session for the module: building a client from it reuses the loaded
# service models (a fresh session costs ~0.5 s per provider).
SESSION = boto3.Session(region_name=REGION, **CREDS)


def make_provider(url: str, owner: str, **options: object) -> AwsProvider:
    """Built the way the daemon builds it: through the registry's factory."""
    options.setdefault("launch", {REGION: {"image_id": AMI}})
    provider = open_aws_provider(
        owner=owner,
        endpoint_url=url,
        session=SESSION,
        retry_mode="standard",
        max_attempts=ATTEMPTS,
        **options,  # type: ignore[arg-type]
    )
    assert isinstance(provider, AwsProvider)
    return provider


@pytest.fixture
def provider(moto_server: str, owner: str) -> AwsProvider:
    return make_provider(moto_server, owner)


def request(owner: str, *, key: str | None = None, **over: object) -> LaunchRequest:
    fields: dict[str, object] = {
        "idempotency_key": key or f"launch-{uuid.uuid4().hex[:16]}",
        "pool_key": POOL,
        "tier": Tier.SPOT,
        "workload": "train-llm",
        "count": 2,
        "owner": owner,
        "plan_generation": 7,
    }
    return LaunchRequest.model_validate(fields | over)


def describe(ec2: EC2Client, ids: tuple[str, ...] | list[str]) -> dict[str, InstanceTypeDef]:
    reply = ec2.describe_instances(InstanceIds=list(ids))
    return {i["InstanceId"]: i for r in reply["Reservations"] for i in r["Instances"]}


def tags_of(item: InstanceTypeDef) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in item.get("Tags", [])}


def listed(value: object) -> list[object]:
    """A list in recorded API parameters."""
    assert isinstance(value, list)
    return value


class Calls:
    """Every API call a client makes, with its parameters."""

    def __init__(self, *clients: object) -> None:
        self.made: list[tuple[str, dict[str, object]]] = []
        for c in clients:
            assert isinstance(c, BaseClient)  # a boto3 client behind the provider's protocol
            c.meta.events.register("before-parameter-build.*.*", self)

    def __call__(self, event_name: str, params: dict[str, object], **_kwargs: object) -> None:
        _, service, action = event_name.split(".")
        self.made.append((f"{service}:{action}", dict(params)))

    def of(self, action: str) -> list[dict[str, object]]:
        return [p for a, p in self.made if a == action]


class Faults:
    """Answers an EC2 action with an AWS error before send, ``times`` times
    (``None``: always)."""

    def __init__(
        self, client: object, action: str, code: str, status: int, times: int | None = None
    ) -> None:
        self.code, self.status, self.left = code, status, times
        self.sent = 0
        assert isinstance(client, BaseClient)  # a boto3 client behind the provider's protocol
        # botocore-stubs type event handlers as returning None; a before-send
        # handler's answer is the response botocore uses instead of sending.
        client.meta.events.register(f"before-send.ec2.{action}", cast("Callable[..., None]", self))

    def __call__(self, request: AWSPreparedRequest, **_: object) -> AWSResponse | None:
        self.sent += 1
        if self.left is not None:
            if self.left <= 0:
                return None
            self.left -= 1
        body = (
            f"<Response><Errors><Error><Code>{self.code}</Code><Message>injected</Message>"
            "</Error></Errors><RequestID>r</RequestID></Response>"
        ).encode()
        raw = types.SimpleNamespace(stream=lambda **_: iter([body]))
        return AWSResponse(request.url, self.status, HTTPHeaders(), raw)


# -- launch --------------------------------------------------------------------


def test_launch_tags_instances_and_volumes_on_create(
    provider: AwsProvider, raw_ec2: EC2Client, owner: str
) -> None:
    req = request(owner)
    result = provider.launch(req)
    assert result.ok and not result.replayed and len(result.instance_ids) == 2
    items = describe(raw_ec2, result.instance_ids)
    for item in items.values():
        tags = tags_of(item)
        assert tags[OWNER_TAG] == owner
        assert tags[WORKLOAD_TAG] == "train-llm"
        assert tags[POOL_TAG] == POOL
        assert tags[GENERATION_TAG] == "7"
        assert tags[LAUNCH_KEY_TAG] == req.idempotency_key
        assert tags[TIER_TAG] == "spot"
        assert tags[UNITS_TAG] == "1"  # g5.xlarge: one A10G (catalog)
        assert item["InstanceLifecycle"] == "spot"
        assert item["Placement"]["AvailabilityZone"] == ZONE
        assert item["InstanceType"] == "g5.xlarge"
    volumes = raw_ec2.describe_volumes(Filters=[{"Name": f"tag:{OWNER_TAG}", "Values": [owner]}])
    attached = {a["InstanceId"] for v in volumes["Volumes"] for a in v["Attachments"]}
    assert attached == set(result.instance_ids)


def test_launch_sends_the_key_as_client_token_and_spot_one_time_terminate(
    provider: AwsProvider, owner: str
) -> None:
    calls = Calls(provider.ec2_clients[REGION])
    req = request(owner)
    provider.launch(req)
    (params,) = calls.of("ec2:RunInstances")
    assert params["ClientToken"] == req.idempotency_key
    assert params["MinCount"] == params["MaxCount"] == 2
    assert params["InstanceMarketOptions"] == {
        "MarketType": "spot",
        "SpotOptions": {
            "SpotInstanceType": "one-time",
            "InstanceInterruptionBehavior": "terminate",
        },
    }
    kinds: set[object] = set()
    for spec in listed(params["TagSpecifications"]):
        assert isinstance(spec, dict)
        kinds.add(spec["ResourceType"])
    assert kinds == {"instance", "volume"}


def test_on_demand_launch_has_no_spot_options(
    provider: AwsProvider, raw_ec2: EC2Client, owner: str
) -> None:
    calls = Calls(provider.ec2_clients[REGION])
    result = provider.launch(request(owner, tier=Tier.ON_DEMAND, count=1))
    assert "InstanceMarketOptions" not in calls.of("ec2:RunInstances")[0]
    (item,) = describe(raw_ec2, result.instance_ids).values()
    assert "InstanceLifecycle" not in item


def test_same_key_twice_launches_once_and_replays_the_first_instances(
    provider: AwsProvider, raw_ec2: EC2Client, owner: str
) -> None:
    calls = Calls(provider.ec2_clients[REGION])
    req = request(owner, key="gen7-train-llm-slot0")
    first = provider.launch(req)
    again = provider.launch(req)
    assert again.replayed and again.ok
    assert set(again.instance_ids) == set(first.instance_ids)
    assert len(calls.of("ec2:RunInstances")) == 1
    tagged = raw_ec2.describe_instances(
        Filters=[{"Name": f"tag:{LAUNCH_KEY_TAG}", "Values": [req.idempotency_key]}]
    )
    assert sum(len(r["Instances"]) for r in tagged["Reservations"]) == 2


def test_a_restarted_provider_recognises_what_a_key_launched(moto_server: str, owner: str) -> None:
    """A crash between RunInstances and recording it: the new process has no
    memory, only the cloud's tags."""
    req = request(owner)
    first = make_provider(moto_server, owner).launch(req)
    again = make_provider(moto_server, owner).launch(req)
    assert again.replayed and set(again.instance_ids) == set(first.instance_ids)


def test_launch_through_a_launch_template_and_subnet(
    moto_server: str, raw_ec2: EC2Client, owner: str
) -> None:
    vpc = raw_ec2.create_vpc(CidrBlock="10.7.0.0/16")["Vpc"]["VpcId"]
    subnet = raw_ec2.create_subnet(VpcId=vpc, CidrBlock="10.7.1.0/24", AvailabilityZone=ZONE)
    subnet_id = subnet["Subnet"]["SubnetId"]
    name = f"lt-{owner}"
    raw_ec2.create_launch_template(
        LaunchTemplateName=name, LaunchTemplateData={"ImageId": AMI, "InstanceType": "g5.xlarge"}
    )
    provider = make_provider(
        moto_server,
        owner,
        launch={REGION: {"launch_template_name": name, "subnets": {ZONE: subnet_id}}},
    )
    calls = Calls(provider.ec2_clients[REGION])
    result = provider.launch(request(owner, count=1))
    params = calls.of("ec2:RunInstances")[0]
    assert params["LaunchTemplate"] == {"LaunchTemplateName": name, "Version": "$Default"}
    assert "ImageId" not in params
    (item,) = describe(raw_ec2, result.instance_ids).values()
    assert item["SubnetId"] == subnet_id
    with pytest.raises(InputError, match=r"launch\.us-east-1\.subnets"):
        provider.launch(request(owner, pool_key=f"aws/{REGION}/us-east-1a/g5.xlarge"))


# -- list ----------------------------------------------------------------------


def test_list_fleet_returns_only_instances_with_our_owner_tag(
    provider: AwsProvider, raw_ec2: EC2Client, owner: str
) -> None:
    spot = provider.launch(request(owner, count=2))
    od = provider.launch(request(owner, count=1, tier=Tier.COMMITTED, workload="serve"))
    untagged = raw_ec2.run_instances(ImageId=AMI, MinCount=1, MaxCount=1)
    other = raw_ec2.run_instances(
        ImageId=AMI,
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": OWNER_TAG, "Value": owner + "-x"}]}
        ],
    )
    fleet = provider.list_fleet(owner)
    assert {i.instance_id for i in fleet} == set(spot.instance_ids) | set(od.instance_ids)
    foreign = {untagged["Instances"][0]["InstanceId"], other["Instances"][0]["InstanceId"]}
    assert not foreign & {i.instance_id for i in fleet}
    tiers = Counter(i.tier for i in fleet)
    assert tiers == Counter({Tier.SPOT: 2, Tier.COMMITTED: 1})
    for instance in fleet:
        assert instance.pool_key == POOL and instance.units == 1
        assert instance.state in (InstanceState.PENDING, InstanceState.RUNNING)
    assert {i.workload for i in fleet if i.tier is Tier.COMMITTED} == {"serve"}


def test_list_fleet_skips_terminated_instances(
    provider: AwsProvider, raw_ec2: EC2Client, owner: str
) -> None:
    result = provider.launch(request(owner, count=2))
    raw_ec2.terminate_instances(InstanceIds=[result.instance_ids[0]])
    assert [i.instance_id for i in provider.list_fleet(owner)] == [result.instance_ids[1]]


# -- terminate -----------------------------------------------------------------


def test_terminate_refuses_an_instance_without_our_tag_and_ends_ours(
    provider: AwsProvider, raw_ec2: EC2Client, owner: str
) -> None:
    ours = provider.launch(request(owner, count=1)).instance_ids
    foreign = raw_ec2.run_instances(ImageId=AMI, MinCount=1, MaxCount=1)["Instances"][0]
    foreign_id = foreign["InstanceId"]
    calls = Calls(provider.ec2_clients[REGION])
    result = provider.terminate(
        TerminateRequest(idempotency_key="term-0001", instance_ids=(*ours, foreign_id), owner=owner)
    )
    assert not result.ok and result.error_kind == "input"
    assert foreign_id in (result.error or "")
    assert result.instance_ids == ours
    terminated = [i for p in calls.of("ec2:TerminateInstances") for i in listed(p["InstanceIds"])]
    assert terminated == list(ours)
    states = {k: v["State"]["Name"] for k, v in describe(raw_ec2, [*ours, foreign_id]).items()}
    assert states[foreign_id] in ("pending", "running")
    assert states[ours[0]] in ("shutting-down", "terminated")


def test_terminate_never_touches_an_instance_of_another_owner(
    provider: AwsProvider, raw_ec2: EC2Client, owner: str, moto_server: str
) -> None:
    theirs = make_provider(moto_server, owner + "-other").launch(request(owner + "-other", count=1))
    calls = Calls(provider.ec2_clients[REGION])
    result = provider.terminate(
        TerminateRequest(idempotency_key="term-0002", instance_ids=theirs.instance_ids, owner=owner)
    )
    assert not result.ok and result.instance_ids == ()
    assert calls.of("ec2:TerminateInstances") == []


def test_terminate_twice_is_a_replay_with_no_second_call(provider: AwsProvider, owner: str) -> None:
    ids = provider.launch(request(owner, count=2)).instance_ids
    req = TerminateRequest(idempotency_key="term-0003", instance_ids=ids, owner=owner)
    first = provider.terminate(req)
    assert first.ok and not first.replayed and set(first.instance_ids) == set(ids)
    calls = Calls(provider.ec2_clients[REGION])
    again = provider.terminate(req)
    assert again.ok and again.replayed and set(again.instance_ids) == set(ids)
    assert calls.of("ec2:TerminateInstances") == []


def test_terminate_an_id_no_region_knows_counts_as_already_gone(
    provider: AwsProvider, owner: str
) -> None:
    result = provider.terminate(
        TerminateRequest(
            idempotency_key="term-0004", instance_ids=("i-0123456789abcdef0",), owner=owner
        )
    )
    assert result.ok and result.replayed and result.instance_ids == ("i-0123456789abcdef0",)


# -- errors at the boundary ----------------------------------------------------


@pytest.mark.parametrize(
    ("code", "status"),
    [
        pytest.param("InsufficientInstanceCapacity", 500, id="insufficient-capacity-500"),
        pytest.param("InsufficientCapacity", 500, id="insufficient-capacity"),
        pytest.param("SpotMaxPriceTooLow", 400, id="spot-max-price"),
        pytest.param("Unsupported", 400, id="type-not-in-zone"),
    ],
)
def test_capacity_errors_name_the_pool_and_are_not_retried(
    provider: AwsProvider, owner: str, sleeps: list[float], code: str, status: int
) -> None:
    faults = Faults(provider.ec2_clients[REGION], "RunInstances", code, status)
    with pytest.raises(CapacityUnavailableError) as info:
        provider.launch(request(owner))
    assert info.value.pool_key == POOL
    assert faults.sent == 1 and sleeps == []  # the next pool, at once


def test_throttling_is_retried_by_botocore_then_raised(
    provider: AwsProvider, owner: str, sleeps: list[float]
) -> None:
    faults = Faults(provider.ec2_clients[REGION], "RunInstances", "RequestLimitExceeded", 503)
    with pytest.raises(ThrottledError):
        provider.launch(request(owner))
    assert faults.sent == ATTEMPTS + 1 and len(sleeps) == ATTEMPTS


def test_throttling_that_passes_within_the_retries_launches(
    provider: AwsProvider, owner: str, sleeps: list[float]
) -> None:
    faults = Faults(provider.ec2_clients[REGION], "RunInstances", "RequestLimitExceeded", 503, 1)
    result = provider.launch(request(owner))
    assert result.ok and len(result.instance_ids) == 2
    assert faults.sent == 2 and len(sleeps) == 1


@pytest.mark.parametrize(
    ("code", "status", "error"),
    [
        pytest.param("VcpuLimitExceeded", 400, QuotaExceededError, id="vcpu-quota"),
        pytest.param("InstanceLimitExceeded", 400, QuotaExceededError, id="instance-quota"),
        pytest.param("MaxSpotInstanceCountExceeded", 400, QuotaExceededError, id="spot-quota"),
        pytest.param("UnauthorizedOperation", 403, AuthError, id="unauthorized"),
        pytest.param("AuthFailure", 401, AuthError, id="auth-failure"),
        pytest.param("InternalError", 500, TransientError, id="5xx"),
    ],
)
def test_quota_auth_and_server_errors_map_to_the_tree(
    provider: AwsProvider, owner: str, sleeps: list[float], code: str, status: int, error: type
) -> None:
    Faults(provider.ec2_clients[REGION], "RunInstances", code, status)
    with pytest.raises(error):
        provider.launch(request(owner))


def test_a_throttled_describe_fails_terminate_before_any_termination(
    provider: AwsProvider, owner: str, sleeps: list[float]
) -> None:
    ids = provider.launch(request(owner, count=1)).instance_ids
    Faults(provider.ec2_clients[REGION], "DescribeInstances", "RequestLimitExceeded", 503)
    calls = Calls(provider.ec2_clients[REGION])
    with pytest.raises(ThrottledError):
        provider.terminate(
            TerminateRequest(idempotency_key="term-0005", instance_ids=ids, owner=owner)
        )
    assert calls.of("ec2:TerminateInstances") == []


# -- settings and registry -----------------------------------------------------


@pytest.mark.parametrize(
    ("options", "field"),
    [
        pytest.param({"launch": {}}, "launch", id="no-region"),
        pytest.param({"launch": {"us-east-1": {}}}, "launch.us-east-1", id="no-image-or-template"),
        pytest.param(
            {"launch": {"us-east-1": {"image_id": AMI, "launch_template_name": "abc"}}},
            "launch.us-east-1",
            id="image-and-template",
        ),
        pytest.param(
            {"launch": {"us-east-1": {"image_id": "ubuntu"}}},
            "launch.us-east-1.image_id",
            id="bad-ami",
        ),
        pytest.param(
            {
                "launch": {
                    "us-east-1": {
                        "image_id": AMI,
                        "subnets": {"us-west-2a": "subnet-0123456789abcdef0"},
                    }
                }
            },
            "launch",
            id="subnet-in-another-region",
        ),
        pytest.param({"notice_wait_s": 21}, "notice_wait_s", id="long-poll-over-20s"),
        pytest.param({"lauch": {}}, "lauch", id="typo"),
    ],
)
def test_bad_settings_name_the_option(
    moto_server: str, options: dict[str, object], field: str
) -> None:
    options = {"launch": {REGION: {"image_id": AMI}}} | options
    with pytest.raises(InputError) as info:
        open_aws_provider(owner="o", endpoint_url=moto_server, **options)  # type: ignore[arg-type]
    assert info.value.field == field


def test_requests_for_another_owner_or_region_are_input_errors(
    provider: AwsProvider, owner: str
) -> None:
    with pytest.raises(InputError, match="owner"):
        provider.launch(request(owner + "-other"))
    with pytest.raises(InputError, match="configured region"):
        provider.launch(request(owner, pool_key="aws/eu-west-1/eu-west-1a/g5.xlarge"))
    with pytest.raises(InputError, match="owner"):
        provider.list_fleet(owner + "-other")


def test_registry_opens_the_aws_provider_by_name(moto_server: str, owner: str) -> None:
    assert PROVIDERS.target("aws") == "markets.aws.provider:open_aws_provider"
    provider = open_provider(
        "aws", owner=owner, endpoint_url=moto_server, launch={REGION: {"image_id": AMI}}
    )
    assert isinstance(provider, AwsProvider) and isinstance(provider, Provider)
    with pytest.raises(InputError, match="--provider"):
        open_provider("azure")


# -- the manifest of provider calls --------------------------------------------


@pytest.fixture
def queue(moto_server: str) -> Iterator[str]:
    sqs = boto3.client("sqs", region_name=REGION, endpoint_url=moto_server, **CREDS)
    url: str = sqs.create_queue(QueueName=f"q-{uuid.uuid4().hex[:10]}")["QueueUrl"]
    yield url
    sqs.delete_queue(QueueUrl=url)


def test_provider_manifest_matches_the_calls_a_full_round_makes(
    moto_server: str, owner: str, queue: str
) -> None:
    provider = make_provider(moto_server, owner, queue_url=queue, notice_wait_s=0)
    assert provider.notices is not None
    calls = Calls(*provider.ec2_clients.values(), provider.notices.sqs)
    ids = provider.launch(request(owner, count=1)).instance_ids
    provider.list_fleet(owner)
    provider.terminate(TerminateRequest(idempotency_key="term-0006", instance_ids=ids, owner=owner))
    sqs = boto3.client("sqs", region_name=REGION, endpoint_url=moto_server, **CREDS)
    event = {
        "id": "e-1",
        "source": "aws.ec2",
        "detail-type": "EC2 Instance Rebalance Recommendation",
        "time": "2026-03-02T12:00:00Z",
        "account": "123456789012",  # moto's (the daemon's, by STS)
        "region": REGION,
        "resources": [f"arn:aws:ec2:{REGION}:123456789012:instance/{ids[0]}"],
        "detail": {"instance-id": ids[0]},
    }
    body = json.dumps(event)
    sqs.send_message(QueueUrl=queue, MessageBody=body)
    (notice,) = provider.poll_notices()
    provider.ack_notice(notice)
    # the held reservations are read only with ``use_reservations`` (moto has no
    # such API: tests/contract/test_providers.py checks that call on a Stubber)
    reservations = {"ec2:DescribeCapacityReservations"}
    assert {a for a, _ in calls.made} == AWS_PROVIDER_API_CALLS - reservations
