"""``spotfolio market show|fetch``: datasets and pools as JSON, the human table,
the fetch -> show round trip through moto's HTTP server, one-line exit-2 errors."""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
from contextlib import redirect_stdout
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from broker.cli import main
from markets.files.prices import parquet_available
from tests.fakes.replay_data import T0, write_mini, write_trace
from tests.paths import SHARED_DATA

DATA = SHARED_DATA
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} is not checked out")
AWS_CSV = DATA / "aws-spot-price-history" / "us-east-1abc_2021-03_2021-04.csv.gz"


# A command's --json output as json.loads gives it (Any: the tests index into
# the documented schema directly).
Doc = dict[str, Any]


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> Doc:
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert isinstance(out, dict)
    return out


def _fails(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("spotfolio: error:") and "\n" not in err
    return err


@pytest.fixture(scope="module")
def shared_show() -> Doc:
    if not DATA.is_dir():
        pytest.skip(f"{DATA} is not checked out")
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main(["market", "show", "--source", str(DATA), "--json"]) == 0
    out = json.loads(buf.getvalue())
    assert isinstance(out, dict)
    return out


@needs_data
def test_show_reports_every_dataset_with_span_and_counts(shared_show: Doc) -> None:
    out = shared_show
    assert out["schema"] == "spotfolio.market.show/1" and out["market"] == "replay"
    ds = {d["name"]: d for d in out["datasets"]}
    assert set(ds) == {
        "spot_traces",
        "aws_spot_prices",
        "gcp_prices",
        "gcp_machine_types",
        "spot_advisor",
        "fleet_traces",
    }
    # counts and spans recomputed here from the raw files
    traces = [
        json.loads(p.read_text()) for p in sorted(DATA.rglob("spot-availability-traces/**/*.json"))
    ]
    assert ds["spot_traces"]["rows"] == sum(len(t["data"]) for t in traces)
    assert len(ds["spot_traces"]["files"]) == len(traces)
    with gzip.open(AWS_CSV, "rt") as fh:
        stamps = [row["Timestamp"] for row in csv.DictReader(fh)]
    assert ds["aws_spot_prices"]["rows"] == len(stamps)
    first, last = (datetime.fromisoformat(s) for s in (min(stamps), max(stamps)))
    assert (ds["aws_spot_prices"]["start"], ds["aws_spot_prices"]["end"]) == (
        first.isoformat(),
        last.isoformat(),
    )
    assert ds["spot_traces"]["start"] == "2022-10-26T00:00:00+00:00"
    fleet_lines = sum(
        len([ln for ln in p.read_text().splitlines() if ln.strip()])
        for p in (DATA / "spot-fleet-node-traces").glob("*.csv")
    )
    assert ds["fleet_traces"]["rows"] == fleet_lines
    for d in ds.values():
        assert d["rows"] > 0 and d["rows_bad"] == 0
    assert out["span"]["start"] < out["span"]["end"]


@needs_data
def test_show_lists_every_pool_with_tiers_risk_and_provenance(shared_show: Doc) -> None:
    pools = shared_show["pools"]
    assert shared_show["pools_shown"] == shared_show["pools_total"] == len(pools)
    keys = [p["pool_key"] for p in pools]
    assert keys == sorted(keys)
    by_key = {p["pool_key"]: p for p in pools}
    c3 = by_key["gcp/us-east1/us-east1-b/c3-highcpu-88"]
    assert (c3["units"], c3["gpus"]) == (88, 0)
    assert c3["spot_usd_per_unit_hour"] == pytest.approx(c3["spot_usd_per_hour"] / 88)
    west = by_key["aws/us-west-2/us-west-2a/p3.2xlarge"]
    assert west["hazard"]["source"] == "observed" and west["hazard"]["events"] > 0
    assert west["hazard"]["ci_low_per_hour"] <= west["hazard"]["rate_per_hour"]
    assert west["clustering"]["zone"] == "aws/us-west-2a"
    assert 0 <= west["clustering"]["probability"] <= 1
    assert len(west["sources"]["traces"]) == 3 and "trace" in west["sources"]["origins"]
    for p in pools:
        assert p["on_demand_usd_per_hour"] > 0
        assert (
            p["spot_usd_per_hour"] is None or p["spot_usd_per_hour"] <= p["on_demand_usd_per_hour"]
        )
        assert p["sources"]["spot"] and p["sources"]["on_demand"]
    assert shared_show["left_out"]  # AWS types outside the catalog, GCP types without zones


@needs_data
def test_show_reports_no_estimate_outside_its_interval_and_a_calibration(
    shared_show: Doc,
) -> None:
    for p in shared_show["pools"]:  # a point estimate outside its interval is a bug
        hz = p["hazard"]
        assert hz["ci_low_per_hour"] <= hz["rate_per_hour"] <= hz["ci_high_per_hour"], p["pool_key"]
        if p["price"] is not None:  # a plan never prices spot below the price in force
            assert p["price"]["planning_usd_per_hour"] >= p["spot_usd_per_hour"] * (1 - 1e-12)
    cal = shared_show["calibration"]
    assert cal["traces"] == 16  # every availability and preemption trace
    assert cal["test_periods"] >= 100 and cal["coverage_target_met"] is True
    assert 0.85 <= cal["coverage"] <= 0.95 and cal["coverage_plain"] < cal["coverage"]
    ll = cal["log_likelihood"]
    assert ll["posterior"] > ll["pooled_rate"] > ll["advisor_prior"]


def test_show_works_on_another_directory_of_the_same_layout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_mini(tmp_path)
    write_trace(
        tmp_path, "availability", 16, "aws-01-12-2023", "us-west-2c_v100_1.json", [16, 16, 0, 8]
    )
    out = _json(capsys, ["market", "show", "--source", str(tmp_path), "--at", "2023-01-12T01:30"])
    ds = {d["name"]: d for d in out["datasets"]}
    assert ds["spot_traces"]["rows"] == 10 + 10 + 4 and len(ds["spot_traces"]["files"]) == 3
    assert ds["aws_spot_prices"]["rows"] == 5
    assert ds["gcp_prices"]["rows"] == 5 and ds["spot_advisor"]["rows"] == 2
    assert "fleet_traces" not in ds
    gang = {p["pool_key"]: p for p in out["pools"]}["aws/us-west-2/us-west-2c/p3.2xlarge"]
    assert gang["available_share"] == pytest.approx(1.0)  # 16 of 16 in the two ticks seen
    assert gang["spot_available"] is True
    # three traces of hours, not days: too short for one pool-day, nothing measured
    cal = out["calibration"]
    assert (cal["traces"], cal["test_periods"], cal["coverage"]) == (3, 0, None)


@pytest.mark.parametrize(
    ("at", "spot"),
    [
        pytest.param((T0 - timedelta(hours=1)).isoformat(), 1.00, id="before"),
        pytest.param(T0.isoformat(), 0.80, id="at-change"),
        pytest.param((T0 + timedelta(days=3)).isoformat(), 0.80, id="after"),
    ],
)
def test_show_at_gives_the_price_in_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], at: str, spot: float
) -> None:
    write_mini(tmp_path)
    argv = ["market", "show", "--source", str(tmp_path), "--at", at, "--match", "us-east-1a"]
    (pool,) = _json(capsys, argv)["pools"]
    assert pool["spot_usd_per_hour"] == pytest.approx(spot)
    assert pool["sources"]["spot"] == "aws-history"


