"""Notices that are well formed but not the daemon's: another account, another
region, or resources that do not name the instance. Each is rejected by the
parser, and the poller (moto's SQS) counts it, logs the failed check and
leaves it for the dead-letter queue; the daemon's account comes from STS
GetCallerIdentity when the provider options do not name it."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import boto3
import pytest

from markets.aws.notices import NoticeOrigin, RejectedNotice, SqsNotices, parse_message
from markets.aws.provider import AwsProvider, open_aws_provider
from markets.aws.settings import queue_account
from markets.errors import InputError
from tests.unit.markets.aws.test_notices import (
    ACCOUNT,
    AMI,
    CREDS,
    INTERRUPTION,
    ORIGIN,
    REBALANCE,
    REGION,
    STATE,
    event,
)

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

IID = "i-0123456789abcdef0"
ARN = f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/{IID}"
DETAIL = {"instance-id": IID, "instance-action": "terminate"}


@pytest.fixture(autouse=True)
def _no_real_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """Never reach real AWS from a test, whatever the environment holds."""
    for var in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


def body(**over: object) -> str:
    return json.dumps(event(INTERRUPTION, DETAIL, **over))


@pytest.mark.parametrize(
    ("over", "check"),
    [
        pytest.param({"account": "210987654321"}, "account", id="other-account"),
        pytest.param({"account": None}, "account", id="no-account"),
        pytest.param({"account": 123456789012}, "account", id="account-as-a-number"),
        pytest.param({"region": "eu-west-1"}, "region", id="other-region"),
        pytest.param({"region": None}, "region", id="no-region"),
        pytest.param({"resources": []}, "resources", id="no-resources"),
        pytest.param({"resources": "nope"}, "resources", id="resources-not-a-list"),
        pytest.param(
            {"resources": [ARN.replace(IID, "i-0fffffffffffffff0")]},
            "resources",
            id="arn-of-another-instance",
        ),
        pytest.param(
            {"resources": [ARN.replace(ACCOUNT, "210987654321")]},
            "resources",
            id="arn-in-another-account",
        ),
        pytest.param(
            {"resources": [ARN.replace(f":{REGION}:", ":eu-west-1:")]},
            "resources",
            id="arn-in-another-region",
        ),
        pytest.param({"resources": [IID]}, "resources", id="bare-id-for-an-ec2-event"),
        pytest.param(
            {"resources": [ARN.replace(":ec2:", ":rds:")]}, "resources", id="arn-of-another-service"
        ),
    ],
)
def test_a_notice_not_from_our_account_region_and_instance_is_rejected(
    over: dict[str, object], check: str
) -> None:
    with pytest.raises(RejectedNotice) as e:
        parse_message(body(**over), "r", ORIGIN)
    assert e.value.field == check


@pytest.mark.parametrize("kind", [INTERRUPTION, REBALANCE, STATE])
def test_every_ec2_kind_is_checked(kind: str) -> None:
    detail = {"instance-id": IID, "state": "running"}
    doc = event(kind, detail, account="210987654321")
    with pytest.raises(RejectedNotice, match="account"):
        parse_message(json.dumps(doc), "r", ORIGIN)


@pytest.mark.parametrize(
    "resources",
    [
        pytest.param([ARN], id="the-arn"),
        pytest.param(["arn:aws:ec2:us-east-1:123456789012:volume/vol-1", ARN], id="among-others"),
    ],
)
def test_a_notice_from_us_naming_the_instance_is_accepted(resources: list[str]) -> None:
    (n,) = parse_message(body(resources=resources), "r", ORIGIN)
    assert n.instance_id == IID


def test_another_partitions_arn_is_read() -> None:
    origin = NoticeOrigin(ACCOUNT, frozenset({"cn-north-1"}))
    arn = f"arn:aws-cn:ec2:cn-north-1:{ACCOUNT}:instance/{IID}"
    (n,) = parse_message(body(region="cn-north-1", resources=[arn]), "r", origin)
    assert n.instance_id == IID


def test_an_origin_needs_a_12_digit_account_and_a_region() -> None:
    with pytest.raises(ValueError, match="12-digit"):
        NoticeOrigin("12345", frozenset({REGION}))
    with pytest.raises(ValueError, match="regions"):
        NoticeOrigin(ACCOUNT, frozenset())


# -- the poller and the provider, on moto ------------------------------------------


@pytest.fixture
def queue(moto_server: str) -> Iterator[tuple[SQSClient, str]]:
    sqs = boto3.client("sqs", region_name=REGION, endpoint_url=moto_server, **CREDS)
    url = sqs.create_queue(QueueName=f"spoof-{uuid.uuid4().hex[:10]}")["QueueUrl"]
    yield sqs, url
    sqs.delete_queue(QueueUrl=url)


def test_a_spoofed_notice_is_counted_logged_and_left_for_the_dead_letter_queue(
    queue: tuple[SQSClient, str], caplog: pytest.LogCaptureFixture
) -> None:
    sqs, url = queue
    sqs.send_message(QueueUrl=url, MessageBody=body(account="210987654321"))
    sqs.send_message(QueueUrl=url, MessageBody=body())
    notices = SqsNotices(sqs, url, origin=ORIGIN, wait_time_s=0, visibility_timeout_s=0)
    with caplog.at_level(logging.WARNING, logger="markets.aws.notices"):
        got = notices.poll(10)
    assert [n.instance_id for n in got] == [IID]
    assert notices.stats.rejected == 1 and notices.stats.notices == 1
    (line,) = [r.getMessage() for r in caplog.records if "rejected" in r.getMessage()]
    assert "check=account" in line and "message_id=" in line
    notices.ack(got[0])
    assert notices.poll(10) == [] and notices.stats.rejected == 2  # still there


def test_the_providers_account_comes_from_sts_when_not_configured(
    moto_server: str, queue: tuple[SQSClient, str]
) -> None:
    _, url = queue
    provider = open_aws_provider(
        owner="o", endpoint_url=moto_server, launch={REGION: {"image_id": AMI}}, queue_url=url
    )
    assert isinstance(provider, AwsProvider) and provider.notices is not None
    sts = boto3.client("sts", region_name=REGION, endpoint_url=moto_server, **CREDS)
    assert provider.notices.origin == NoticeOrigin(
        sts.get_caller_identity()["Account"], frozenset({REGION})
    )


def test_a_configured_account_id_is_used_as_it_is(
    moto_server: str, queue: tuple[SQSClient, str]
) -> None:
    sqs, url = queue
    provider = open_aws_provider(
        owner="o",
        endpoint_url=moto_server,
        launch={REGION: {"image_id": AMI}},
        queue_url=url,
        account_id="210987654321",
        notice_wait_s=0,
    )
    assert isinstance(provider, AwsProvider) and provider.notices is not None
    assert provider.notices.origin.account == "210987654321"
    sqs.send_message(QueueUrl=url, MessageBody=body())  # from 123456789012: not ours now
    assert provider.poll_notices(10) == []
    assert provider.dropped_notices()["rejected"] == 1


def test_a_bad_account_id_option_is_an_input_error_naming_it() -> None:
    with pytest.raises(InputError, match="account_id"):
        open_aws_provider(
            owner="o", launch={REGION: {"image_id": AMI}}, ec2_clients={}, account_id="12"
        )


def test_the_queue_urls_account_is_read_for_injected_clients() -> None:
    assert queue_account("https://sqs.us-east-1.amazonaws.com/123456789012/q") == ACCOUNT
    assert queue_account("http://127.0.0.1:5000/123456789012/q") == ACCOUNT
    assert queue_account("https://q") is None
