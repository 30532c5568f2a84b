"""The market contract, run over every market in ``markets.registry``.

Every registered market must have an offline opener here (a new market without
one fails ``test_every_registered_market_has_an_offline_opener``). A registered
market whose module cannot be found is a bug in the registry and fails.

Contract: ``snapshot()`` returns a ``MarketSnapshot`` with pools; every pool
has a positive on-demand price, spot <= on-demand where both are known, a
placement score of None or 1-10, a hazard >= 0 and ``observed_at`` no later
than the snapshot's ``at`` (plus clock skew); ``pools()`` names exactly the
snapshot's pools; ``instance_types()`` covers every pool's type; the same
inputs give the same snapshot.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from markets.errors import AuthError
from markets.model import MarketSnapshot
from markets.protocols import PriceSource
from markets.registry import MARKETS
from tests.paths import SHARED_DATA

DATA = SHARED_DATA
T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SKEW = timedelta(minutes=5)
AWS_TYPES = ("g4dn.xlarge", "g5.xlarge", "p4d.24xlarge")
AWS_ON_DEMAND = {"g4dn.xlarge": "0.526", "g5.xlarge": "1.006", "p4d.24xlarge": "32.7726"}

Opener = Callable[[], PriceSource]


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent package is missing too
        return False


def _open_aws(moto_url: str) -> PriceSource:
    """EC2 from moto's HTTP server; Pricing and placement scores (which moto
    lacks) from Stubbers, filled afresh for each market opened."""
    import boto3
    from botocore.stub import Stubber

    from markets.clock import ManualClock

    creds = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
    region = "us-east-1"
    ec2 = boto3.client("ec2", region_name=region, endpoint_url=moto_url, **creds)  # type: ignore[call-overload]
    pricing = boto3.client("pricing", region_name=region, **creds)  # type: ignore[call-overload]
    placement = boto3.client("ec2", region_name=region, **creds)  # type: ignore[call-overload]
    price_stub, place_stub = Stubber(pricing), Stubber(placement)
    for t in sorted(AWS_TYPES):
        doc = {
            "product": {"attributes": {"instanceType": t, "regionCode": region}},
            "terms": {
                "OnDemand": {
                    "S.T": {
                        "priceDimensions": {
                            "S.T.R": {"unit": "Hrs", "pricePerUnit": {"USD": AWS_ON_DEMAND[t]}}
                        }
                    }
                }
            },
        }
        price_stub.add_response("get_products", {"PriceList": [json.dumps(doc)]})
    zone_ids = sorted(z["ZoneId"] for z in ec2.describe_availability_zones()["AvailabilityZones"])
    place_stub.add_response(
        "get_spot_placement_scores",
        {
            "SpotPlacementScores": [
                {"Region": region, "AvailabilityZoneId": z, "Score": 1 + i % 10}
                for i, z in enumerate(zone_ids)
            ]
        },
    )
    price_stub.activate()
    place_stub.activate()
    factory = MARKETS.get("aws")
    market: PriceSource = factory(
        regions=[region],
        instance_types=AWS_TYPES,
        ec2_clients={region: ec2},
        pricing_client=pricing,
        placement_client=placement,
        clock=ManualClock(T0),
    )
    return market


def _open_gcp(fake_url: str) -> PriceSource:
    """REST clients pointed at the fake Compute Engine (tests/fakes/gcp.py);
    prices from the public GCP price file (``tests.paths.SHARED_DATA``)."""
    from markets.clock import ManualClock
    from markets.gcp.sdk import build_compute_clients

    market: PriceSource = MARKETS.get("gcp")(
        project="spotfolio-test",
        clients=build_compute_clients(endpoint=fake_url, anonymous=True),
        regions=["us-central1", "us-east1"],
        instance_types=["a2-highgpu-1g", "a3-highgpu-8g", "g2-standard-4"],
        prices=DATA / "gcp-prices" / "gcp_prices_us_europe_2022-02_2025-06.csv.gz",
        clock=ManualClock(T0),
    )
    return market


def _open_store() -> PriceSource:
    """A daemon store (a SQLite file) holding one spot instance's day in the
    default market's first pool, read over the default market."""
    import tempfile
    from pathlib import Path

    from broker.daemon.store.store import Store
    from markets.cloud_fleet import Instance, InstanceState

    pool = MARKETS.get("default")().pools()[0].key
    url = f"sqlite:///{Path(tempfile.mkdtemp()) / 'state.db'}"
    store = Store(url)
    with store.transaction() as tx:
        inst = Instance(
            instance_id="i-1",
            pool_key=pool,
            tier="spot",
            workload="w",
            state=InstanceState.RUNNING,
            units=1,
            launched_at=T0,
        )
        tx.upsert_instances("me", [inst], T0)
        tx.count_experience("me", T0 + timedelta(hours=24), ("interruption",))
    store.close()
    return MARKETS.get("store")(url=url)


