"""The file loaders over the real public data (``tests.paths.SHARED_DATA``), and over
malformed files written to tmp_path."""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from markets.errors import InputError
from markets.files.advisor import (
    ADVISOR_COLUMNS,
    INTERRUPTION_BUCKETS,
    bucket_hazard_per_hour,
    load_spot_advisor,
)
from markets.files.fleet_traces import (
    FLEET_COLUMNS,
    load_fleet_trace,
    node_count_series,
    node_lifetimes,
    revocation_times,
)
from markets.files.parsing import BadRowPolicy, get_report
from markets.files.prices import (
    GCP_PRICE_COLUMNS,
    HOURS_PER_MONTH,
    PRICE_COLUMNS,
    as_of,
    load_aws_spot_prices,
    load_gcp_machine_types,
    load_gcp_prices,
    parquet_available,
    read_price_history,
    write_price_history,
)
from markets.files.traces import SpotTrace, load_spot_trace, load_spot_traces
from tests.paths import SHARED_DATA

DATA = SHARED_DATA
AWS_CSV = DATA / "aws-spot-price-history" / "us-east-1abc_2021-03_2021-04.csv.gz"
GCP_CSV = DATA / "gcp-prices" / "gcp_prices_us_europe_2022-02_2025-06.csv.gz"
TYPES_CSV = DATA / "gcp-prices" / "machine_type_attributes.csv"
ADVISOR_JSON = DATA / "aws-spot-advisor" / "spot-advisor-data-2025-06-28.json"
FLEET = DATA / "spot-fleet-node-traces"
TRACES = DATA / "spot-availability-traces"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} is not checked out")
GPU_FAMILIES = r"^(p2|p3|p3dn|g3|g4dn|inf1|f1)\."


def utc(text: str) -> pd.Timestamp:
    return pd.Timestamp(text, tz="UTC")


@pytest.fixture(scope="module")
def aws_prices() -> pd.DataFrame:
    return load_aws_spot_prices(AWS_CSV)


@pytest.fixture(scope="module")
def gcp_prices() -> pd.DataFrame:
    return load_gcp_prices(GCP_CSV)


@pytest.fixture(scope="module")
def traces() -> list[SpotTrace]:
    return load_spot_traces(TRACES)


def _under(traces: list[SpotTrace], part: str) -> list[SpotTrace]:
    return [t for t in traces if part in Path(t.path).as_posix()]


# --- spot availability / preemption traces ------------------------------------


@needs_data
def test_every_spot_trace_loads_with_its_location_facts(traces: list[SpotTrace]) -> None:
    assert len(traces) == len(list(TRACES.rglob("*.json")))
    for tr in traces:
        assert list(tr.frame.columns[:3]) == ["t", "raw", "available"]
        assert str(tr.frame["t"].dt.tz) == "UTC"
        assert tr.gap_seconds > 0
        assert tr.zone.startswith(tr.region)
        assert tr.frame["t"].iloc[0] == pd.Timestamp(tr.start)
        assert (tr.frame["t"].diff().dropna() == pd.Timedelta(seconds=tr.gap_seconds)).all()
        assert tr.frame["available"].between(0, tr.nodes).all()
        assert 0.0 <= tr.held_share <= 1.0
    kinds = {(t.kind, t.nodes) for t in traces}
    assert kinds == {("availability", 1), ("availability", 16), ("preemption", 1)}
    assert {t.instance_type for t in traces} == {
        "p3.2xlarge",
        "p3.16xlarge",
        "p2.xlarge",
        "p2.8xlarge",
        "c3-highcpu-88",
    }
    assert {t.provider for t in traces} == {"aws", "gcp"}


@needs_data
def test_trace_folder_names_give_start_provider_and_instance_type() -> None:
    tr = load_spot_trace(TRACES / "availability/1-node/aws-10-26-2022/us-west-2b_k80_8.json")
    assert tr.start == pd.Timestamp("2022-10-26T00:00Z")
    assert (tr.provider, tr.region, tr.zone) == ("aws", "us-west-2", "us-west-2b")
    assert (tr.instance_type, tr.raw_name, tr.gpus_per_node) == ("p2.8xlarge", "k80_8", 8)
    gcp = load_spot_trace(TRACES / "preemption/1-node/gcp-04-30-2023/us-east1-b_c3-88.json")
    assert (gcp.provider, gcp.region, gcp.instance_type) == ("gcp", "us-east1", "c3-highcpu-88")
    assert gcp.kind == "preemption"