def test_show_reports_the_price_regime_volatility_and_zone_spread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # us-east-1a p3.2xlarge: 1.00 from T0 - 10 d, 0.80 from T0; us-east-1b: 1.20
    write_mini(tmp_path)
    at = T0 + timedelta(days=3)
    argv = ["market", "show", "--source", str(tmp_path), "--at", at.isoformat()]
    pools = {p["pool_key"]: p for p in _json(capsys, [*argv, "--match", "p3.2xlarge"])["pools"]}
    a = pools["aws/us-east-1/us-east-1a/p3.2xlarge"]
    price = a["price"]
    assert (price["shifts"], price["regime_since"]) == (1, T0.isoformat())
    assert price["last_shift"] == pytest.approx(-0.2)
    assert price["regime_usd_per_hour"] == pytest.approx(0.8)
    hours = 13 * 24  # the window starts at the first price
    assert price["window_hours"] == hours
    vol = math.sqrt(168 * math.log(0.8) ** 2 / hours)
    assert price["weekly_volatility"] == pytest.approx(vol)
    assert price["planning_usd_per_hour"] == pytest.approx(0.8 * math.exp(vol))
    spread = a["zone_spread"]
    assert (spread["zones"], spread["cheapest_zone"]) == (2, "us-east-1a")
    assert spread["spread"] == pytest.approx(0.5) and spread["premium"] == pytest.approx(0.0)
    b = pools["aws/us-east-1/us-east-1b/p3.2xlarge"]
    assert b["zone_spread"]["premium"] == pytest.approx(0.5)
    assert b["price"]["shifts"] == 0 and b["price"]["margin_usd_per_hour"] == 0.0


def test_show_table_is_limited_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_mini(tmp_path)
    assert (
        main(["market", "show", "--source", str(tmp_path), "--limit", "3", "--sort", "spot"]) == 0
    )
    out = capsys.readouterr().out
    assert "pools (3 of 10)" in out and "7 more pools: raise --limit" in out
    assert "aws_spot_prices" in out and "left out: 1" in out