def _openers(moto_url: str) -> dict[str, Opener]:
    return {
        "default": lambda: MARKETS.get("default")(),
        "store": _open_store,
        "replay": lambda: MARKETS.get("replay")(path=DATA),
        "aws": lambda: _open_aws(moto_url),
        "gcp": lambda: _open_gcp(moto_url),  # the URL of the fake Compute Engine
    }


def test_every_registered_market_has_an_offline_opener() -> None:
    assert set(_openers("http://unused")) == set(MARKETS)


def test_every_registered_market_module_exists() -> None:
    # Checked without importing (no SDK is loaded): a name that points at no
    # module is a registry bug, not a market still to be written.
    targets = {name: MARKETS.target(name) for name in MARKETS}
    missing = {
        name: spec
        for name, spec in targets.items()
        if spec is not None and not _module_exists(spec.split(":")[0])
    }
    assert not missing, f"registered markets without a module: {missing}"


@pytest.fixture(params=sorted(MARKETS))
def opener(request: pytest.FixtureRequest) -> Opener:
    name: str = request.param
    url = request.getfixturevalue("moto_server") if name == "aws" else "http://unused"
    if name == "gcp":
        url = request.getfixturevalue("gcp_fake").url
    open_ = _openers(url)[name]

    def guarded() -> PriceSource:
        # Every opener injects offline clients (moto with dummy keys, the fake
        # Compute Engine with anonymous credentials, Stubbers) and opening a
        # market calls no cloud, so no credentials are looked up: an AuthError
        # here means an opener reached for real credentials, a bug, not a skip.
        try:
            return open_()
        except AuthError as e:
            pytest.fail(f"{name} market asked for credentials while opened offline: {e}")

    return guarded


def test_snapshot_honours_the_market_contract(opener: Opener) -> None:
    market = opener()
    assert isinstance(market, PriceSource)
    assert isinstance(market.name, str) and market.name
    snap = market.snapshot()
    assert isinstance(snap, MarketSnapshot)
    assert snap.pools, "a market with no pools cannot be planned on"
    for p in snap.pools:
        key = p.pool.key
        assert p.on_demand_usd_per_hour > 0, key
        if p.spot_usd_per_hour is not None:
            assert p.spot_usd_per_hour <= p.on_demand_usd_per_hour, key
        assert p.placement_score is None or 1 <= p.placement_score <= 10, key
        assert p.hazard.rate_per_hour >= 0, key
        assert p.observed_at <= snap.at + SKEW, key

    assert {p.key for p in market.pools()} == {p.pool.key for p in snap.pools}
    type_names = {t.name for t in market.instance_types()}
    assert {p.pool.instance_type for p in snap.pools} <= type_names


def test_snapshot_is_deterministic_for_the_same_inputs(opener: Opener) -> None:
    first = opener()
    snap = first.snapshot()
    assert first.snapshot(snap.at) == snap
    assert opener().snapshot(snap.at) == snap
