"""``spotfolio sweep --inputs-url``: the grid's files published once as one
bundle (a ``file://`` directory, or S3 on moto's server) and read from there
by the workers; a scenario's rows equal a run from the files in place, a
tampered bundle is refused, a bad URL is one line and exit 2."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest
from click.testing import CliRunner

from broker.cli import cli, main
from broker.cli.sweep import bundled, run_fetched, run_shipped
from broker.scale import sweep_inputs
from markets.aws.sdk import s3_client
from tests.unit.broker.scale.test_sweep_cluster import TINY, _timeless
from tests.unit.broker.scale.test_sweep_processes import _rows

GRID = """\
policies: [tiny.yaml]
committed: [null, 0.5]
options: {days: 1, replan-hours: 24}
"""


def _grid(tmp_path: Path) -> Path:
    (tmp_path / "tiny.yaml").write_text(TINY.read_text())
    grid = tmp_path / "grid.yaml"
    grid.write_text(GRID)
    return grid


def _sweep(grid: Path, out: Path, *extra: str) -> None:
    res = CliRunner().invoke(
        cli, ["sweep", str(grid), "--workers", "1", "--out", str(out), "--json", *extra]
    )
    assert res.exit_code == 0, res.output


def test_a_bundle_from_a_file_url_gives_the_rows_of_the_files_in_place(tmp_path: Path) -> None:
    grid, share = _grid(tmp_path), tmp_path / "share"
    share.mkdir()
    _sweep(grid, tmp_path / "here.parquet")
    _sweep(grid, tmp_path / "url.parquet", "--inputs-url", share.as_uri())
    assert len(list(share.glob("*.tar.gz"))) == 1  # one bundle for the 2 scenarios
    assert _rows(tmp_path / "url.parquet") == _rows(tmp_path / "here.parquet")


def test_a_worker_reads_the_bundle_from_s3_once_and_refuses_another(
    tmp_path: Path, moto_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, v in {
        "AWS_ENDPOINT_URL": moto_server,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(k, v)
    boto3.client("s3").create_bucket(Bucket="sweep-inputs")
    src = tmp_path / "tiny.yaml"
    src.write_text(TINY.read_text())
    argv = ("--policies", str(src), "--days", "1", "--replan-hours", "24")
    data, where = bundled([argv, argv])
    assert where == {str(src): "0/tiny.yaml"} and bundled([argv])[0] == data  # deterministic
    location, digest = sweep_inputs.publish(
        sweep_inputs.check_url("s3://sweep-inputs/grids/"), data, s3_client
    )
    assert location == f"s3://sweep-inputs/grids/{digest}.tar.gz"
    src.unlink()  # the worker has no copy: only the bundle
    got = run_fetched((argv, location, digest, where))
    assert got["error"] is None and got["result"] is not None
    # read once a process: the same directory
    assert sweep_inputs.fetch(location, digest, s3_client) == sweep_inputs.fetch(
        location, digest, s3_client
    )
    src.write_text(TINY.read_text())
    assert _timeless(got["result"]) == _timeless(run_shipped((argv, {}))["result"])
    # another object under the published name is not run
    boto3.client("s3").put_object(Bucket="sweep-inputs", Key="grids/x.tar.gz", Body=data + b"x")
    bad = run_fetched((argv, "s3://sweep-inputs/grids/x.tar.gz", "0" * 64, where))
    assert bad["result"] is None and "not the bundle published" in str(bad["error"])


@pytest.mark.parametrize(
    "url", ["garbage", "http://example.com/x", "s3://", "file://host/tmp", "file:///nonexistent"]
)
def test_a_bad_inputs_url_is_one_line_and_exit_2(
    tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    grid = _grid(tmp_path)
    assert main(["sweep", str(grid), "--inputs-url", url]) == 2
    line = capsys.readouterr().err.strip()
    assert "\n" not in line and "--inputs-url" in line and url in line
    assert not grid.with_suffix(".parquet").exists()
