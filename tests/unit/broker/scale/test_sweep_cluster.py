"""``spotfolio sweep`` on a real Dask LocalCluster (2 worker processes): each
row is what ``spotfolio whatif`` prints for the scenario when run alone."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from broker.cli import cli, main
from broker.scale.table import COLUMNS, WHATIF_SCENARIOS

TINY = Path(__file__).parent / "tiny_workloads.yaml"

# 2 committed x 5 stress x 2 seeds-as-markets = 20 scenarios of a 1-day
# what-if on one small workload (about a second each on this machine)
GRID = """\
markets: [default, {market: default, options: ["seed=11"]}]
policies: [tiny.yaml]
committed: [null, 0.5]
stress: [1, 2, {interruption: 1, availability: 0.5}, {interruption: 3, availability: 0.8}, 0]
options: {days: 1, replan-hours: 24}
"""


def _timeless(doc: object) -> object:
    """Wall times are the one part of a what-if that differs between runs: the
    ``seconds`` block (left out of ``result_json``) and the solve time in the
    explanation ("by cbc in 0.82 s")."""
    if isinstance(doc, dict):
        return {k: _timeless(v) for k, v in doc.items() if k != "seconds"}
    if isinstance(doc, list):
        return [_timeless(v) for v in doc]
    if isinstance(doc, str):
        return re.sub(r" in \d+(\.\d+)? s\b", " in ? s", doc)
    return doc


def _alone(argv: list[str]) -> dict[str, object]:
    res = CliRunner().invoke(cli, ["whatif", *argv, "--json"])
    assert res.exit_code == 0, res.output
    doc: dict[str, object] = json.loads(res.stdout)
    return doc


@pytest.mark.slow
def test_twenty_scenarios_on_two_workers_equal_the_serial_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import duckdb

    (tmp_path / "tiny.yaml").write_text(TINY.read_text())
    grid = tmp_path / "grid.yaml"
    grid.write_text(GRID)
    out = tmp_path / "rows.parquet"
    assert main(["sweep", str(grid), "--workers", "2", "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["scenarios"], summary["failed"], summary["workers"]) == (20, 0, 2)

    con = duckdb.connect()
    rel = con.sql(f"SELECT * FROM '{out}' ORDER BY scenario")
    assert rel.columns == [n for n, _ in COLUMNS]
    rows = [dict(zip(rel.columns, r, strict=True)) for r in rel.fetchall()]
    assert [r["scenario"] for r in rows] == list(range(20))
    seen = set()
    for r in rows:
        alone = _alone(json.loads(r["argv"]))
        assert _timeless(json.loads(r["result_json"])) == _timeless(alone)
        by_name = {s["name"]: s for s in alone["scenarios"]}  # type: ignore[attr-defined]
        for name in WHATIF_SCENARIOS:
            assert r[f"{name}_total_cost_usd"] == by_name[name]["total_cost_usd"]
        assert r["error"] is None
        seen.add(
            (
                r["market_options"],
                r["committed"],
                r["interruption_multiplier"],
                r["availability_multiplier"],
            )
        )
    assert len(seen) == 20  # every point of the grid, once
