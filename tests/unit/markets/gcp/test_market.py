"""The GCP market against a local fake of the Compute Engine REST API.

Real google-cloud-compute REST clients talk HTTP to ``tests/fakes/gcp.py``
(``api_endpoint`` on 127.0.0.1, anonymous credentials). Prices come from a
hand-written price file in the format of the public GCP price list (expected
values below are computed by hand from its rows), and once from the real one.
"""

from __future__ import annotations

import csv
import gzip
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from google.api_core import exceptions as gexc

from markets import catalog
from markets.clock import ManualClock
from markets.errors import (
    AuthError,
    CapacityUnavailableError,
    InputError,
    QuotaExceededError,
    StaleDataError,
    ThrottledError,
    TransientError,
)
from markets.gcp.errors import operation_error, translate
from markets.gcp.inventory import AcceleratorSpec, gpu_model
from markets.gcp.market import GcpMarket, open_gcp_market
from markets.gcp.sdk import GCP_MARKET_API_CALLS, CallPolicy, build_compute_clients
from markets.model import HazardSource, Provider
from markets.protocols import PriceSource
from markets.registry import open_market
from tests.fakes.gcp import FakeCompute
from tests.paths import SHARED_DATA

DATA = SHARED_DATA
GCP_PRICES = DATA / "gcp-prices" / "gcp_prices_us_europe_2022-02_2025-06.csv.gz"
PROJECT = "spotfolio-test"
T0 = datetime(2025, 7, 1, 12, 0, tzinfo=UTC)
FAST = CallPolicy(retry_timeout_s=0.5, initial_s=0.01, maximum_s=0.05, request_s=5.0)
HEADER = (
    "snapshot_date,generated,machine_type,region,hour,hour_spot,month,month_1y,month_3y,month_spot"
)
# a2-highgpu-1g in us-central1: a spot change on 2025-06-01. month_1y 1460
# -> 2.0 $/h, month_3y 730 -> 1.0 $/h (730 h a month).
ROWS = (
    "2025-05-01,,a2-highgpu-1g,us-central1,3.6,1.2,2628,1460,730,876",
    "2025-06-01,,a2-highgpu-1g,us-central1,3.6,1.5,2628,1460,730,1095",
    "2025-06-01,,g2-standard-4,us-central1,0.7,0.28,511,321.2,230.0,204.4",
    "2025-06-01,,a3-highgpu-8g,us-central1,88.0,90.0,64240,,,",  # spot above on-demand
    "2025-06-01,,a2-highgpu-1g,us-east1,3.7,1.3,2701,1533,803,949",
)


@pytest.fixture
def prices(tmp_path: Path) -> Path:
    path = tmp_path / "gcp_prices.csv"
    path.write_text("\n".join((HEADER, *ROWS)) + "\n")
    return path


@pytest.fixture
def fake() -> Iterator[FakeCompute]:
    with FakeCompute(lifetime_s=60.0) as f:
        yield f


def market(
    fake: FakeCompute,
    clock: ManualClock,
    *,
    prices: Path | None = None,
    regions: tuple[str, ...] = ("us-central1",),
) -> GcpMarket:
    return open_gcp_market(
        project=PROJECT,
        clients=build_compute_clients(endpoint=fake.url, anonymous=True),
        regions=regions,
        instance_types=("a2-highgpu-1g", "a3-highgpu-8g", "g2-standard-4"),
        prices=prices,
        clock=clock,
        policy=FAST,
    )