@needs_data
def test_one_node_traces_read_by_collection_date(traces: list[SpotTrace]) -> None:
    """1-node raw 1 = could not hold spot in the 2022 files (the authors'
    simulator inverts it), = held from 2023 on (markets.files.traces docstring)."""
    for tr in _under(traces, "/1-node/"):
        raw = tr.frame["raw"].to_numpy()
        held = raw if tr.start.year >= 2023 else 1 - raw
        assert (tr.frame["available"].to_numpy() == held).all()
        assert tr.held_share == pytest.approx(held.mean())
        # a loss is a 1 -> 0 step of what was held
        assert len(tr.losses()) == int(((held[:-1] == 1) & (held[1:] == 0)).sum())
    # data/README: the 45-day V100 trace's held shares lie in 0.17-0.91
    for tr in _under(traces, "availability/1-node/aws-02-15-2023"):
        assert 0.17 <= round(tr.held_share, 2) <= 0.91


def test_one_node_raw_can_be_read_as_held(tmp_path: Path) -> None:
    doc = {"metadata": {"gap_seconds": 60}, "data": [0, 1, 1, 0]}
    path = _trace_file(tmp_path, doc)  # a 2023 folder: read as held by default
    held = load_spot_trace(path)
    assert held.frame["available"].tolist() == [0, 1, 1, 0]
    assert held.losses()["t"].tolist() == [utc("2023-01-02T00:03")]
    preempted = load_spot_trace(path, one_node_raw="preempted")
    assert preempted.frame["available"].tolist() == [1, 0, 0, 1]
    old = tmp_path / "availability" / "1-node" / "aws-12-31-2022" / path.name
    old.parent.mkdir(parents=True)
    old.write_text(json.dumps(doc))
    assert load_spot_trace(old).frame["available"].tolist() == [1, 0, 0, 1]


@needs_data
def test_multi_node_trace_counts_nodes_and_is_mostly_all_or_none(
    traces: list[SpotTrace],
) -> None:
    """docs/concepts/market.md: for 16-node clusters, >94 % of the time either
    all or none of the nodes were available."""
    (tr,) = _under(traces, "/16-node/")
    avail = tr.frame["available"]
    assert tr.nodes == 16 and (avail == tr.frame["raw"]).all()
    assert avail.max() == 16
    assert avail.isin([0, 16]).mean() > 0.94
    assert tr.held_share == pytest.approx((avail == 16).mean())


@needs_data
def test_preemption_trace_prices_are_per_tick_dollars() -> None:
    tr = load_spot_trace(TRACES / "preemption/1-node/aws-04-22-2023/us-west-2c_v100_1.json")
    assert tr.has_prices
    price = tr.frame["price"]
    assert len(price) == tr.ticks and price.notna().all()
    # p3.2xlarge on-demand is $3.06/h (AWS list price): spot must be below it.
    assert (price > 0).all() and (price < 3.06).all()


@needs_data
def test_45_day_v100_traces_span_45_days_and_vary_over_time(traces: list[SpotTrace]) -> None:
    v100 = _under(traces, "availability/1-node/aws-02-15-2023")
    assert len(v100) == 3
    for tr in v100:
        assert 44 <= tr.hours / 24 <= 46
        # neither always nor never: a real market moves
        assert 0.0 < tr.held_share < 1.0
        assert len(tr.losses()) > 10


