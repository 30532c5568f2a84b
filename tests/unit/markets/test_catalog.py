"""The embedded catalog: consistent specs, prices, discounts and offerings."""

from __future__ import annotations

import pytest

from markets import catalog
from markets.catalog import (
    CATALOG,
    UnknownInstanceTypeError,
    committed_price,
    instance_type,
    list_price,
    throughput_factor,
    zones_for,
)
from markets.errors import InputError
from markets.model import Pool, Provider


def test_catalog_has_a_realistic_size_on_both_providers() -> None:
    providers = {e.provider for e in CATALOG.values()}
    assert providers == {Provider.AWS, Provider.GCP}
    assert 25 <= len(CATALOG) <= 40


def test_catalog_is_frozen() -> None:
    with pytest.raises(TypeError):
        CATALOG["x"] = CATALOG["p3.2xlarge"]  # type: ignore[index]


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_every_entry_is_consistent(name: str) -> None:
    e = CATALOG[name]
    inst = e.instance
    assert inst.name == name
    assert inst.units == inst.gpus > 0
    assert inst.gpu_model in catalog.GPU_THROUGHPUT_VS_V100
    assert e.list_usd_per_hour > 0
    # Committed terms: 3-year deeper than 1-year, both real discounts.
    if e.committed_discount_1y is not None:
        assert e.committed_discount_3y is not None
        assert 0.2 <= e.committed_discount_1y < e.committed_discount_3y <= 0.75
    assert e.zones, "every type is offered somewhere"
    for region, zone in e.zones:
        Pool(provider=inst.provider, region=region, zone=zone, instance_type=name)


def test_bigger_sizes_of_a_family_cost_more_per_instance() -> None:
    by_family: dict[str, list[tuple[int, float]]] = {}
    for e in CATALOG.values():
        by_family.setdefault(e.discount_family, []).append((e.instance.vcpus, e.list_usd_per_hour))
    for fam, rows in by_family.items():
        rows.sort()
        prices = [p for _, p in rows]
        assert prices == sorted(prices), fam


def test_reference_prices_match_the_stated_list_prices() -> None:
    # Facts stated in the catalog's sources (AWS on-demand page, GCP list).
    assert list_price("aws", "us-east-1", "p3.2xlarge") == pytest.approx(3.06)
    assert list_price(Provider.GCP, "us-central1", "a2-highgpu-1g") == pytest.approx(3.673385)


def test_regional_multipliers_apply() -> None:
    assert list_price("aws", "us-west-2", "p3.2xlarge") == pytest.approx(3.06)
    assert list_price("aws", "eu-west-1", "p3.2xlarge") == pytest.approx(3.06 * 1.08)
    assert list_price("aws", "eu-west-1", "g5.xlarge") == pytest.approx(1.006 * 1.116)
    assert list_price("gcp", "europe-west4", "g2-standard-4") > list_price(
        "gcp", "us-central1", "g2-standard-4"
    )


def test_committed_price_is_list_times_one_minus_discount() -> None:
    od = list_price("gcp", "us-central1", "g2-standard-8")
    assert committed_price("gcp", "us-central1", "g2-standard-8", 1) == pytest.approx(od * 0.63)
    assert committed_price("gcp", "us-central1", "g2-standard-8", 3) == pytest.approx(od * 0.45)


def test_committed_price_is_none_where_no_commitment_is_listed() -> None:
    assert committed_price("gcp", "us-central1", "a2-ultragpu-8g", 1) is None


def test_committed_price_rejects_other_terms() -> None:
    with pytest.raises(InputError, match="1 or 3"):
        committed_price("aws", "us-east-1", "p3.2xlarge", 2)


def test_unknown_name_lists_close_matches_and_is_a_key_error() -> None:
    with pytest.raises(UnknownInstanceTypeError) as info:
        instance_type("p3.2xlarg")
    assert "p3.2xlarge" in str(info.value)
    assert isinstance(info.value, KeyError)
    assert isinstance(info.value, InputError)


def test_region_not_offering_the_type_is_an_input_error() -> None:
    with pytest.raises(InputError, match="us-east-1"):
        list_price("aws", "eu-west-1", "p5.48xlarge")


def test_wrong_provider_is_an_input_error() -> None:
    with pytest.raises(InputError):
        list_price("gcp", "us-east-1", "p3.2xlarge")


def test_not_every_type_is_everywhere() -> None:
    counts = {name: len(zones_for(name)) for name in CATALOG}
    assert min(counts.values()) < max(counts.values())
    assert counts["p5.48xlarge"] < counts["g4dn.xlarge"]
    for provider, region, zone in zones_for("a3-highgpu-8g"):
        assert provider is Provider.GCP
        assert zone.startswith(region + "-")


def test_throughput_factors_are_ordered_by_generation() -> None:
    v100 = throughput_factor("p3.2xlarge")
    assert v100 == 1.0
    a100 = throughput_factor("p4d.24xlarge")
    h100 = throughput_factor("p5.48xlarge")
    assert 2.0 <= a100 <= 3.0
    assert h100 == pytest.approx(3 * a100, rel=0.05)
    for small in ("g4dn.xlarge", "g5.xlarge", "g6.xlarge", "p2.xlarge"):
        assert throughput_factor(small) < v100


def test_trace_aliases_name_catalog_types() -> None:
    for name in catalog.TRACE_ALIASES.values():
        assert name in CATALOG
    assert catalog.trace_instance_type("AWS", "V100", 8) == "p3.16xlarge"
    assert catalog.trace_instance_type("gcp", "c3", 88) is None
