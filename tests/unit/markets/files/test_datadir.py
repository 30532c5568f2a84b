"""``markets.files.datadir.discover`` over the public data and over other layouts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from markets.clock import ManualClock
from markets.errors import InputError
from markets.files.datadir import DataInventory, classify, discover
from markets.files.fleet_traces import load_fleet_trace
from markets.files.prices import PRICE_COLUMNS, load_aws_spot_prices
from markets.files.traces import load_spot_traces
from tests.paths import SHARED_DATA

DATA = SHARED_DATA
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} is not checked out")


@pytest.fixture(scope="module")
def inventory() -> DataInventory:
    return discover(DATA)


@needs_data
def test_discover_finds_every_dataset_in_shared_data(inventory: DataInventory) -> None:
    names = {d.name for d in inventory.datasets}
    assert names == {
        "spot_traces",
        "aws_spot_prices",
        "gcp_prices",
        "gcp_machine_types",
        "spot_advisor",
        "fleet_traces",
    }
    assert inventory.errors == ()
    skipped = {Path(p).name for p in inventory.skipped}
    assert skipped == {"README.md", "LICENSE"}
    traces = inventory.dataset("spot_traces")
    assert traces is not None
    assert len(traces.files) == len(list((DATA / "spot-availability-traces").rglob("*.json")))
    assert traces.rows == sum(t.ticks for t in inventory.spot_traces)
    assert set(traces.zones) >= {"us-west-2a", "us-west-2b", "us-central1-a"}
    assert sorted(inventory.fleet_traces) == ["g4dn", "p3"]
    assert inventory.advisor is not None


@needs_data
def test_inventory_spans_and_counts_match_the_loaders(inventory: DataInventory) -> None:
    aws = inventory.dataset("aws_spot_prices")
    assert aws is not None and aws.rows_bad == 0
    direct = load_aws_spot_prices(
        DATA / "aws-spot-price-history/us-east-1abc_2021-03_2021-04.csv.gz"
    )
    assert aws.rows == len(direct) == len(inventory.aws_spot_prices)
    assert aws.start == direct["timestamp"].min().to_pydatetime()
    assert aws.zones == ("us-east-1a", "us-east-1b", "us-east-1c")
    gcp = inventory.dataset("gcp_prices")
    assert gcp is not None and gcp.start is not None and gcp.end is not None
    assert (gcp.start.year, gcp.end.year) == (2022, 2025)
    assert "us-central1" in gcp.regions and "a3-highgpu-8g" in gcp.instance_types
    fleet = inventory.dataset("fleet_traces")
    assert fleet is not None
    assert fleet.rows == sum(len(df) for df in inventory.fleet_traces.values())
    summary = json.loads(json.dumps(inventory.to_dict()))
    assert {d["name"] for d in summary["datasets"]} == {d.name for d in inventory.datasets}


def _copy(src: Path, dst: Path) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(src, dst)
    return dst


@needs_data
def test_discover_tolerates_other_layouts_missing_parts_and_extra_traces(tmp_path: Path) -> None:
    # a fleet trace in an arbitrary folder, an AWS API page, an extra trace
    # copied under a new zone name, and an unknown file; no GCP, no advisor.
    _copy(DATA / "spot-fleet-node-traces/p3-trace.csv", tmp_path / "mine/fleet-a.csv")
    page = {
        "SpotPriceHistory": [
            {
                "AvailabilityZone": "us-west-2a",
                "InstanceType": "p3.2xlarge",
                "ProductDescription": "Linux/UNIX",
                "SpotPrice": "0.9180",
                "Timestamp": "2023-04-22T00:00:00.000Z",
            }
        ],
        "NextToken": "",
    }
    (tmp_path / "mine/page-1.json").write_text(json.dumps(page))
    src = (
        DATA / "spot-availability-traces/availability/1-node/aws-02-15-2023/us-west-2a_v100_1.json"
    )
    _copy(src, tmp_path / "availability/1-node/aws-03-01-2024/us-east-1f_v100_1.json")
    (tmp_path / "notes.txt").write_text("hello\n")
    (tmp_path / ".hidden.json").write_text("{}")
    clock = ManualClock()
    inv = discover(tmp_path, clock=clock)
    assert {d.name for d in inv.datasets} == {"fleet_traces", "aws_spot_prices", "spot_traces"}
    assert [Path(p).name for p in inv.skipped] == ["notes.txt"]
    (tr,) = inv.spot_traces
    assert (tr.zone, tr.start.year) == ("us-east-1f", 2024)
    assert list(inv.aws_spot_prices.columns) == list(PRICE_COLUMNS)
    assert inv.aws_spot_prices["zone"].tolist() == ["us-west-2a"]
    assert inv.gcp_prices.empty and inv.advisor is None
    assert "zone" not in inv.gcp_prices.columns and "machine_type" in inv.gcp_prices.columns
    assert len(inv.fleet_traces["fleet-a"]) == len(load_fleet_trace(tmp_path / "mine/fleet-a.csv"))
    assert inv.load_seconds == 0.0  # the manual clock did not move


def test_discover_strict_raises_and_lenient_records(tmp_path: Path) -> None:
    bad = tmp_path / "availability/1-node/aws-01-02-2023/us-west-2a_v100_1.json"
    bad.parent.mkdir(parents=True)
    bad.write_text(json.dumps({"metadata": {"gap_seconds": -5}, "data": [0, 1]}))
    with pytest.raises(InputError) as err:
        discover(tmp_path)
    assert err.value.source == str(bad) and err.value.field == "metadata.gap_seconds"
    inv = discover(tmp_path, strict=False)
    assert inv.spot_traces == () and len(inv.errors) == 1 and str(bad) in inv.errors[0]
    with pytest.raises(InputError):
        discover(tmp_path / "missing")


@pytest.mark.slow
@needs_data
def test_several_price_files_are_merged_and_deduplicated(tmp_path: Path) -> None:
    src = DATA / "aws-spot-price-history/us-east-1abc_2021-03_2021-04.csv.gz"
    _copy(src, tmp_path / "a/prices.csv.gz")
    _copy(src, tmp_path / "b/prices-again.csv.gz")
    inv = discover(tmp_path)
    aws = inv.dataset("aws_spot_prices")
    assert aws is not None and len(aws.files) == 2
    assert len(inv.aws_spot_prices) == aws.rows // 2


def test_classify_reads_content_not_names(tmp_path: Path) -> None:
    cases = {
        "a.csv": "Timestamp,AvailabilityZone,InstanceType,SpotPrice\n",
        "b.csv": ",".join(PRICE_COLUMNS) + "\n",
        "c.csv": "snapshot_date,machine_type,region,hour\n",
        "d.csv": "machine_type,cpu,ram\n",
        "e.csv": "0,add,node1\n",
        "f.json": '{"metadata": {"gap_seconds": 1}, "data": [0]}',
        "g.json": '{"spot_advisor": {}}',
        "h.json": '{"other": 1}',
        "i.csv": "x,y\n",
        "j.bin": "Timestamp,AvailabilityZone,InstanceType,SpotPrice\n",
    }
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
    got = {name: classify(tmp_path / name) for name in cases}
    assert got == {
        "a.csv": "aws_spot_prices",
        "b.csv": "price_history",
        "c.csv": "gcp_prices",
        "d.csv": "gcp_machine_types",
        "e.csv": "fleet_traces",
        "f.json": "spot_traces",
        "g.json": "spot_advisor",
        "h.json": None,
        "i.csv": None,
        "j.bin": None,
    }


@needs_data
def test_discover_loads_traces_like_the_trace_loader(inventory: DataInventory) -> None:
    direct = load_spot_traces(DATA / "spot-availability-traces")
    assert [t.pool_key for t in inventory.spot_traces] == [t.pool_key for t in direct]
    assert [t.held_share for t in inventory.spot_traces] == [t.held_share for t in direct]
