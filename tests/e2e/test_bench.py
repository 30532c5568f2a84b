"""The bench: settings composed by the runner, the JSON schema, the report,
the portfolio hook, and the two commands on a small directory of traces laid
out like the public datasets (written here), in seconds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from broker.bench import BenchData, runner
from broker.bench.report import markdown, write_report
from broker.cli import main
from broker.simulate import AvailabilityTrace
from tests.paths import SHARED_DATA

DATA = SHARED_DATA
DEADLINE_KEYS = {
    "mean_cost_vs_on_demand",
    "p75_cost_vs_on_demand",
    "deadline_misses",
    "spot_hours_vs_omniscient",
}
FLEET_KEYS = {"availability", "cost_vs_on_demand", "cost_vs_omniscient", "unserved_replica_hours"}


def _spells(rng: np.random.Generator, ticks: int, up: float, down: float) -> list[int]:
    out: list[int] = []
    state = 1
    while len(out) < ticks:
        out += [state] * int(rng.geometric(1.0 / (up if state else down)))
        state = 1 - state
    return out[:ticks]


def _traces(days: int = 6) -> tuple[AvailabilityTrace, ...]:
    rng = np.random.default_rng(3)
    n = days * 144
    return tuple(
        AvailabilityTrace(
            name=f"synthetic/{zone}",
            zone=zone,
            group="synthetic",
            tick_s=600,
            held=np.array(_spells(rng, n, up, 4.0), dtype=bool),
        )
        for zone, up in (("us-west-2a", 30.0), ("us-west-2b", 8.0))
    )


PORTFOLIO_POLICIES = {"on_demand", "committed_quantile", "static_mix", "spotfolio",
                      "hindsight"}  # fmt: skip
PORTFOLIO_KEYS = {
    "total_cost_usd",
    "cost_vs_hindsight",
    "cost_vs_bound",
    "unmet_serving_unit_hours",
}


@pytest.fixture
def cheap_hooks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The portfolio setting and the solver/reaction measurements take tens of
    seconds at any size; tests about the deadline and fleet settings stub them
    (one test below runs them for real)."""
    monkeypatch.setitem(runner.SETTINGS, "portfolio", None)
    monkeypatch.setitem(runner.MACHINERY_HOOKS, "solver", lambda d, w, s: {})
    monkeypatch.setitem(runner.MACHINERY_HOOKS, "reaction", lambda d, w, s: {})


def _check_portfolio(block: dict[str, Any]) -> None:
    assert set(block["policies"]) == PORTFOLIO_POLICIES
    for name, row in block["policies"].items():
        assert set(row) >= PORTFOLIO_KEYS, name
    assert block["policies"]["hindsight"]["cost_vs_hindsight"] == 1.0
    assert block["policies"]["spotfolio"]["unmet_serving_unit_hours"] == 0
    assert all(row["decided_by"] for row in block["policies"].values())
    assert block["policies"]["spotfolio"]["decided_by"].startswith("broker.planning.rolling:")
    h = block["hindsight"]
    assert h["lower_bound_usd"] is not None and h["lower_bound_usd"] <= h["objective_usd"] + 1e-6
    # The hindsight's objective is its bill (plus any unmet-work or
    # value-of-time term), hourly, and no policy is billed below its bound.
    assert h["period_hours"] == 1
    assert h["objective_usd"] == pytest.approx(h["total_cost_usd"], rel=0.01)
    assert h["below_bound"] == []
    for row in block["policies"].values():
        assert row["cost_vs_bound"] >= 1.0 - 1e-4
    assert (
        block["spread"]["spotfolio"]["cost_vs_hindsight_max"]
        >= (block["spread"]["spotfolio"]["cost_vs_hindsight_min"])
    )


def _check_schema(out: dict[str, Any]) -> None:
    assert out["windows"] >= 1
    pol = out["deadline"]["policies"]
    for name in ("on_demand", "greedy", "uniform_progress", "spotfolio", "omniscient"):
        assert set(pol[name]) >= DEADLINE_KEYS, name
    assert set(out["deadline"]["gap_closure_vs_greedy"]) == {"uniform_progress", "spotfolio"}
    assert out["deadline"]["quadrants"]
    for q in out["deadline"]["quadrants"].values():
        assert set(q["policies"]["spotfolio"]) >= DEADLINE_KEYS
    fpol = out["fleet"]["policies"]
    for name in ("on_demand", "static_mix", "even_spread", "spothedge", "spotfolio", "omniscient"):
        assert set(fpol[name]) >= FLEET_KEYS, name
    # the product's entries name the daemon's lifecycle manager
    daemon = "broker.lifecycle.manager:LifecycleManager"
    assert pol["spotfolio"]["decided_by"] == fpol["spotfolio"]["decided_by"] == daemon
    assert pol["uniform_progress"]["decided_by"] != daemon != fpol["spothedge"]["decided_by"]
    if out["portfolio"]:
        _check_portfolio(out["portfolio"])
    cal = out["markets"]["calibration"]
    assert cal["traces"] >= 1 and cal["test_periods"] >= 1
    assert 0.0 <= cal["coverage"] <= 1.0
    assert set(cal["log_likelihood"]) == {
        "posterior",
        "posterior_plain",
        "advisor_prior",
        "pooled_rate",
    }
    m = out["machinery"]
    assert {"data_load_s", "peak_rss_mib", "replay", "seconds", "solver"} <= set(m)
    assert m["replay"]["policy_windows_per_s"] > 0
    assert {t["metric"] for t in out["targets"]} >= {"gap_closure_vs_greedy.spotfolio"}