def test_snapshot_joins_zones_machine_types_and_prices(gcp_fake: FakeCompute, prices: Path) -> None:
    m = market(gcp_fake, ManualClock(T0), prices=prices)
    assert isinstance(m, PriceSource)
    snap = m.snapshot()
    # us-central1 zones of the fake offering each type (tests/gcp_fake.OFFERINGS).
    assert sorted(p.pool.key for p in snap.pools) == [
        "gcp/us-central1/us-central1-a/a2-highgpu-1g",
        "gcp/us-central1/us-central1-a/a3-highgpu-8g",
        "gcp/us-central1/us-central1-a/g2-standard-4",
        "gcp/us-central1/us-central1-b/a2-highgpu-1g",
        "gcp/us-central1/us-central1-b/g2-standard-4",
        "gcp/us-central1/us-central1-c/a2-highgpu-1g",
        "gcp/us-central1/us-central1-c/a3-highgpu-8g",
        "gcp/us-central1/us-central1-c/g2-standard-4",
    ]
    a2 = snap.get("gcp/us-central1/us-central1-a/a2-highgpu-1g")
    assert (a2.instance.units, a2.instance.gpu_model, a2.instance.vcpus) == (1, "A100-40GB", 12)
    assert a2.instance.memory_gib == pytest.approx(85.0)  # 87040 MB
    assert a2.on_demand_usd_per_hour == 3.6
    assert a2.spot_usd_per_hour == 1.5  # the 2025-06-01 row
    assert a2.committed_1y_usd_per_hour == pytest.approx(2.0)
    assert a2.committed_3y_usd_per_hour == pytest.approx(1.0)
    assert a2.placement_score is None
    assert a2.hazard.source is HazardSource.ASSUMED and a2.hazard.rate_per_hour > 0
    a3 = snap.get("gcp/us-central1/us-central1-c/a3-highgpu-8g")
    assert (a3.instance.units, a3.instance.gpu_model) == (8, "H100")
    assert a3.spot_usd_per_hour is None and not a3.spot_available  # 90 > 88: dropped
    assert m.skipped["spot above on-demand"] == 2  # two zones offer it
    assert snap.stale is False  # the file's newest row is 30 days old
    assert all(p.observed_at <= snap.at for p in snap.pools)


def test_prices_are_as_of_the_snapshot_time(gcp_fake: FakeCompute, prices: Path) -> None:
    m = market(gcp_fake, ManualClock(T0), prices=prices)
    may = m.snapshot(datetime(2025, 5, 15, tzinfo=UTC))
    assert may.get("gcp/us-central1/us-central1-b/a2-highgpu-1g").spot_usd_per_hour == 1.2
    # g2 has no row before June: the catalog's dated list price, spot unknown.
    g2 = may.get("gcp/us-central1/us-central1-b/g2-standard-4")
    assert g2.on_demand_usd_per_hour == pytest.approx(0.706832)
    assert g2.spot_usd_per_hour is None


def test_without_a_price_file_prices_come_from_the_catalog(gcp_fake: FakeCompute) -> None:
    snap = market(gcp_fake, ManualClock(T0)).snapshot()
    a2 = snap.get("gcp/us-central1/us-central1-a/a2-highgpu-1g")
    assert a2.on_demand_usd_per_hour == pytest.approx(3.673385)  # catalog, us-central1
    assert a2.committed_1y_usd_per_hour == pytest.approx(3.673385 * (1 - 0.37))
    assert a2.spot_usd_per_hour is None and not a2.spot_available


def test_lists_are_read_across_pages(fake: FakeCompute, prices: Path) -> None:
    market(fake, ManualClock(T0), prices=prices, regions=("us-central1", "us-east1")).snapshot()
    # 5 zones at 2 per page; the machine types of all zones: 4+3+3+2+2 = 14
    # types filtered to the 3 asked for: 3+2+3+2+2 = 12 items, 6 pages.
    assert fake.calls["compute.zones.list"] == 3
    assert fake.calls["compute.machineTypes.aggregatedList"] == 6
    pages = [q for m, _, q in fake.requests if m == "compute.zones.list"]
    assert [bool(q.get("pageToken")) for q in pages] == [False, True, True]


def test_a_snapshot_calls_exactly_the_market_manifest(fake: FakeCompute, prices: Path) -> None:
    market(fake, ManualClock(T0), prices=prices).snapshot()
    assert set(fake.calls) == GCP_MARKET_API_CALLS


def test_caches_until_the_ttl_then_refetches(fake: FakeCompute, prices: Path) -> None:
    clock = ManualClock(T0)
    m = market(fake, clock, prices=prices)
    m.snapshot()
    before = fake.calls["compute.zones.list"]
    clock.advance(60)
    m.snapshot()
    assert fake.calls["compute.zones.list"] == before
    clock.advance(timedelta(hours=1))
    m.snapshot()
    assert fake.calls["compute.zones.list"] > before