def _trace_file(tmp_path: Path, doc: object, name: str = "us-west-2a_v100_1.json") -> Path:
    folder = tmp_path / "availability" / "1-node" / "aws-01-02-2023"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        pytest.param(
            {"metadata": {"gap_seconds": 0}, "data": [0, 1]}, "metadata.gap_seconds", id="gap0"
        ),
        pytest.param({"metadata": {}, "data": [0, 1]}, "metadata.gap_seconds", id="no-gap"),
        pytest.param(
            {"metadata": {"gap_seconds": 60}, "data": [0, 2, 1]}, "data[1]", id="2-in-1node"
        ),
        pytest.param({"metadata": {"gap_seconds": 60}, "data": [0, 1, 0.5]}, "data[2]", id="float"),
        pytest.param({"metadata": {"gap_seconds": 60}, "data": [0, True]}, "data[1]", id="bool"),
        pytest.param({"metadata": {"gap_seconds": 60}, "data": []}, "data", id="empty"),
        pytest.param(
            {"metadata": {"gap_seconds": 60}, "data": [0, 1], "prices": [0.9]}, "prices", id="short"
        ),
        pytest.param(
            {"metadata": {"gap_seconds": 60}, "data": [0, 1], "prices": [0.9, -1]},
            "prices[1]",
            id="neg-price",
        ),
    ],
)
def test_bad_trace_values_name_file_and_field(tmp_path: Path, doc: object, field: str) -> None:
    path = _trace_file(tmp_path, doc)
    with pytest.raises(InputError) as err:
        load_spot_trace(path)
    assert err.value.source == str(path)
    assert err.value.field == field


def test_trace_name_and_folder_are_validated(tmp_path: Path) -> None:
    good = {"metadata": {"gap_seconds": 60}, "data": [0, 1, 1]}
    with pytest.raises(InputError) as err:
        load_spot_trace(_trace_file(tmp_path, good, name="nozone.json"))
    assert err.value.field == "file name"
    loose = tmp_path / "loose" / "us-west-2a_v100_1.json"
    loose.parent.mkdir()
    loose.write_text(json.dumps(good))
    with pytest.raises(InputError) as err:
        load_spot_trace(loose)
    assert err.value.field == "folder name"
    # explicit facts make a loose file loadable
    tr = load_spot_trace(loose, provider="aws", kind="preemption", nodes=1, start=utc("2022-01-01"))
    assert tr.frame["available"].tolist() == [1, 0, 0]
    assert tr.losses()["t"].tolist() == [utc("2022-01-01T00:01")]


def test_trace_without_prices_has_no_price_column_and_nulls_become_nan(tmp_path: Path) -> None:
    doc = {"metadata": {"gap_seconds": 30}, "data": [0, 0, 1], "prices": [0.5, None, 0.6]}
    tr = load_spot_trace(_trace_file(tmp_path, doc))
    assert tr.frame["price"].isna().tolist() == [False, True, False]
    assert tr.end == tr.start + pd.Timedelta(seconds=90)


# --- AWS spot price history ---------------------------------------------------


@needs_data
def test_aws_price_history_loads_sorted_with_schema(aws_prices: pd.DataFrame) -> None:
    df = aws_prices
    assert tuple(df.columns) == PRICE_COLUMNS
    assert str(df["timestamp"].dt.tz) == "UTC"
    assert set(df["zone"]) == {"us-east-1a", "us-east-1b", "us-east-1c"}
    assert set(df["region"]) == {"us-east-1"} and set(df["provider"]) == {"aws"}
    assert df["timestamp"].min() >= utc("2021-03-01") and df["timestamp"].max() < utc("2021-05-01")
    assert (df["spot_usd_per_hour"] > 0).all()
    key = df[["zone", "instance_type", "timestamp"]]
    assert key.equals(key.sort_values(["zone", "instance_type", "timestamp"]))
    report = get_report(df)
    assert report is not None and report.rows_bad == 0 and report.rows_read >= len(df)


@needs_data
def test_aws_gpu_rows_cover_march_and_april_2021(aws_prices: pd.DataFrame) -> None:
    gpu = aws_prices[aws_prices["instance_type"].str.match(GPU_FAMILIES)]
    # an independent count straight from the file: no GPU row is lost
    raw = pd.read_csv(AWS_CSV, usecols=["InstanceType"])
    assert len(gpu) == int(raw["InstanceType"].str.match(GPU_FAMILIES).sum()) > 4000
    months = set(gpu["timestamp"].dt.strftime("%Y-%m"))
    assert months == {"2021-03", "2021-04"}
    assert {"p3.2xlarge", "p3.16xlarge", "g4dn.xlarge"} <= set(gpu["instance_type"])


AWS_ROWS = [
    ("2021-04-30T23:58:58+00:00", "us-east-1c", "p3.2xlarge", "0.918000"),
    ("2021-04-29T17:18:42+00:00", "us-east-1a", "p3.2xlarge", "0.9"),
    ("2021-04-29T18:00:00+00:00", "us-east-1a", "g4dn.xlarge", "0.1578"),
]


