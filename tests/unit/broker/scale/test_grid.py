"""The sweep grid: expansion in a fixed order, and one-line errors (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.cli import main
from broker.cli.sweep import check_option
from broker.scale.grid import load_grid
from markets.errors import InputError

TINY = Path(__file__).parent / "tiny_workloads.yaml"


def _grid(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "grid.yaml"
    p.write_text(text)
    return p


def test_the_product_of_the_axes_last_axis_fastest(tmp_path: Path) -> None:
    (tmp_path / "w.yaml").write_text(TINY.read_text())
    g = load_grid(
        _grid(
            tmp_path,
            "policies: [null, w.yaml]\ncommitted: [null, 0.4, '0.4,0.6']\n"
            "stress: [1, {interruption: 2, availability: 0.8}]\noptions: {days: 3, seed: 1}\n",
        ),
        check_option,
    )
    assert len(g.scenarios) == 2 * 3 * 2
    assert [s.index for s in g.scenarios] == list(range(12))
    s = g.scenarios[1]
    assert (s.policies, s.committed, s.interruption_multiplier, s.availability_multiplier) == (
        None,
        None,
        2.0,
        0.8,
    )
    assert s.argv == (
        "--market",
        "default",
        "--interruption-multiplier",
        "2.0",
        "--availability-multiplier",
        "0.8",
        "--days",
        "3",
        "--seed",
        "1",
    )
    last = g.scenarios[-1]
    assert last.policies == str(tmp_path / "w.yaml")
    assert last.argv[4:6] == ("--committed", "0.4,0.6")


@pytest.mark.parametrize(
    ("text", "field", "expected"),
    [
        pytest.param("stresses: [1]\n", "stresses", "one of markets", id="unknown-key"),
        pytest.param(
            "stress: [1, {interruption: -1}]\n",
            "stress[1].interruption",
            ">=",
            id="negative-multiplier",
        ),
        pytest.param(
            "stress: [{interruption: 2, availabilty: 0.5}]\n",
            "stress[0]",
            "a multiplier",
            id="misspelt-stress-key",
        ),
        pytest.param("demands: [nope.csv]\n", "demands[0]", "an existing file", id="no-file"),
        pytest.param(
            "committed: [0.4, 170]\n", "committed[1]", "shares of peak", id="committed-out-of-range"
        ),
        pytest.param("options: {days: 0}\n", "options.days", "days", id="days-zero"),
        pytest.param("options: {dayz: 3}\n", "options.dayz", "one of days", id="unknown-option"),
        pytest.param("options: {start: yesterday}\n", "options.start", "ISO 8601", id="bad-start"),
        pytest.param("markets: []\n", "markets", "a non-empty list", id="empty-axis"),
        pytest.param(
            "markets: [{market: default, opts: []}]\n",
            "markets[0]",
            "market name",
            id="bad-market-mapping",
        ),
        pytest.param("committed: [0.4\n", "line", "valid YAML", id="bad-yaml"),
    ],
)
def test_bad_grid_names_file_field_and_expectation(
    tmp_path: Path, text: str, field: str, expected: str
) -> None:
    path = _grid(tmp_path, text)
    with pytest.raises(InputError) as e:
        load_grid(path, check_option)
    msg = str(e.value)
    assert msg.startswith(f"{path}: {field}")
    assert expected in msg


def test_sweep_exits_2_on_a_bad_grid_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _grid(tmp_path, "stress: [1, {interruption: -1}]\n")
    assert main(["sweep", str(path), "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"spotfolio: error: {path}: stress[1].interruption: expected a finite")
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "grid.parquet").exists()


def test_a_grid_sets_usage_scenarios_strict_and_every_other_whatif_option(
    tmp_path: Path,
) -> None:
    (tmp_path / "usage.csv").write_text("timestamp,pool_key,tier,units\n")
    g = load_grid(
        _grid(tmp_path, "options: {usage: usage.csv, scenarios: 3, strict: true, workers: 1}\n"),
        check_option,
    )
    (s,) = g.scenarios
    assert s.argv[-7:] == (
        "--usage",
        str(tmp_path / "usage.csv"),
        "--scenarios",
        "3",
        "--strict",
        "--workers",
        "1",
    )
    (off,) = load_grid(_grid(tmp_path, "options: {strict: false}\n"), check_option).scenarios
    assert "--strict" not in off.argv
    with pytest.raises(InputError, match=r"options\.strict.*true or false"):
        load_grid(_grid(tmp_path, "options: {strict: 1}\n"), check_option)
    with pytest.raises(InputError, match=r"options\.usage.*existing file"):
        load_grid(_grid(tmp_path, "options: {usage: nope.csv}\n"), check_option)
    with pytest.raises(InputError, match=r"options\.scenarios"):
        load_grid(_grid(tmp_path, "options: {scenarios: many}\n"), check_option)
    with pytest.raises(InputError, match=r"options\.json"):  # the sweep owns the output
        load_grid(_grid(tmp_path, "options: {json: true}\n"), check_option)
