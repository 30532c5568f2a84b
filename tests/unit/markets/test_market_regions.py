"""Every registered market honours ``regions=`` or refuses it (never ignores
it silently)."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.cli import main
from markets.errors import InputError
from markets.registry import MARKETS, open_market
from tests.paths import SHARED_DATA

# What each registered market needs besides ``regions`` to get as far as it
# (the live ones without credentials or a network: a malformed name is
# refused before any client is built).
_OPEN: dict[str, tuple[str, dict[str, object]]] = {
    "default": ("default", {}),
    "replay": (str(SHARED_DATA), {}),
    "aws": ("aws", {}),
    "gcp": ("gcp", {"project": "my-project-1", "anonymous": True}),
    "store": ("store", {}),  # needs a url first: covered by its own test below
}


def test_every_registered_market_is_covered_here() -> None:
    assert set(MARKETS.names()) == set(_OPEN)


@pytest.mark.parametrize("name", ["default", "replay", "aws", "gcp"])
def test_a_region_no_market_has_is_refused_naming_the_option(name: str) -> None:
    spec, options = _OPEN[name]
    with pytest.raises(InputError) as e:
        open_market(spec, **options, regions="nowhere-1")
    assert "regions" in str(e.value) and "nowhere-1" in str(e.value)


def test_the_default_market_keeps_only_the_pools_of_the_given_regions_and_zones() -> None:
    full = open_market("default")
    east = open_market("default", regions="us-east-1,us-central1")
    assert {p.region for p in east.pools()} == {"us-east-1", "us-central1"}
    assert {p.key for p in east.pools()} == {
        p.key for p in full.pools() if p.region in ("us-east-1", "us-central1")
    }
    assert {p.pool.region for p in east.snapshot().pools} == {"us-east-1", "us-central1"}
    zone = open_market("default", zones="us-east-1a")
    assert {p.zone for p in zone.pools()} == {"us-east-1a"}


def test_the_store_market_passes_regions_to_its_base(tmp_path: Path) -> None:
    from tests.unit.broker.whatif.test_store_market import _store

    url = _store(tmp_path, open_market("default").pools()[0].key, revocations=1)
    kept = open_market("store", url=url, regions="us-west-2")
    assert {p.region for p in kept.pools()} == {"us-west-2"}
    with pytest.raises(InputError):
        open_market("store", url=url, regions="nowhere-1")


def test_whatif_with_an_unknown_region_is_exit_2_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["whatif", "--market-option", "regions=nowhere-1"]) == 2
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1
    assert "--market-option regions" in lines[0] and "nowhere-1" in lines[0]
    assert "us-east-1" in lines[0]  # the expectation: the names the market has
    assert captured.out == ""