def _aws_csv(path: Path, rows: Sequence[tuple[str, ...]], *, gz: bool = False) -> Path:
    text = "Timestamp,AvailabilityZone,InstanceType,SpotPrice\n" + "".join(
        ",".join(r) + "\n" for r in rows
    )
    if gz:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def _api_record(r: tuple[str, ...], product: str = "Linux/UNIX") -> dict[str, str]:
    return {
        "AvailabilityZone": r[1],
        "InstanceType": r[2],
        "ProductDescription": product,
        "SpotPrice": r[3],
        "Timestamp": r[0],
    }


def test_json_pages_and_csv_give_the_same_frame(tmp_path: Path) -> None:
    from_csv = load_aws_spot_prices(_aws_csv(tmp_path / "p.csv.gz", AWS_ROWS, gz=True))
    recs = [_api_record(r) for r in AWS_ROWS]
    one_page = tmp_path / "page.json"
    one_page.write_text(json.dumps({"SpotPriceHistory": recs, "NextToken": ""}))
    pages = tmp_path / "pages.json"
    pages.write_text(
        json.dumps(
            [{"SpotPriceHistory": recs[:2], "NextToken": "x"}, {"SpotPriceHistory": recs[2:]}]
        )
    )
    lines = tmp_path / "pages.jsonl"
    lines.write_text("\n".join(json.dumps({"SpotPriceHistory": [r]}) for r in recs) + "\n")
    for path in (one_page, pages, lines):
        pd.testing.assert_frame_equal(load_aws_spot_prices(path), from_csv)
    assert len(from_csv) == 3
    assert from_csv["zone"].tolist() == ["us-east-1a", "us-east-1a", "us-east-1c"]


def test_json_other_products_and_duplicate_pages_are_noted(tmp_path: Path) -> None:
    recs = [_api_record(r) for r in AWS_ROWS]
    recs.append(_api_record(AWS_ROWS[0], product="Windows"))
    path = tmp_path / "pages.json"
    path.write_text(json.dumps([{"SpotPriceHistory": recs}, {"SpotPriceHistory": recs[:1]}]))
    df = load_aws_spot_prices(path)
    assert len(df) == 3
    report = get_report(df)
    assert report is not None
    assert any("Windows" not in n and "Linux/UNIX" in n for n in report.notes)
    assert any("duplicate" in n for n in report.notes)


def test_bad_rows_past_threshold_name_file_and_line(tmp_path: Path) -> None:
    rows = [
        *AWS_ROWS[:1],
        ("2021-04-30T00:00:00Z", "us-east-1a", "p3.2xlarge", "free"),
        *AWS_ROWS[1:],
    ]
    path = _aws_csv(tmp_path / "bad.csv", rows)
    with pytest.raises(InputError) as err:
        load_aws_spot_prices(path)
    assert err.value.source == str(path)
    assert err.value.field is not None and "line 3" in err.value.field
    assert "SpotPrice" in err.value.expected
    assert str(path) in str(err.value) and "line 3" in str(err.value)


def test_bad_rows_under_threshold_are_counted_and_reported(tmp_path: Path) -> None:
    good = [
        (f"2021-04-01T00:{i // 60:02d}:{i % 60:02d}Z", "us-east-1b", "p3.8xlarge", "3.1")
        for i in range(299)
    ]
    rows: list[tuple[str, ...]] = [
        *good[:100],
        ("yesterday", "us-east-1b", "p3.8xlarge", "3.1"),
        *good[100:],
    ]
    rows += [("2021-04-02T00:00:00Z", "us-east-1b", "p3.8xlarge")]  # wrong width
    path = _aws_csv(tmp_path / "some_bad.csv", rows)
    df = load_aws_spot_prices(path)  # 2 of 301 = 0.66 % < 1 %
    report = get_report(df)
    assert report is not None
    assert (report.rows_read, report.rows_bad, len(df)) == (301, 2, 299)
    where = {b.location: b.reason for b in report.bad_examples}
    assert "Timestamp" in where["line 102"]
    assert "expected 4 fields, got 3" in where["line 302"]
    with pytest.raises(InputError, match="line 102"):
        load_aws_spot_prices(path, policy=BadRowPolicy(max_count=1))