def test_keeps_the_last_inventory_when_a_refresh_fails_and_says_stale(
    fake: FakeCompute, prices: Path
) -> None:
    clock = ManualClock(T0)
    m = market(fake, clock, prices=prices)
    first = m.snapshot()
    clock.advance(timedelta(hours=2))
    fake.fail_next("compute.machineTypes.aggregatedList", 503, "backendError", times=1000)
    second = m.snapshot()
    assert second.stale is True
    assert [p.pool for p in second.pools] == [p.pool for p in first.pools]


def test_an_inventory_kept_by_instance_types_is_asked_again_by_the_next_snapshot(
    fake: FakeCompute, prices: Path
) -> None:
    # instance_types() keeps the old machine types when their refresh fails; the
    # next snapshot clears that mark but does not trust the old list: it asks
    # again (a failure does not renew the cached list's age) and says stale.
    clock = ManualClock(T0)
    m = market(fake, clock, prices=prices)
    first = m.snapshot()
    clock.advance(timedelta(hours=2))
    fake.fail_next("compute.machineTypes.aggregatedList", 503, "backendError", times=1000)
    assert {t.name for t in m.instance_types()} == {p.pool.instance_type for p in first.pools}
    tried = fake.calls["compute.machineTypes.aggregatedList"]
    second = m.snapshot()
    assert fake.calls["compute.machineTypes.aggregatedList"] > tried
    assert second.stale is True and second.pools


def test_no_answer_at_all_is_stale_data_not_an_empty_market(fake: FakeCompute) -> None:
    fake.fail_next("compute.zones.list", 503, "backendError", times=1000)
    with pytest.raises(StaleDataError):
        market(fake, ManualClock(T0)).snapshot()


def test_one_503_is_retried_by_api_core(fake: FakeCompute) -> None:
    fake.fail_next("compute.zones.list", 503, "backendError")
    snap = market(fake, ManualClock(T0)).snapshot()
    assert snap.pools and not snap.stale
    assert fake.calls["compute.zones.list"] == 4  # the failed try + 3 pages


def test_permission_denied_fails_fast(fake: FakeCompute) -> None:
    fake.fail_next("compute.zones.list", 403, "forbidden", info="IAM_PERMISSION_DENIED")
    with pytest.raises(AuthError):
        market(fake, ManualClock(T0)).snapshot()
    assert fake.calls["compute.zones.list"] == 1  # not retried


def test_unknown_project_is_a_404_named_as_bad_input(gcp_fake: FakeCompute) -> None:
    clients = build_compute_clients(endpoint=gcp_fake.url, anonymous=True)
    m = open_gcp_market(project="no-such-project", clients=clients, clock=ManualClock(T0))
    with pytest.raises(InputError, match=r"compute\.zones\.list.*404"):
        m.snapshot()


def test_a_price_file_older_than_a_month_marks_the_snapshot_stale(
    gcp_fake: FakeCompute, prices: Path
) -> None:
    snap = market(gcp_fake, ManualClock(T0 + timedelta(days=40)), prices=prices).snapshot()
    assert snap.stale is True and snap.pools


def test_real_price_file_gives_its_rows_prices(gcp_fake: FakeCompute) -> None:
    at = datetime(2025, 6, 27, tzinfo=UTC)
    with gzip.open(GCP_PRICES, "rt") as f:
        rows = [
            r
            for r in csv.DictReader(f)
            if (r["machine_type"], r["region"]) == ("a2-highgpu-1g", "us-central1")
            and r["snapshot_date"] <= "2025-06-27"
        ]
    last = max(rows, key=lambda r: (r["snapshot_date"], r["generated"]))
    snap = market(gcp_fake, ManualClock(at), prices=GCP_PRICES).snapshot()
    a2 = snap.get("gcp/us-central1/us-central1-a/a2-highgpu-1g")
    assert a2.on_demand_usd_per_hour == pytest.approx(float(last["hour"]))
    assert a2.spot_usd_per_hour == pytest.approx(float(last["hour_spot"]))
    assert a2.committed_3y_usd_per_hour == pytest.approx(float(last["month_3y"]) / 730)


