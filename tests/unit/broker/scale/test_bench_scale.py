"""``machinery.scale`` in ``spotfolio bench --json``: the scale targets
with their met flags, and the measurements behind them at a small size."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from broker.bench import runner
from broker.bench.scale import parallel_efficiency, year_whatif
from broker.cli import cli


def test_scale_targets_read_the_scale_block() -> None:
    out = {
        "machinery": {
            "scale": {
                "parallel": {"efficiency": 0.83},
                "default_whatif": {"seconds": 12.5, "peak_rss_mib": 200.0},
                "year_whatif": {"seconds": 61.0, "peak_rss_mib": 400.0},
            }
        }
    }
    rows = {t["metric"]: t for t in runner.check_targets(out)}
    assert rows["scale.parallel.efficiency"]["met"] is True
    assert rows["scale.default_whatif.seconds"]["met"] is False  # 12.5 s > 10 s
    assert rows["scale.year_whatif.seconds"]["met"] is False  # 61 s > 60 s
    assert rows["scale.year_whatif.peak_rss_mib"]["met"] is True
    out["machinery"]["scale"]["year_whatif"]["seconds"] = 59.0
    out["machinery"]["scale"]["default_whatif"]["seconds"] = 9.5
    rows = {t["metric"]: t for t in runner.check_targets(out)}
    assert rows["scale.default_whatif.seconds"]["met"] is True
    assert rows["scale.year_whatif.seconds"]["met"] is True


def test_the_solver_target_is_two_seconds_to_a_proven_half_percent() -> None:
    def rows(seconds: float) -> dict[str, runner.TargetRow]:
        block = {"solver": {"40x20x24": {"seconds": seconds, "gap": 0.004}}}
        return {t["metric"]: t for t in runner.check_targets({"machinery": block})}

    assert rows(1.9)["solver.40x20x24.seconds"]["met"] is True
    assert rows(2.1)["solver.40x20x24.seconds"]["met"] is False
    assert rows(1.9)["solver.40x20x24.gap"]["met"] is True


def test_small_bench_runs_leave_the_scale_targets_unmeasured() -> None:
    assert runner.MACHINERY_HOOKS["scale"] is not None
    assert runner.MACHINERY_HOOKS["scale"](None, 1, 0) == {}  # type: ignore[arg-type]
    rows = {t["metric"]: t for t in runner.check_targets({"machinery": {"scale": {}}})}
    assert rows["scale.year_whatif.seconds"]["met"] is None
    assert rows["scale.default_whatif.seconds"]["met"] is None


@pytest.mark.slow
def test_the_child_process_what_if_is_the_command_run_alone() -> None:
    got = year_whatif(days=1)
    assert (got["days"], got["hours"], got["pools"]) == (1, 24, 302)
    assert isinstance(got["peak_rss_mib"], float) and got["peak_rss_mib"] > 10
    res = CliRunner().invoke(cli, ["whatif", "--days", "1", "--json"])
    alone = {s["name"]: s for s in json.loads(res.stdout)["scenarios"]}
    assert got["spotfolio_total_cost_usd"] == alone["spotfolio"]["total_cost_usd"]


@pytest.mark.slow
def test_parallel_efficiency_runs_the_same_scenarios_on_two_workers() -> None:
    got = parallel_efficiency(n=2, workers=2)
    assert (got["scenarios"], got["workers"], got["same_results"]) == (2, 2, True)
    assert isinstance(got["efficiency"], float) and got["efficiency"] > 0