def test_missing_columns_and_bad_json_are_input_errors(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("Timestamp,Zone,SpotPrice\n2021-01-01T00:00:00Z,us-east-1a,0.1\n")
    with pytest.raises(InputError) as err:
        load_aws_spot_prices(path)
    assert err.value.field is not None and "header" in err.value.field
    path = tmp_path / "x.json"
    path.write_text('{"SpotPriceHistory": [}')
    with pytest.raises(InputError, match="line 1"):
        load_aws_spot_prices(path)


@needs_data
@pytest.mark.parametrize("suffix", [".csv", ".csv.gz", ".parquet"])
def test_price_history_write_read_round_trip(
    tmp_path: Path, aws_prices: pd.DataFrame, suffix: str
) -> None:
    df = aws_prices[aws_prices["instance_type"].str.match(GPU_FAMILIES)].reset_index(drop=True)
    path = tmp_path / f"history{suffix}"
    if suffix == ".parquet" and not parquet_available():
        with pytest.raises(InputError, match="pyarrow"):
            write_price_history(df, path)
        return
    write_price_history(df, path)
    back = read_price_history(path)
    pd.testing.assert_frame_equal(back, df)
    assert not path.with_name(path.name + ".tmp").exists()


# --- GCP prices and machine types ---------------------------------------------


@needs_data
def test_gcp_prices_load_with_schema_and_span(gcp_prices: pd.DataFrame) -> None:
    df = gcp_prices
    assert tuple(df.columns) == GCP_PRICE_COLUMNS
    assert df["valid_from"].min() >= utc("2022-02-01")
    assert df["valid_from"].max() < utc("2025-07-01")
    assert {"a2-highgpu-1g", "a3-highgpu-8g", "g2-standard-4"} <= set(df["machine_type"])
    assert set(df["region"].str.split("-").str[0]) == {"us", "europe"}
    # spot list prices start in 2023-05 (data README)
    assert df.loc[df["valid_from"] < utc("2023-05-01"), "spot_usd_per_hour"].isna().all()
    assert df.loc[df["valid_from"] > utc("2023-06-01"), "spot_usd_per_hour"].notna().mean() > 0.5


@needs_data
def test_gcp_committed_prices_are_monthly_over_730_hours(gcp_prices: pd.DataFrame) -> None:
    raw = pd.read_csv(GCP_CSV)
    row = raw[(raw["machine_type"] == "a2-highgpu-1g") & (raw["region"] == "us-central1")].iloc[0]
    got = gcp_prices[
        (gcp_prices["machine_type"] == "a2-highgpu-1g")
        & (gcp_prices["region"] == "us-central1")
        & (gcp_prices["snapshot_date"] == utc(row["snapshot_date"]))
    ].iloc[0]
    assert got["committed_1y_usd_per_hour"] == pytest.approx(row["month_1y"] / 730)
    assert got["committed_3y_usd_per_hour"] == pytest.approx(row["month_3y"] / 730)
    assert HOURS_PER_MONTH == 730
    assert got["committed_3y_usd_per_hour"] < got["committed_1y_usd_per_hour"]
    assert got["committed_1y_usd_per_hour"] < got["on_demand_usd_per_hour"]


@needs_data
def test_as_of_gives_the_price_in_force(gcp_prices: pd.DataFrame) -> None:
    key = ["region", "machine_type"]
    one = gcp_prices[
        (gcp_prices["region"] == "us-central1") & (gcp_prices["machine_type"] == "g2-standard-4")
    ]
    assert len(one) >= 2
    t0, t1 = one["valid_from"].iloc[0], one["valid_from"].iloc[1]
    mid = t0 + (t1 - t0) / 2
    hit = as_of(one, mid, by=key, time_col="valid_from")
    assert len(hit) == 1 and hit["valid_from"].iloc[0] == t0
    assert as_of(one, t0 - pd.Timedelta(seconds=1), by=key, time_col="valid_from").empty
    assert as_of(one, t1, by=key, time_col="valid_from")["valid_from"].iloc[0] == t1
    # the vectorised form agrees with the scalar form on every key
    times = [utc("2022-06-01"), utc("2024-01-01"), utc("2025-06-30")]
    many = as_of(gcp_prices, times, by=key, time_col="valid_from")
    for at in times:
        single = as_of(gcp_prices, at, by=key, time_col="valid_from")
        got = many[many["at"] == at].drop(columns="at").reset_index(drop=True)
        pd.testing.assert_frame_equal(got, single)


@needs_data
def test_gcp_machine_types_give_gpu_model_and_count() -> None:
    df = load_gcp_machine_types(TYPES_CSV).set_index("machine_type")
    assert tuple(df.loc["a2-highgpu-8g", ["gpu_model", "gpus", "vcpus"]]) == ("a100", 8, 96)
    assert df.loc["e2-micro", "vcpus"] == 0.25  # shared-core: a fraction of a vCPU
    assert tuple(df.loc["a2-ultragpu-1g", ["gpu_model", "gpus"]]) == ("a100-80gb", 1)
    assert tuple(df.loc["g2-standard-4", ["gpu_model", "gpus"]]) == ("l4", 1)
    assert df.loc["n2-standard-8", "gpus"] == 0 and df["gpu_model"].isna()["n2-standard-8"]
    assert (df["memory_gib"] > 0).all() and (df["vcpus"] > 0).all()


def test_gcp_bad_date_is_reported_with_its_line(tmp_path: Path) -> None:
    header = (
        "snapshot_date,generated,machine_type,region,hour,hour_spot,month,month_1y,month_3y,"
        "month_spot\n"
    )
    good = "2023-06-01,,g2-standard-4,us-central1,0.7,0.2,511,322,230,146\n"
    path = tmp_path / "gcp.csv"
    path.write_text(header + good + "June,,g2-standard-4,us-east1,0.7,,511,322,230,\n")
    with pytest.raises(InputError) as err:
        load_gcp_prices(path)
    assert err.value.field is not None and "line 3" in err.value.field
    df = load_gcp_prices(path, policy=BadRowPolicy(max_share=0.5))
    assert len(df) == 1 and df["spot_usd_per_hour"].iloc[0] == pytest.approx(0.2)
    assert df["committed_1y_usd_per_hour"].iloc[0] == pytest.approx(322 / 730)


# --- AWS Spot Instance Advisor --------------------------------------------------


@needs_data
def test_advisor_loads_buckets_and_savings() -> None:
    adv = load_spot_advisor(ADVISOR_JSON)
    df = adv.frame
    assert tuple(df.columns) == ADVISOR_COLUMNS
    assert df["region"].nunique() == 33
    assert set(df["os"]) == {"Linux", "Windows"}
    assert set(df["bucket"]) == set(INTERRUPTION_BUCKETS)
    lows = df["bucket"].map(lambda b: INTERRUPTION_BUCKETS[b][0])
    assert (df["interruption_low"] == lows).all()
    assert (df["interruption_low"] < df["interruption_high"]).all()
    assert (df["savings_fraction"] <= 1).all()
    linux = df[(df["os"] == "Linux") & (df["region"] == "us-east-1")].set_index("instance_type")
    assert {"p4d.24xlarge", "p5.48xlarge", "g5.xlarge", "g6.xlarge"} <= set(linux.index)
    types = adv.instance_types.set_index("instance_type")
    assert types.loc["p3.2xlarge", "vcpus"] == 8 and types.loc["p3.2xlarge", "memory_gib"] == 61
    assert adv.hazard_prior("us-east-1", "p3.2xlarge") == bucket_hazard_per_hour(
        int(linux["bucket"]["p3.2xlarge"])
    )
    assert adv.hazard_prior("us-east-1", "no.such") is None


def test_bucket_hazard_is_the_monthly_share_as_a_constant_rate() -> None:
    assert bucket_hazard_per_hour(0) == pytest.approx(-math.log(1 - 0.025) / 730)
    assert bucket_hazard_per_hour(2, share=0.5) == pytest.approx(math.log(2) / 730)
    rates = [bucket_hazard_per_hour(b) for b in range(5)]
    assert rates == sorted(rates) and len(set(rates)) == 5
    # a rate whose month survival reproduces the band's share
    assert 1 - math.exp(-rates[3] * 730) == pytest.approx(0.175)
    with pytest.raises(InputError):
        bucket_hazard_per_hour(5)


def test_advisor_bad_record_is_located(tmp_path: Path) -> None:
    recs = {f"m5.{i}xlarge": {"r": 1, "s": 60} for i in range(2)}
    recs["p3.2xlarge"] = {"r": 7, "s": 70}
    path = tmp_path / "adv.json"
    path.write_text(
        json.dumps({"spot_advisor": {"us-east-1": {"Linux": recs}}, "instance_types": {}})
    )
    with pytest.raises(InputError) as err:
        load_spot_advisor(path)
    assert err.value.field == "spot_advisor.us-east-1.Linux.p3.2xlarge"


# --- fleet node traces ----------------------------------------------------------


@needs_data
@pytest.mark.parametrize("name", ["p3", "g4dn"])
def test_fleet_traces_give_lifetimes_counts_and_revocations(name: str) -> None:
    df = load_fleet_trace(FLEET / f"{name}-trace.csv")
    assert tuple(df.columns) == FLEET_COLUMNS
    assert df["t_ms"].is_monotonic_increasing
    n_add = int((df["event"] == "add").sum())
    n_rem = int((df["event"] == "remove").sum())
    # data README: ~11 h of fleet membership
    assert 9 <= df["t"].max() / pd.Timedelta(hours=1) <= 12
    counts = node_count_series(df)
    assert (counts["nodes"] >= 0).all()
    assert counts["nodes"].iloc[-1] == n_add - n_rem
    life = node_lifetimes(df)
    assert len(life) == n_add and int((~life["censored"]).sum()) == n_rem
    assert (life["lifetime_s"] >= 0).all()
    rev = revocation_times(df)
    assert len(rev) == n_rem and rev.is_monotonic_increasing


def test_fleet_membership_errors_are_bad_rows(tmp_path: Path) -> None:
    lines = [f"{i * 1000},add,node{i}" for i in range(1, 200)]
    lines.insert(50, "60000,remove,node999")  # never added
    lines.append("500000,remove,node1")
    path = tmp_path / "fleet.csv"
    path.write_text("\r\n".join(lines) + "\r\n")
    df = load_fleet_trace(path)
    report = get_report(df)
    assert report is not None and report.rows_bad == 1
    assert report.bad_examples[0].location == "line 51"
    assert "not in the fleet" in report.bad_examples[0].reason
    assert node_count_series(df)["nodes"].iloc[-1] == 198
    path.write_text("0,add,node1\n5,explode,node1\n")
    with pytest.raises(InputError, match="line 2"):
        load_fleet_trace(path)
    assert np.isin(FLEET_COLUMNS, list(df.columns)).all()


# --- row bookkeeping -------------------------------------------------------------


def test_line_numbers_are_physical_lines_with_blank_lines_and_quotes(tmp_path: Path) -> None:
    text = (
        "Timestamp,AvailabilityZone,InstanceType,SpotPrice\r\n"
        "\r\n"
        "2021-04-01T00:00:00Z,us-east-1a,p3.2xlarge,0.9\r\n"
        "\r\n"
        "2021-04-01T01:00:00Z,us-east-1a,p3.2xlarge,-1\r\n"
    )
    plain = tmp_path / "blank.csv"
    plain.write_text(text)
    quoted = tmp_path / "quoted.csv"
    quoted.write_text(text.replace("us-east-1a", '"us-east-1a"'))
    for path in (plain, quoted):  # fast path, then the csv-module path
        df = load_aws_spot_prices(path, policy=BadRowPolicy(max_share=0.5))
        report = get_report(df)
        assert report is not None and (report.rows_read, report.rows_bad) == (2, 1)
        bad = report.bad_examples[0]
        assert bad.location == "line 5" and "SpotPrice" in bad.reason
        assert bad.text.endswith("p3.2xlarge,-1")
        assert df["zone"].tolist() == ["us-east-1a"]


def test_error_message_names_file_lines_and_expectation(tmp_path: Path) -> None:
    rows = [(f"2021-04-01T00:00:{i:02d}Z", "nowhere", "p3.2xlarge", "1") for i in range(3)]
    path = _aws_csv(tmp_path / "zones.csv", rows)
    with pytest.raises(InputError) as err:
        load_aws_spot_prices(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}: line 2, line 3, line 4: expected at most 1 % bad rows")
    assert "3 of 3 rows bad, first: AvailabilityZone is not a zone name" in msg
