"""``markets.clouds.Clouds``: each call reaches the provider of its cloud,
with its request unchanged, and no other."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from markets.cloud_fleet import (
    ActionResult,
    ErrorKind,
    Instance,
    InstanceState,
    LaunchRequest,
    Notice,
    NoticeKind,
    TerminateRequest,
)
from markets.clouds import Clouds
from markets.model import Tier

T = datetime(2026, 3, 2, tzinfo=UTC)
AWS_POOL = "aws/us-east-1/us-east-1a/p3.2xlarge"
GCP_POOL = "gcp/us-central1/us-central1-a/a2-highgpu-1g"


class Cloud:
    """A provider that records what it was asked, and holds ``ids``."""

    def __init__(self, name: str, pool: str, ids: Sequence[str]) -> None:
        self.name, self.pool = name, pool
        self.ids = list(ids)
        self.calls: list[tuple[str, object]] = []
        self.queue: list[Notice] = []

    def list_fleet(self, owner: str) -> Sequence[Instance]:
        return [Instance(instance_id=i, pool_key=self.pool, tier=Tier.SPOT, workload="w",
                         state=InstanceState.RUNNING, units=1, launched_at=T)
                for i in self.ids]  # fmt: skip

    def launch(self, request: LaunchRequest) -> ActionResult:
        self.calls.append(("launch", request))
        new = f"{self.name}-new-{len(self.calls)}"
        return ActionResult(idempotency_key=request.idempotency_key, ok=True, instance_ids=(new,))

    def terminate(self, request: TerminateRequest) -> ActionResult:
        self.calls.append(("terminate", request))
        return ActionResult(idempotency_key=request.idempotency_key, ok=True,
                            instance_ids=request.instance_ids)  # fmt: skip

    def poll_notices(self, max_notices: int = 10) -> Sequence[Notice]:
        out, self.queue = self.queue[:max_notices], self.queue[max_notices:]
        return out

    def ack_notice(self, notice: Notice) -> None:
        self.calls.append(("ack", notice.notice_id))


def _launch(pool: str, key: str = "sf-launch-0001") -> LaunchRequest:
    return LaunchRequest(idempotency_key=key, pool_key=pool, tier=Tier.SPOT, workload="w",
                         count=1, owner="me", plan_generation=1)  # fmt: skip


def test_launches_go_to_their_pools_cloud_with_the_key_unchanged() -> None:
    aws, gcp = Cloud("aws", AWS_POOL, []), Cloud("gcp", GCP_POOL, [])
    clouds = Clouds({"aws": aws, "gcp": gcp})
    assert clouds.launch(_launch(GCP_POOL, "sf-gcp-key-1")).ok
    assert clouds.launch(_launch(AWS_POOL, "sf-aws-key-1")).ok
    assert [c[1].idempotency_key for c in gcp.calls] == ["sf-gcp-key-1"]  # type: ignore[attr-defined]
    assert [c[1].idempotency_key for c in aws.calls] == ["sf-aws-key-1"]  # type: ignore[attr-defined]


def test_a_pool_of_an_unconfigured_cloud_is_refused_and_sent_nowhere() -> None:
    aws = Cloud("aws", AWS_POOL, [])
    result = Clouds({"aws": aws}).launch(_launch(GCP_POOL))
    assert not result.ok and result.error_kind is ErrorKind.INPUT and "gcp" in (result.error or "")
    assert aws.calls == []


def test_terminates_are_split_by_the_cloud_holding_each_instance() -> None:
    aws = Cloud("aws", AWS_POOL, ["i-0123456789abcdef0"])
    gcp = Cloud("gcp", GCP_POOL, ["us-central1-a/sf-me-1"])
    clouds = Clouds({"aws": aws, "gcp": gcp})
    launched = clouds.launch(_launch(GCP_POOL)).instance_ids  # not listed yet
    ids = ("i-0123456789abcdef0", "us-central1-a/sf-me-1", *launched)
    req = TerminateRequest(idempotency_key="sf-term-0001", instance_ids=ids, owner="me")
    result = clouds.terminate(req)  # a fresh router lists both clouds first
    assert result.ok and sorted(result.instance_ids) == sorted(ids)
    got = {name: [c[1].instance_ids for c in p.calls if c[0] == "terminate"]  # type: ignore[attr-defined]
           for name, p in (("aws", aws), ("gcp", gcp))}  # fmt: skip
    assert got == {"aws": [("i-0123456789abcdef0",)],
                   "gcp": [("us-central1-a/sf-me-1", *launched)]}  # fmt: skip


def test_an_instance_no_listing_shows_goes_by_its_id_form() -> None:
    aws, gcp = Cloud("aws", AWS_POOL, []), Cloud("gcp", GCP_POOL, [])
    clouds = Clouds({"aws": aws, "gcp": gcp})
    for iid, cloud in (("us-east1-b/sf-me-9", gcp), ("i-0fedcba987654321f", aws)):
        clouds.terminate(TerminateRequest(idempotency_key="sf-term-0002", instance_ids=(iid,),
                                          owner="me"))  # fmt: skip
        assert cloud.calls[-1][1].instance_ids == (iid,)  # type: ignore[attr-defined]


def test_notices_come_from_every_cloud_and_are_acknowledged_where_they_came_from() -> None:
    aws, gcp = Cloud("aws", AWS_POOL, []), Cloud("gcp", GCP_POOL, [])
    aws.queue = [Notice(notice_id=f"a{i}", kind=NoticeKind.INTERRUPTION, instance_id="i-1",
                        at=T, receipt=f"r{i}") for i in range(12)]  # fmt: skip
    gcp.queue = [Notice(notice_id="g1", kind=NoticeKind.PREEMPTED, instance_id="z/n", at=T)]
    clouds = Clouds({"aws": aws, "gcp": gcp})
    got = clouds.poll_notices(10)  # a full AWS batch does not keep GCP's out
    assert {n.notice_id for n in got} >= {"g1", "a0"} and len(got) == 11
    for n in got:
        clouds.ack_notice(n)
    assert [c[1] for c in gcp.calls] == ["g1"]
    assert [c[1] for c in aws.calls] == [f"a{i}" for i in range(10)]
