"""Quota files and what an instance takes of a quota: bad input is one line
naming the file and field; each instance counts against its own group only."""

from __future__ import annotations

from pathlib import Path

import pytest

from markets import catalog
from markets.errors import InputError
from markets.model import MarketSnapshot, Pool, Provider, Quota, QuotaUnit, Tier
from markets.quotas import aws_group, load_quotas, quota_use

P_OD = Quota(
    provider=Provider.AWS,
    region="us-east-1",
    group="P",
    tier=Tier.ON_DEMAND,
    limit=96,
    unit=QuotaUnit.VCPUS,
    code="L-417A185B",
)


@pytest.mark.parametrize(
    ("family", "group"),
    [
        ("p4d", "P"),
        ("p5", "P"),
        ("g5", "G"),
        ("g4dn", "G"),
        ("vt1", "G"),
        ("inf2", "Inf"),
        ("trn1", "Trn"),
        ("dl1", "DL"),
        ("x2iedn", "X"),
        ("m5", "Standard"),
        ("c7g", "Standard"),
    ],
)
def test_each_family_is_in_its_ec2_vcpu_group(family: str, group: str) -> None:
    assert aws_group(family) == group


def test_an_instance_takes_its_vcpus_of_its_own_group_region_and_tier_only() -> None:
    p4d = catalog.instance_type("p4d.24xlarge")  # 96 vCPUs
    g5 = catalog.instance_type("g5.xlarge")
    east = Pool(
        provider=Provider.AWS, region="us-east-1", zone="us-east-1a", instance_type="p4d.24xlarge"
    )
    west = Pool(
        provider=Provider.AWS, region="us-west-2", zone="us-west-2a", instance_type="p4d.24xlarge"
    )
    assert quota_use(P_OD, east, p4d, Tier.ON_DEMAND) == 96
    assert quota_use(P_OD, east, p4d, Tier.COMMITTED) == 96  # a reservation still runs
    assert quota_use(P_OD, east, p4d, Tier.SPOT) == 0
    assert quota_use(P_OD, west, p4d, Tier.ON_DEMAND) == 0
    g_pool = east.model_copy(update={"instance_type": "g5.xlarge"})
    assert quota_use(P_OD, g_pool, g5, Tier.ON_DEMAND) == 0


def test_gcp_gpus_count_against_their_model_and_the_global_quota() -> None:
    a3 = catalog.instance_type("a3-highgpu-8g")
    pool = Pool(
        provider=Provider.GCP,
        region="us-central1",
        zone="us-central1-a",
        instance_type="a3-highgpu-8g",
    )
    h100 = Quota(
        provider=Provider.GCP,
        region="us-central1",
        group="NVIDIA_H100_GPUS",
        tier=Tier.SPOT,
        limit=16,
        unit=QuotaUnit.GPUS,
    )
    every = Quota(provider=Provider.GCP, group="GPUS_ALL_REGIONS", limit=32, unit=QuotaUnit.GPUS)
    a100 = h100.model_copy(update={"group": "NVIDIA_A100_GPUS"})
    assert quota_use(h100, pool, a3, Tier.SPOT) == 8
    assert quota_use(h100, pool, a3, Tier.ON_DEMAND) == 0
    assert quota_use(every, pool, a3, Tier.ON_DEMAND) == 8
    assert quota_use(a100, pool, a3, Tier.SPOT) == 0


def test_a_quota_file_reads_with_the_codes_filled_in(tmp_path: Path) -> None:
    f = tmp_path / "q.yaml"
    f.write_text(
        "quotas:\n"
        "  - {provider: aws, region: us-east-1, group: P, tier: spot, limit: 96}\n"
        "  - {provider: gcp, region: us-central1, group: NVIDIA_H100_GPUS,"
        " tier: spot, limit: 16}\n"
        "  - {provider: gcp, group: GPUS_ALL_REGIONS, limit: 32}\n"
    )
    spot, h100, every = load_quotas(f)
    assert (spot.code, spot.unit, spot.limit) == ("L-7212CCBC", QuotaUnit.VCPUS, 96)
    assert h100.code == "PREEMPTIBLE_NVIDIA_H100_GPUS" and h100.unit is QuotaUnit.GPUS
    assert every.key == "gcp/*/GPUS_ALL_REGIONS/any"


@pytest.mark.parametrize(
    ("text", "field"),
    [
        pytest.param(
            "quotas:\n  - {provider: aws, region: us-east-1, group: Q, tier: spot, limit: 1}\n",
            "quotas[0].group",
            id="unknown-group",
        ),
        pytest.param(
            "quotas:\n  - {provider: aws, region: us-east-1, group: P, tier: spot, limit: -1}\n",
            "quotas[0].limit",
            id="negative",
        ),
        pytest.param(
            "quotas:\n  - {provider: aws, group: P, tier: spot, limit: 8}\n",
            "quotas[0].region",
            id="aws-without-region",
        ),
        pytest.param(
            "quotas:\n  - {provider: aws, region: us-east-1, group: P, limit: 8}\n",
            "quotas[0].tier",
            id="aws-without-tier",
        ),
        pytest.param(
            "quotas:\n  - {provider: gcp, region: us-east1, group: GPUS_ALL_REGIONS, limit: 8}\n",
            "quotas[0].region",
            id="global-with-region",
        ),
        pytest.param(
            "quotas:\n  - {provider: aws, region: us-east-1, group: P, tier: committed,"
            " limit: 8}\n",
            "quotas[0].tier",
            id="committed-tier",
        ),
        pytest.param(
            "quotas:\n  - {provider: aws, region: us-east-1, group: P, tier: spot,"
            " limit: 8}\n  - {provider: aws, region: us-east-1, group: P, tier: spot,"
            " limit: 9}\n",
            "quotas[1]",
            id="twice",
        ),
        pytest.param(
            "quotas:\n  - {provider: aws, region: us-east-1, group: P, tier: spot,"
            " limit: 8, extra: 1}\n",
            "quotas[0].extra",
            id="unknown-key",
        ),
    ],
)
def test_a_bad_quota_file_is_one_line_naming_the_field(
    tmp_path: Path, text: str, field: str
) -> None:
    f = tmp_path / "q.yaml"
    f.write_text(text)
    with pytest.raises(InputError) as e:
        load_quotas(f)
    assert str(e.value).startswith(f"{f}: {field}:")
    assert "\n" not in str(e.value)


def test_a_snapshot_refuses_a_quota_listed_twice() -> None:
    from tests.unit.broker.planning.optimizer.test_solve import T0

    with pytest.raises(ValueError, match="quotas listed twice"):
        MarketSnapshot(at=T0, pools=(), quotas=(P_OD, P_OD))


def test_a_market_with_quotas_keeps_its_own_and_replaces_those_of_the_same_key() -> None:
    import pickle

    from markets.protocols import HistorySource
    from markets.quotas import with_quotas
    from tests.fakes.tiny_market import TinyMarket

    market = TinyMarket()
    assert with_quotas(market, ()) is market
    bound = with_quotas(market, (P_OD,))
    snap = bound.snapshot()
    assert snap.quotas == (P_OD,) and snap.pools == market.snapshot().pools
    lower = P_OD.model_copy(update={"limit": 48.0})
    assert snap.with_quotas((lower,)).quotas == (lower,)
    assert isinstance(bound, HistorySource)  # span and hourly are the market's
    assert pickle.loads(pickle.dumps(bound)).snapshot().quotas == (P_OD,)  # sent to workers