def test_show_default_market(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(capsys, ["market", "show", "--source", "default", "--limit", "500"])
    assert out["market"] == "default" and out["datasets"] == []
    assert out["pools_total"] == out["pools_shown"] > 0
    pools = out["pools"]
    assert all(p["sources"] is None and p["hazard"]["source"] == "model" for p in pools)
    assert any(p["clustering"] and p["clustering"]["events"] > 0 for p in pools)


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        pytest.param(["market", "show", "--at", "yesterday"], "--at", id="bad-at"),
        pytest.param(["market", "show", "--at", "1999-01-01"], "--at", id="at-outside-span"),
        pytest.param(["market", "show", "--source", "/nonexistent/dir"], "--source", id="missing"),
        pytest.param(["market", "show", "--limit", "0"], "--limit", id="limit"),
        pytest.param(
            [
                "market",
                "fetch",
                "aws",
                "--regions",
                "us-east-1",
                "--instance-types",
                "g5.xlarge",
                "--days",
                "0",
                "--out",
                "x.csv",
            ],
            "--days",
            id="days-zero",
        ),
        pytest.param(
            [
                "market",
                "fetch",
                "aws",
                "--regions",
                "us-east-1",
                "--instance-types",
                "g5.xlarge",
                "--days",
                "120",
                "--out",
                "x.csv",
            ],
            "--days",
            id="days-past-90",
        ),
        pytest.param(
            [
                "market",
                "fetch",
                "aws",
                "--regions",
                "us-east-1",
                "--instance-types",
                "g5.xlarge",
                "--out",
                "/nonexistent/dir/x.csv",
            ],
            "--out",
            id="out-dir-missing",
        ),
    ],
)
def test_bad_inputs_exit_2_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], names: str
) -> None:
    assert names in _fails(capsys, argv)


def test_unreadable_file_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "h.csv"
    bad.write_text("timestamp,provider,region,zone,instance_type,spot_usd_per_hour\nnot,a,row\n")
    assert str(bad) in _fails(capsys, ["market", "show", "--source", str(bad)])


# --- fetch -> show through moto's HTTP server -----------------------------------------


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Dummy credentials for the default chain; no real config is read."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz", ".parquet"])
def test_fetch_writes_a_history_the_replay_market_shows(
    moto_server: str,
    aws_env: None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    suffix: str,
) -> None:
    out_file = tmp_path / f"history{suffix}"
    argv = [
        "market",
        "fetch",
        "aws",
        "--regions",
        "us-east-1",
        "--instance-types",
        "g4dn.xlarge,g5.xlarge",
        "--days",
        "2",
        "--out",
        str(out_file),
        "--endpoint-url",
        moto_server,
    ]
    if suffix == ".parquet" and not parquet_available():
        assert "Parquet needs pyarrow" in _fails(capsys, argv)
        assert not out_file.exists()
        return
    summary = _json(capsys, argv)
    assert summary["schema"] == "spotfolio.market.fetch/1" and summary["rows"] > 0
    assert summary["format"] == ("parquet" if suffix == ".parquet" else "csv")
    assert set(summary["instance_types"]) == {"g4dn.xlarge", "g5.xlarge"}
    shown = _json(capsys, ["market", "show", "--source", str(out_file)])
    (ds,) = shown["datasets"]
    assert ds["name"] == "price_history" and ds["rows"] == summary["rows"]
    keys = {p["pool_key"] for p in shown["pools"]}
    # moto's prices are dummies; what matters is that every row became its pool
    assert len(keys) == summary["rows"]
    assert {k.split("/")[3] for k in keys} == {"g4dn.xlarge", "g5.xlarge"}
    assert {k.split("/")[2] for k in keys} <= set(summary["zones"])
    for p in shown["pools"]:
        assert p["sources"]["spot"] == "aws-history" and p["spot_usd_per_hour"] is not None


def test_fetch_json_lists_the_window_asked(
    moto_server: str, aws_env: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = str(tmp_path / "h.csv")
    argv = [
        "market",
        "fetch",
        "aws",
        "--regions",
        "us-east-1",
        "--instance-types",
        "g5.xlarge",
        "--days",
        "1.5",
        "--out",
        out_file,
        "--endpoint-url",
        moto_server,
    ]
    s = _json(capsys, argv)
    start, end = datetime.fromisoformat(s["start"]), datetime.fromisoformat(s["end"])
    assert end - start == timedelta(days=1.5) and end.tzinfo == UTC
    assert main(argv) == 0
    assert "spot price changes" in capsys.readouterr().out