def test_registry_opens_gcp_and_rejects_bad_names(gcp_fake: FakeCompute) -> None:
    clients = build_compute_clients(endpoint=gcp_fake.url, anonymous=True)
    m = open_market("gcp", project=PROJECT, clients=clients, clock=ManualClock(T0))
    assert isinstance(m, GcpMarket) and m.name == "gcp"
    with pytest.raises(InputError, match="--regions"):
        open_market("gcp", project=PROJECT, clients=clients, regions="us_central1")
    with pytest.raises(InputError, match="--project"):
        open_market("gcp", project="X", clients=clients)


def test_gpu_model_names_unknown_accelerators_from_their_description() -> None:
    specs = {"nvidia-h200-141gb": AcceleratorSpec("nvidia-h200-141gb", "NVIDIA H200 141GB", 8)}
    assert gpu_model("nvidia-tesla-a100", specs) == "A100-40GB"
    assert gpu_model("nvidia-h200-141gb", specs) == "H200-141GB"
    assert gpu_model("nvidia-b300", specs) == "NVIDIA-B300"
    assert catalog.GPU_THROUGHPUT_VS_V100["H100"] > 0  # the names the catalog uses


def _api_error(cls: type[gexc.GoogleAPICallError], reason: str) -> gexc.GoogleAPICallError:
    return cls("boom", errors=[{"reason": reason, "message": "boom"}])


# api-core leaves RetryError.__init__ unannotated: name its type so calls are typed.
_retry_error: Callable[[str, Exception], gexc.RetryError] = gexc.RetryError


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        pytest.param(_api_error(gexc.Forbidden, "quotaExceeded"), QuotaExceededError, id="quota"),
        pytest.param(_api_error(gexc.Forbidden, "rateLimitExceeded"), ThrottledError, id="rate"),
        pytest.param(_api_error(gexc.Forbidden, "forbidden"), AuthError, id="403"),
        pytest.param(_api_error(gexc.Unauthorized, "authError"), AuthError, id="401"),
        pytest.param(_api_error(gexc.TooManyRequests, "rateLimit"), ThrottledError, id="429"),
        pytest.param(_api_error(gexc.ServiceUnavailable, "backendError"), TransientError, id="503"),
        pytest.param(_api_error(gexc.BadRequest, "invalid"), InputError, id="400"),
        pytest.param(
            _retry_error("gave up", _api_error(gexc.TooManyRequests, "x")),
            ThrottledError,
            id="retries-exhausted",
        ),
        pytest.param(
            _api_error(gexc.ServiceUnavailable, "ZONE_RESOURCE_POOL_EXHAUSTED"),
            CapacityUnavailableError,
            id="stockout-as-http",
        ),
    ],
)
def test_google_errors_map_onto_the_project_tree(
    error: Exception, expected: type[Exception]
) -> None:
    assert isinstance(translate(error, operation="compute.x"), expected)


def test_operation_errors_map_onto_the_project_tree() -> None:
    from google.cloud import compute_v1

    def op(code: str) -> compute_v1.Operation:
        return compute_v1.Operation(
            status="DONE", error={"errors": [{"code": code, "message": "m"}]}
        )

    pool = "gcp/us-central1/us-central1-a/a2-highgpu-1g"
    stockout = operation_error(
        op("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"), operation="insert", pool_key=pool
    )
    assert isinstance(stockout, CapacityUnavailableError) and stockout.pool_key == pool
    assert isinstance(operation_error(op("QUOTA_EXCEEDED"), operation="i"), QuotaExceededError)
    assert operation_error(compute_v1.Operation(status="DONE"), operation="i") is None


def test_pools_and_instance_types_agree_with_the_snapshot(gcp_fake: FakeCompute) -> None:
    m = market(gcp_fake, ManualClock(T0))
    keys = {p.key for p in m.pools()}
    assert keys == {p.pool.key for p in m.snapshot().pools}
    types = {t.name: t for t in m.instance_types()}
    assert set(types) == {"a2-highgpu-1g", "a3-highgpu-8g", "g2-standard-4"}
    assert all(t.provider is Provider.GCP for t in types.values())
