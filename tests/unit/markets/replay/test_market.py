"""The replay market over hand-made datasets (tests/fakes/replay_data.py) and over
``tests.paths.SHARED_DATA``: which pools it joins, as-of snapshots, fallbacks with their
provenance, hourly replay and aligned trace replay, bad inputs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from markets import catalog
from markets.errors import InputError
from markets.files.prices import load_aws_spot_prices
from markets.files.traces import load_spot_trace
from markets.hazard.prior import HazardPrior
from markets.model import HazardSource, PoolSnapshot
from markets.protocols import HistorySource
from markets.registry import open_market
from markets.replay import PoolDetail, ReplayMarket, open_replay_market
from tests.fakes.replay_data import AVAIL_2A, PREEMPT_2B, PRICES_2B, T0, write_mini, write_trace
from tests.paths import SHARED_DATA

DATA = SHARED_DATA
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} is not checked out")
H = timedelta(hours=1)
P3 = "p3.2xlarge"
EAST_A, EAST_B = f"aws/us-east-1/us-east-1a/{P3}", f"aws/us-east-1/us-east-1b/{P3}"
WEST_A, WEST_B = f"aws/us-west-2/us-west-2a/{P3}", f"aws/us-west-2/us-west-2b/{P3}"
G2 = "gcp/us-central1/us-central1-a/g2-standard-4"
G2_16 = "gcp/us-central1/us-central1-b/g2-standard-16"
COLUMNS = [
    "hour",
    "pool_key",
    "spot_usd_per_hour",
    "on_demand_usd_per_hour",
    "spot_available",
    "revocations",
]


@pytest.fixture(scope="module")
def mini(tmp_path_factory: pytest.TempPathFactory) -> ReplayMarket:
    return open_replay_market(path=write_mini(tmp_path_factory.mktemp("mini")))


def _pool(market: ReplayMarket, key: str, at: datetime) -> tuple[PoolSnapshot, PoolDetail]:
    snap, details = market.snapshot_with_details(at)
    i = [p.pool.key for p in snap.pools].index(key)
    return snap.pools[i], details[i]


# --- which pools ------------------------------------------------------------------


def test_pools_are_joined_across_inputs_and_the_rest_is_left_out(mini: ReplayMarket) -> None:
    gcp = {
        f"gcp/us-central1/us-central1-{z}/{t}"
        for z in "abc"
        for t in ("g2-standard-4", "g2-standard-16")
    }
    assert {p.key for p in mini.pools()} == {EAST_A, EAST_B, WEST_A, WEST_B} | gcp
    assert isinstance(mini, HistorySource)
    left = mini.left_out
    assert any("c5.large" in v for v in left.values())  # AWS, not in the catalog
    assert any("us-central1/c2-standard-4" in v for v in left.values())  # no known zones
    g16 = {t.name: t for t in mini.instance_types()}["g2-standard-16"]
    assert (g16.gpus, g16.units, g16.vcpus, g16.gpu_model) == (1, 1, 16, "L4")


def test_gpu_only_drops_cpu_trace_pools(tmp_path: Path) -> None:
    write_trace(tmp_path, "preemption", 1, "gcp-04-30-2023", "us-east1-b_c3-88.json", [0, 1, 1])
    (tmp_path / "types.csv").write_text("machine_type,cpu,ram\nc3-highcpu-88,88,176\n")
    (tmp_path / "prices.csv").write_text(
        "snapshot_date,machine_type,region,hour,month_1y,month_3y\n"
        "2023-02-17,c3-highcpu-88,us-east1,3.74,1730,1100\n"
    )
    market = open_replay_market(path=tmp_path)
    (pool,) = market.pools()
    c3 = market.instance_types()[0]
    assert pool.key == "gcp/us-east1/us-east1-b/c3-highcpu-88"
    assert (c3.gpus, c3.units) == (0, 88)  # CPU-only: units are vCPUs
    with pytest.raises(InputError, match="at least one pool"):
        open_replay_market(path=tmp_path, gpu_only=True)


# --- as-of snapshots ----------------------------------------------------------------


def test_snapshot_gives_the_spot_price_in_force_around_a_change_point(mini: ReplayMarket) -> None:
    cases = [
        (T0 - timedelta(seconds=1), 1.00),
        (T0, 0.80),  # a change point holds from its own time
        (T0 + timedelta(days=5), 0.80),
        (T0 + timedelta(days=10), 0.90),
    ]
    for at, want in cases:
        p, d = _pool(mini, EAST_A, at)
        assert p.spot_usd_per_hour == pytest.approx(want), at
        assert d.spot_source == "aws-history"
        assert p.observed_at <= at


def test_recorded_spot_ends_with_its_recording_then_the_advisor_answers(
    mini: ReplayMarket,
) -> None:
    at = T0 + timedelta(days=15)  # after the last AWS row, before the span ends
    p, d = _pool(mini, EAST_A, at)
    assert d.spot_source == "advisor savings"
    od = catalog.list_price("aws", "us-east-1", P3)
    assert p.spot_usd_per_hour == pytest.approx(od * (1 - 0.65))
    assert p.on_demand_usd_per_hour == od
    assert p.committed_1y_usd_per_hour == catalog.committed_price("aws", "us-east-1", P3, 1)


def test_trace_prices_and_same_type_discount(mini: ReplayMarket) -> None:
    at = T0 + 7.5 * H
    b, db = _pool(mini, WEST_B, at)
    assert b.spot_usd_per_hour == PRICES_2B[7]
    assert db.spot_source == "trace-prices"
    a, da = _pool(mini, WEST_A, at)
    # median of the p3.2xlarge pools' own spot / on-demand (0.80, 1.20, 0.95 over 3.06)
    assert da.spot_source == "same-type discount"
    assert a.spot_usd_per_hour == pytest.approx(0.95)
    _, d0 = _pool(mini, WEST_B, T0 - H)  # before its trace: no own price yet
    assert d0.spot_source == "same-type discount"


def test_trace_availability_and_hazard_use_only_what_was_seen_by_then(mini: ReplayMarket) -> None:
    at = T0 + 3.5 * H  # in tick 3 of [1, 1, 0, 0, ...]
    p, d = _pool(mini, WEST_A, at)
    assert p.spot_available is False
    assert p.available_share == pytest.approx(2 / 3.5)
    prior = HazardPrior.from_advisor_bucket(4)  # us-west-2 p3.2xlarge in the advisor
    # ticks 0-3 seen: one drop (1 -> 0), 2 node-hours held over the first 3 intervals
    want = (prior.pseudo_events + 1) / (prior.pseudo_hours + 2.0)
    assert p.hazard.rate_per_hour == pytest.approx(want)
    assert p.hazard.source is HazardSource.OBSERVED
    assert d.hazard.events == 1
    early, _ = _pool(mini, WEST_A, T0 - H)
    assert early.hazard.source is HazardSource.ADVISOR
    assert early.available_share is None
    assert early.placement_score is None


def test_gcp_list_prices_backfill_and_committed_from_monthly(mini: ReplayMarket) -> None:
    p, d = _pool(mini, G2, datetime(2022, 12, 5, tzinfo=UTC))
    assert p.on_demand_usd_per_hour == 0.70
    assert p.committed_1y_usd_per_hour == pytest.approx(0.70 * 0.63)
    assert p.spot_usd_per_hour is None and d.spot_source == "none"
    p, d = _pool(mini, G2, datetime(2023, 1, 20, tzinfo=UTC))
    assert (p.on_demand_usd_per_hour, p.spot_usd_per_hour) == (0.75, 0.25)
    assert d.spot_source == "gcp-list"
    q, dq = _pool(mini, G2_16, datetime(2022, 12, 5, tzinfo=UTC))  # before its first row
    assert q.on_demand_usd_per_hour == 1.20
    assert dq.on_demand_source == "gcp-list (earliest, backfilled)"
    assert q.observed_at <= datetime(2022, 12, 5, tzinfo=UTC)


def test_default_snapshot_is_the_end_of_the_span(mini: ReplayMarket) -> None:
    start, end = mini.span()
    assert start == datetime(2022, 12, 1, tzinfo=UTC)
    assert end == datetime(2023, 2, 1, tzinfo=UTC)
    assert mini.snapshot().at == end
    assert mini.snapshot() == mini.snapshot(end)


# --- hourly -------------------------------------------------------------------------


def test_hourly_schema_and_trace_hours(mini: ReplayMarket) -> None:
    h = mini.hourly(T0, 12)
    assert list(h.columns) == COLUMNS
    assert len(h) == 12 * len(mini.pools())
    assert str(h["hour"].dt.tz) == "UTC" and h["revocations"].dtype == np.int64
    assert h["hour"].is_monotonic_increasing  # hour-major
    a = h[h["pool_key"] == WEST_A].reset_index(drop=True)
    assert a["spot_available"].iloc[:10].tolist() == [float(x) for x in AVAIL_2A]
    assert a["spot_available"].iloc[10:].isna().all()  # no trace: not known
    assert a["revocations"].tolist() == [0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0]
    b = h[h["pool_key"] == WEST_B].reset_index(drop=True)
    assert b["spot_usd_per_hour"].iloc[:10].tolist() == PRICES_2B
    assert b["revocations"].sum() == 1  # PREEMPT_2B held -> not held once
    assert b["spot_available"].iloc[:10].tolist() == [float(x) for x in PREEMPT_2B]


def test_hourly_agrees_with_snapshots(mini: ReplayMarket) -> None:
    h = mini.hourly(T0 - 48 * H, 72).set_index(["hour", "pool_key"])
    for at in (T0 - 48 * H, T0 - H, T0 + 5 * H):
        snap = mini.snapshot(at)
        for p in snap.pools:
            row = h.loc[(pd.Timestamp(at), p.pool.key)]
            assert isinstance(row, pd.Series)  # one row per (hour, pool)
            assert row["on_demand_usd_per_hour"] == pytest.approx(p.on_demand_usd_per_hour)
            if p.spot_usd_per_hour is None:
                assert np.isnan(row["spot_usd_per_hour"])
            else:
                assert row["spot_usd_per_hour"] == pytest.approx(p.spot_usd_per_hour)


def test_hour_shares_of_a_sub_hour_trace(tmp_path: Path) -> None:
    # 15-minute ticks: hour 0 holds 3 of 4, hour 1 holds 1 of 4 with two losses
    data = [1, 1, 0, 1, 0, 1, 0, 0]
    write_trace(tmp_path, "availability", 1, "aws-01-10-2023", "us-west-2a_v100_1.json", data, 900)
    h = open_replay_market(path=tmp_path).hourly(T0, 2)
    assert h["spot_available"].tolist() == [0.75, 0.25]
    assert h["revocations"].tolist() == [1, 2]


# --- aligned replay ------------------------------------------------------------------


def test_aligned_replay_starts_every_trace_at_the_origin(tmp_path: Path) -> None:
    write_mini(tmp_path)
    old = [0, 0, 1, 1, 1]  # 2022 files: 1 = not held
    write_trace(tmp_path, "availability", 1, "aws-10-26-2022", "us-west-2c_v100_1.json", old)
    market = open_replay_market(path=tmp_path)
    origin = datetime(2030, 1, 1, tzinfo=UTC)
    view = market.aligned(origin)
    assert {p.key for p in view.pools()} == {WEST_A, WEST_B, f"aws/us-west-2/us-west-2c/{P3}"}
    assert view.span() == (origin, origin + 10 * H)
    h = market.hourly(origin, 5, align="relative").set_index(["pool_key", "hour"])
    first = h.xs(pd.Timestamp(origin), level="hour")["spot_available"]
    assert first.to_dict() == {WEST_A: 1.0, WEST_B: 0.0, f"aws/us-west-2/us-west-2c/{P3}": 1.0}
    # prices move with their trace: the preemption trace's tick prices at the origin
    assert h.loc[(WEST_B, pd.Timestamp(origin)), "spot_usd_per_hour"] == PRICES_2B[0]
    snap = view.snapshot(origin + 2.5 * H)
    assert snap.get(f"aws/us-west-2/us-west-2c/{P3}").spot_available is False


def test_aligned_picks_traces_by_id_one_per_pool(tmp_path: Path) -> None:
    write_mini(tmp_path)
    write_trace(tmp_path, "availability", 1, "aws-10-26-2022", "us-west-2a_v100_1.json", [0] * 20)
    market = open_replay_market(path=tmp_path)
    ids = market.trace_ids()
    old = "spot-availability-traces/availability/1-node/aws-10-26-2022/us-west-2a_v100_1"
    assert old in ids
    origin = datetime(2030, 1, 1, tzinfo=UTC)
    assert market.aligned(origin).span()[1] == origin + 20 * H  # the longest by default
    picked = market.aligned(origin, traces=[old])
    assert [p.key for p in picked.pools()] == [WEST_A]
    new = old.replace("aws-10-26-2022", "aws-01-10-2023")
    with pytest.raises(InputError, match="one trace per pool"):
        market.aligned(origin, traces=[old, new])
    with pytest.raises(InputError, match="trace ids"):
        market.aligned(origin, traces=["nope"])


# --- bad inputs ----------------------------------------------------------------------


def test_times_outside_the_span_are_input_errors(mini: ReplayMarket) -> None:
    with pytest.raises(InputError) as err:
        mini.snapshot(datetime(2020, 1, 1, tzinfo=UTC))
    assert err.value.source == "--at" and "span" in err.value.expected
    with pytest.raises(InputError, match="hours starting within the span"):
        mini.hourly(datetime(2023, 1, 31, tzinfo=UTC), 48)
    with pytest.raises(InputError, match="pool keys"):
        mini.hourly(T0, 1, pool_keys=["aws/us-east-1/us-east-1a/nope"])
    with pytest.raises(InputError, match="absolute or relative"):
        mini.hourly(T0, 1, align="sideways")  # type: ignore[arg-type]


def test_empty_or_unusable_sources_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="at least one pool"):
        open_replay_market(path=tmp_path)
    (tmp_path / "h.csv").write_text(
        "Timestamp,AvailabilityZone,InstanceType,SpotPrice\n2021-03-01T00:00:00Z,us-east-1a,c5.large,0.03\n"
    )
    with pytest.raises(InputError) as err:
        open_replay_market(path=tmp_path / "h.csv")
    assert "not in the catalog" in str(err.value.got)
    with pytest.raises(InputError):
        open_market(str(tmp_path / "missing"))


# --- the real data ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def real() -> ReplayMarket:
    if not DATA.is_dir():
        pytest.skip(f"{DATA} is not checked out")
    market = open_market(str(DATA))
    assert isinstance(market, ReplayMarket)
    return market


@needs_data
def test_real_data_pools_are_gpu_or_trace_pools(real: ReplayMarket) -> None:
    traces = {load_spot_trace(p).pool_key for p in DATA.rglob("spot-availability-traces/**/*.json")}
    keys = {p.key for p in real.pools()}
    assert traces <= keys and len(traces) == 11
    by_name = {t.name: t for t in real.instance_types()}
    for p in real.pools():
        assert by_name[p.instance_type].gpus > 0 or p.key in traces, p.key
    assert any(k.startswith("gcp/") and "a2-" in k for k in keys)
    assert {k for k in keys if k.startswith("aws/us-east-1/")}  # the 2021 price history


@needs_data
def test_real_snapshots_follow_the_recorded_rows(real: ReplayMarket) -> None:
    at = datetime(2021, 4, 1, tzinfo=UTC)
    raw = load_aws_spot_prices(
        DATA / "aws-spot-price-history" / "us-east-1abc_2021-03_2021-04.csv.gz"
    )
    rows = raw[(raw["zone"] == "us-east-1a") & (raw["instance_type"] == P3)]
    want = rows[rows["timestamp"] <= pd.Timestamp(at)]["spot_usd_per_hour"].iloc[-1]
    assert real.snapshot(at).get(EAST_A).spot_usd_per_hour == want
    at = datetime(2023, 4, 25, 12, tzinfo=UTC)
    tr = load_spot_trace(
        DATA / "spot-availability-traces/preemption/1-node/aws-04-22-2023/us-west-2b_v100_1.json"
    )
    tick = tr.frame[tr.frame["t"] <= pd.Timestamp(at)].iloc[-1]
    p = real.snapshot(at).get(WEST_B)
    assert p.spot_usd_per_hour == tick["price"]
    assert p.spot_available is bool(tick["available"])


@needs_data
def test_real_hazard_counts_every_loss_of_the_pool(real: ReplayMarket) -> None:
    traces = [
        load_spot_trace(p)
        for p in DATA.rglob("spot-availability-traces/**/*.json")
        if load_spot_trace(p).pool_key == WEST_A
    ]
    snap, details = real.snapshot_with_details()
    d = details[[p.pool.key for p in snap.pools].index(WEST_A)]
    assert d.hazard.events == sum(int(t.losses()["nodes_lost"].sum()) for t in traces)
    assert len(d.traces) == len(traces) == 3


@pytest.mark.skipif(not (DATA / "spot-availability-traces").is_dir(), reason=f"{DATA} absent")
def test_revocation_events_replay_the_recorded_losses_of_a_pool() -> None:
    market = open_replay_market(path=DATA)
    key = "aws/us-west-2/us-west-2a/p3.2xlarge"
    start, end = datetime(2023, 2, 16, tzinfo=UTC), datetime(2023, 2, 20, tzinfo=UTC)
    events = market.revocation_events(key, start, end)
    assert len(events) > 0
    assert events.is_monotonic_increasing
    assert events.min() >= start and events.max() < end
    # the hourly frame counts the same losses
    hourly = market.hourly(start, 96)
    mine = hourly[hourly.pool_key == key]
    assert int(mine.revocations.sum()) == len(events)
    assert len(market.revocation_events("aws/us-east-1/us-east-1a/g5.xlarge", start, end)) == 0


def test_regions_and_zones_options_keep_only_those_pools(tmp_path: Path) -> None:
    root = write_mini(tmp_path / "data")
    every = open_replay_market(path=root)
    regions = sorted({p.region for p in every.pools()})
    zones = sorted({p.zone for p in every.pools()})
    assert len(regions) > 1 and len(zones) > 1  # something to restrict
    one = open_market(str(root), regions=regions[0])
    assert isinstance(one, ReplayMarket)
    assert {p.region for p in one.pools()} == {regions[0]}
    assert {p.key for p in one.pools()} == {p.key for p in every.pools() if p.region == regions[0]}
    both = open_replay_market(path=root, zones=f"{zones[0]}, {zones[-1]}")
    assert {p.zone for p in both.pools()} == {zones[0], zones[-1]}
    # The span and the snapshots of the kept pools are the unrestricted ones'.
    assert both.span() == every.span()
    at = every.span()[1]
    kept = {s.pool.key: s for s in both.snapshot(at).pools}
    assert kept == {s.pool.key: s for s in every.snapshot(at).pools if s.pool.key in kept}


def test_a_region_the_data_does_not_hold_is_named_with_what_it_holds(tmp_path: Path) -> None:
    root = write_mini(tmp_path / "data")
    with pytest.raises(InputError) as e:
        open_replay_market(path=root, regions="us-west-9")
    assert e.value.source == "regions" and "us-west-9" in str(e.value)
    assert "names in the recorded data" in str(e.value)
    with pytest.raises(InputError, match="zone names like"):
        open_replay_market(path=root, zones="not a zone")
    with pytest.raises(InputError, match="region names like"):
        open_replay_market(path=root, regions="")
