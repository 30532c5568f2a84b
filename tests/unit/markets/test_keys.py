"""Identity values (``markets.keys``): parsed once, printed exactly as before.

The idempotency digests are checked against the texts the project hashed
before they moved here: a changed text would make a restarted daemon launch
again what it already launched.
"""

from __future__ import annotations

import hashlib

import pytest

from markets.errors import InputError
from markets.keys import (
    CommitmentKey,
    PoolKey,
    alternate_pool_key,
    idempotency_key,
    launch_key,
    merged_notice_key,
    next_attempt_key,
    notice_key,
    terminate_key,
)
from markets.model import Pool, Provider

KEY = "aws/us-east-1/us-east-1a/p3.2xlarge"


def _sf(text: str) -> str:
    return "sf-" + hashlib.sha256(text.encode()).hexdigest()[:40]


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(KEY, id="aws"),
        pytest.param("gcp/us-central1/us-central1-a/a2-highgpu-8g", id="gcp"),
        pytest.param("aws/eu-west-1/eu-west-1c/g5.12xlarge", id="dotted-type"),
    ],
)
def test_a_pool_key_round_trips_to_the_same_string(text: str) -> None:
    key = PoolKey.parse(text)
    assert str(key) == text
    assert PoolKey.parse(str(key)) == key


def test_a_pool_key_names_its_parts_group_and_zone() -> None:
    key = PoolKey.parse(KEY)
    assert (key.provider, key.region, key.zone, key.instance_type) == (
        "aws",
        "us-east-1",
        "us-east-1a",
        "p3.2xlarge",
    )
    assert key.group == CommitmentKey("aws", "us-east-1", "p3.2xlarge")
    assert str(key.group) == "aws/us-east-1/p3.2xlarge"
    assert key.zone_key == "aws/us-east-1a"


def test_the_pool_models_key_is_the_same_value() -> None:
    pool = Pool(
        provider=Provider.AWS, region="us-east-1", zone="us-east-1a", instance_type="p3.2xlarge"
    )
    assert pool.key == KEY
    assert pool.pool_key == PoolKey.parse(KEY)
    assert Pool.from_key(KEY) == pool


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("aws/us-east-1/p3.2xlarge", id="three-parts"),
        pytest.param("aws/us-east-1/us-east-1a/p3/2xlarge", id="five-parts"),
        pytest.param("aws//us-east-1a/p3.2xlarge", id="empty-region"),
        pytest.param("aws/us-east-1/us-east-1a/", id="empty-type"),
        pytest.param("", id="empty"),
    ],
)
def test_a_malformed_pool_key_is_an_input_error_naming_the_expected_form(text: str) -> None:
    with pytest.raises(InputError) as e:
        PoolKey.parse(text)
    assert e.value.source == "pool key"
    assert "provider/region/zone/instance_type" in e.value.expected
    assert e.value.got == text


def test_a_pool_key_that_is_not_a_string_is_an_input_error() -> None:
    with pytest.raises(InputError):
        PoolKey.parse(["aws", "us-east-1"])  # type: ignore[arg-type]


def test_pool_from_key_still_raises_value_error_for_the_adapters() -> None:
    with pytest.raises(ValueError, match="provider/region/zone/instance_type"):
        Pool.from_key("aws/us-east-1/p3.2xlarge")


def test_a_commitment_key_round_trips_and_rejects_a_pool_key() -> None:
    assert (
        str(CommitmentKey.parse("gcp/us-central1/a2-highgpu-8g")) == "gcp/us-central1/a2-highgpu-8g"
    )
    with pytest.raises(InputError) as e:
        CommitmentKey.parse(KEY)
    assert "provider/region/instance_type" in e.value.expected


def test_keys_sort_by_their_parts() -> None:
    a = PoolKey.parse("aws/us-east-1/us-east-1a/p3.2xlarge")
    b = PoolKey.parse("aws/us-east-1/us-east-1b/p3.2xlarge")
    assert sorted([b, a]) == [a, b]


def test_idempotency_keys_hash_the_same_texts_as_before() -> None:
    assert idempotency_key("x") == _sf("x")
    assert len(idempotency_key("x")) == 43  # within AWS's 64-character ClientToken
    assert launch_key("me", 7, "chat-api", KEY, "spot", 0) == _sf(
        "\x1f".join(["launch", "me", "7", "chat-api", KEY, "spot", "0"])
    )
    assert terminate_key("me", ["i-2", "i-1"]) == _sf(
        "\x1f".join(["terminate", "me", "i-1", "i-2"])
    )
    assert notice_key("n-1", 3) == _sf("notice\x1fn-1\x1f3")
    assert merged_notice_key([("n-2", 0), ("n-1", 1)]) == _sf("notices\x1dn-1\x1f1\x1en-2\x1f0")
    assert merged_notice_key([("n-1", 1)]) == notice_key("n-1", 1)
    assert next_attempt_key("sf-abc", 2) == _sf("sf-abc#2")
    assert alternate_pool_key("sf-abc", KEY) == _sf(f"sf-abc@{KEY}")