@pytest.mark.usefixtures("cheap_hooks")
def test_runner_composes_settings_with_the_schema() -> None:
    out = runner.run_bench(lambda: BenchData("synthetic", _traces()), windows=1, seed=2)
    _check_schema(out)
    assert out["schema"] == runner.SCHEMA
    assert out["deadline"]["windows"] == 2 * 3  # type: ignore[index]  # two traces x three job fractions
    assert out["fleet"]["windows"] == 2  # type: ignore[index]  # one group, N = 4 and 8
    # every policy sees the same windows: on-demand is the 1.0 yardstick
    assert out["deadline"]["policies"]["on_demand"]["mean_cost_vs_on_demand"] == 1.0  # type: ignore[index]
    assert out["deadline"]["policies"]["omniscient"]["mean_cost_vs_on_demand"] <= min(  # type: ignore[index]
        v["mean_cost_vs_on_demand"]
        for v in out["deadline"]["policies"].values()  # type: ignore[index]
    )


def test_portfolio_and_solver_hooks_plug_in(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[int, int]] = []

    def portfolio(data: BenchData, windows: int, seed: int) -> dict[str, Any]:
        seen.append((windows, seed))
        return {"policies": {"hindsight": {"total_cost_usd": 1.0, "cost_vs_hindsight": 1.0}}}

    monkeypatch.setitem(runner.SETTINGS, "portfolio", portfolio)
    monkeypatch.setitem(runner.MACHINERY_HOOKS, "solver", lambda d, w, s: {"sizes": []})
    out = runner.run_bench(
        lambda: BenchData("synthetic", _traces()), windows=1, seed=9, settings=("portfolio",)
    )
    assert seen == [(1, 9)]
    assert out["portfolio"]["policies"]["hindsight"]["cost_vs_hindsight"] == 1.0  # type: ignore[index]
    assert out["machinery"]["solver"] == {"sizes": []}  # type: ignore[index]
    assert "hindsight" in markdown(out)


def test_the_soak_and_plan_scale_run_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []

    def hook(name: str) -> runner.MachineryHook:
        def run(data: BenchData, windows: int, seed: int) -> dict[str, Any]:
            ran.append(name)
            return {"ran": name}

        return run

    for name in ("solver", "reaction", "scale", "soak", "plan_scale"):
        monkeypatch.setitem(runner.MACHINERY_HOOKS, name, hook(name))

    def load() -> BenchData:
        return BenchData("synthetic", _traces())

    m = runner.run_bench(load, windows=40, seed=2, settings=())["machinery"]
    assert ran == ["solver", "reaction", "scale"]
    assert isinstance(m, dict) and m["soak"] == {} and m["plan_scale"] == {}
    ran.clear()
    asked = runner.ASKED_HOOKS
    m = runner.run_bench(load, windows=1, seed=2, settings=(), asked=asked)["machinery"]
    assert ran == ["solver", "reaction", "scale", "soak", "plan_scale"]
    assert isinstance(m, dict) and m["soak"] == {"ran": "soak"}


@pytest.mark.usefixtures("cheap_hooks")
def test_report_writes_markdown_and_charts(tmp_path: Path) -> None:
    out = runner.run_bench(lambda: BenchData("synthetic", _traces()), windows=1, seed=2)
    files = write_report(out, tmp_path / "report.md")
    assert [f.name for f in files] == ["report.md", "report_deadline.png", "report_fleet.png"]
    text = (tmp_path / "report.md").read_text()
    assert "## Deadline jobs" in text and "## Serving fleets" in text
    assert "availability_high/fraction_high" in text or "availability_low" in text
    assert all(f.stat().st_size > 0 for f in files)


def _write_dir(root: Path) -> Path:
    """Two 1-node traces in the public traces' layout (2023: 1 means held)."""
    folder = root / "spot-availability-traces" / "availability" / "1-node" / "aws-02-15-2023"
    folder.mkdir(parents=True)
    for tr in _traces():
        doc = {"metadata": {"gap_seconds": 600}, "data": tr.held.astype(int).tolist()}
        (folder / f"{tr.zone}_v100_1.json").write_text(json.dumps(doc))
    return root


def test_bench_command_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _write_dir(tmp_path / "data")
    assert main(["bench", "--data", str(root), "--windows", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    _check_schema(out)
    assert out["source"] == str(root)
    # the real portfolio setting and machinery hooks, at their smallest size
    _check_portfolio(out["portfolio"])
    assert set(out["machinery"]["solver"]) == {"10x6x24"}
    assert out["machinery"]["reaction"]["storm"]["notices"] == 100
    assert {t["setting"] for t in out["targets"]} >= {"deadline", "fleet", "portfolio"}
    rows = {t["metric"]: t for t in out["targets"]}
    # a short run has no 40x20x24 row: that target is unmeasured, not met
    assert rows["solver.40x20x24.seconds"]["value"] is None
    assert rows["solver.40x20x24.seconds"]["met"] is None
    p99 = out["machinery"]["reaction"]["storm"]["launch_request_ms"]["p99"]
    assert rows["reaction.storm.launch_request_ms.p99"]["value"] == p99


def test_machinery_targets_read_the_solver_and_reaction_rows() -> None:
    out = {
        "machinery": {
            "solver": {"40x20x24": {"seconds": 6.2, "gap": 0.004}},
            "reaction": {
                "single": {"launch_request_ms": {"p99": 12.0}},
                "storm": {"launch_request_ms": {"p99": 1500.0}},
            },
        }
    }
    rows = {t["metric"]: t for t in runner.check_targets(out)}
    assert rows["solver.40x20x24.seconds"]["met"] is False  # 6.2 s > 2 s
    assert rows["solver.40x20x24.gap"]["met"] is True
    assert rows["reaction.single.launch_request_ms.p99"]["met"] is True
    assert rows["reaction.storm.launch_request_ms.p99"]["met"] is False


def test_markets_targets_read_the_calibration_coverage() -> None:
    rows = [
        t
        for t in runner.check_targets({"markets": {"calibration": {"coverage": 0.97}}})
        if t["metric"] == "calibration.coverage"
    ]
    assert [(t["op"], t["met"]) for t in rows] == [(">=", True), ("<=", False)]
    unmeasured = runner.check_targets({"markets": {"calibration": None}})
    assert [t["met"] for t in unmeasured if t["setting"] == "markets"] == [None, None]


def test_simulate_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _write_dir(tmp_path / "data")
    args = ["simulate", "--setting", "fleet", "--data", str(root), "--windows", "1"]
    assert main([*args, "--policy", "spotfolio", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["policies"]) == {"on_demand", "spotfolio", "omniscient"}
    assert (
        main(["simulate", "--setting", "deadline", "--policy", "psychic", "--data", str(root)]) == 2
    )
    assert "--policy" in capsys.readouterr().err
    portfolio = ["simulate", "--setting", "portfolio", "--windows", "1", "--json"]
    assert main([*portfolio, "--data", str(root)]) == 0
    _check_portfolio(json.loads(capsys.readouterr().out))


def test_bench_rejects_a_directory_without_traces(tmp_path: Path) -> None:
    assert main(["bench", "--data", str(tmp_path), "--windows", "1"]) == 2


@pytest.mark.slow
@pytest.mark.usefixtures("cheap_hooks")
def test_bench_on_the_development_data(capsys: pytest.CaptureFixture[str]) -> None:
    if not (DATA / "spot-availability-traces").is_dir():
        pytest.skip(f"development data not found at {DATA}")
    assert main(["bench", "--data", str(DATA), "--windows", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    _check_schema(out)
    assert out["machinery"]["traces"] >= 10
    assert out["deadline"]["policies"]["spotfolio"]["deadline_misses"] == 0
    # the target: 90 % intervals cover 85-95 % of the held-back pool-days
    cal = out["markets"]["calibration"]
    assert cal["test_periods"] >= 100 and 0.85 <= cal["coverage"] <= 0.95
    rows = [t for t in out["targets"] if t["setting"] == "markets"]
    assert len(rows) == 2 and all(t["met"] is True for t in rows)


def _headings(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("## ")]


@pytest.mark.usefixtures("cheap_hooks")
def test_bench_out_dir_regenerates_the_results_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`spotfolio bench --out DIR` writes DIR/results.md: the layout of
    docs/results.md, its figures those of the same run's JSON."""
    root = _write_dir(tmp_path / "data")
    site = tmp_path / "site"
    args = ["bench", "--data", str(root), "--windows", "1", "--seed", "3", "--json"]
    assert main([*args, "--out", str(site)]) == 0
    out = json.loads(capsys.readouterr().out)
    page = (site / "results.md").read_text()
    docs_page = (Path(__file__).resolve().parents[2] / "docs" / "results.md").read_text()
    assert page.startswith("# Results\n") and docs_page.startswith("# Results\n")
    assert _headings(page) == _headings(docs_page)
    assert "![deadline](results_deadline.png)" in page
    assert (site / "results_deadline.png").stat().st_size > 0
    for setting, key in (("deadline", "mean_cost_vs_on_demand"), ("fleet", "availability")):
        value = out[setting]["policies"]["spotfolio"][key]
        section = page.split(f"## {_TITLES[setting]}", 1)[1]
        row = next(ln for ln in section.splitlines() if ln.startswith("| spotfolio |"))
        assert row.split(" | ")[1] == f"{value:.4f}", setting
    assert f"`{root}`" in page and "`--seed 3`" in page


_TITLES = {"deadline": "Deadline jobs", "fleet": "Serving fleets"}
