"""``spotfolio whatif`` / ``plan`` end to end on the embedded default market."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from broker.cli import main
from broker.whatif.run import run_whatif
from markets.protocols import PriceSource
from markets.registry import open_market
from policies.workloads.spec import default_workloads
from tests.paths import SHARED_DATA

# ``whatif --json`` as json.loads gives it (Any: the tests index into the
# documented schema directly).
Doc = dict[str, Any]


@pytest.fixture(scope="module")
def whatif_json() -> Doc:
    buf = io.StringIO()
    with redirect_stdout(buf):
        code = main(["whatif", "--json", "--committed", "0.4,0.6"])
    assert code == 0
    out = json.loads(buf.getvalue())
    assert isinstance(out, dict)
    return out


@pytest.mark.slow
def test_default_whatif_spotfolio_beats_every_baseline(whatif_json: Doc) -> None:
    scenarios = {s["name"]: s for s in whatif_json["scenarios"]}
    assert set(scenarios) == {"on_demand", "committed_quantile", "static_mix", "spotfolio"}
    ours = scenarios["spotfolio"]
    for name, s in scenarios.items():
        assert ours["total_cost_usd"] <= s["total_cost_usd"] + 0.01, name
        assert ours["unmet_unit_hours"] <= s["unmet_unit_hours"] + 1e-6, name
    for s in scenarios.values():
        tiers = s["cost_by_tier_usd"]
        assert sum(tiers.values()) == pytest.approx(s["total_cost_usd"], abs=0.05)
        assert set(tiers) == {"committed", "on_demand", "spot"}
    assert scenarios["on_demand"]["savings_vs_on_demand"] == 0
    assert ours["savings_vs_on_demand"] > 0


@pytest.mark.slow
def test_committed_sweep_answers_40_vs_60_percent(whatif_json: Doc) -> None:
    sweep = whatif_json["committed_sweep"]
    assert [p["share_of_peak"] for p in sweep] == [0.4, 0.6]
    assert sweep[1]["instances"] > sweep[0]["instances"]
    assert all(p["total_cost_usd"] > 0 for p in sweep)
    assert 0 < whatif_json["breakeven_occupancy"] < 1
    assert sweep[1]["marginal_occupancy"] is not None
    # The verdict is the totals' (it said "pays" at 71 % > 63 % while the
    # total rose $612: that break-even was against on-demand, not the mix).
    assert sweep[0]["verdict"] is None
    rose = sweep[1]["total_cost_usd"] - sweep[0]["total_cost_usd"]
    assert sweep[1]["verdict"] == ("pays" if sweep[1]["delta_usd"] < 0 else "costs")
    assert sweep[1]["delta_usd"] == pytest.approx(rose, abs=0.02)
    assert whatif_json["breakeven_occupancy"] >= whatif_json["breakeven_occupancy_on_demand"]
    assert all(p["obligation_usd"] > p["total_cost_usd"] for p in sweep)  # a year > 30 days


def _bad(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "workloads.yaml"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        pytest.param(["--committed", "0.4,abc"], "--committed", id="bad-committed"),
        pytest.param(["--days", "0"], "--days", id="days-zero"),
        pytest.param(["--market", "/nonexistent/market"], "--market", id="missing-market"),
        pytest.param(["--start", "yesterday"], "--start", id="bad-start"),
    ],
)
def test_bad_options_exit_2_naming_the_option(
    args: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["whatif", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]


def test_bad_policies_file_exits_2_naming_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _bad(
        tmp_path,
        "workloads:\n  - name: api\n    class: serving\n"
        "    instance_types: [g5.xlarge]\n    max_spot_share: 1.5\n"
        "    demand: {base_units: 1, peak_units: 2}\n",
    )
    assert main(["whatif", "--policies", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "workloads[0].max_spot_share" in err


def test_bad_demand_file_exits_2_naming_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demand = tmp_path / "demand.csv"
    demand.write_text("hour,chat-api\n2026-01-01T00:00:00Z,10\n2026-01-01T01:00:00Z,-3\n")
    assert main(["whatif", "--demand", str(demand)]) == 2
    err = capsys.readouterr().err
    assert str(demand) in err and "line 3" in err


def test_plan_json_lists_commitments_and_explanation(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--days", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] in ("optimal", "within_gap", "feasible")
    # "optimal" only when proven; the gap and whether it met the target are given
    assert out["status"] != "optimal" or out["gap"] <= 1e-6
    assert out["gap_met"] is (out["gap"] is not None and out["gap"] <= 0.005)
    assert out["budget_unmet"] is None
    assert out["allocations"] and out["explanation"][0].startswith("plan ")
    tiers = {a["tier"] for a in out["allocations"]}
    assert tiers <= {"committed", "on_demand", "spot"}


SHARED_DATA = SHARED_DATA


@pytest.mark.slow
@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"{SHARED_DATA} (the public traces) absent")
def test_whatif_on_shared_data_plans_aws_and_gcp_pools_together() -> None:
    market = open_market(str(SHARED_DATA))
    assert isinstance(market, PriceSource)
    result = run_whatif(market, default_workloads(), days=2)
    plan = result.scenario("spotfolio").plan
    providers = {k.split("/")[0] for k in plan.allocations["pool_key"]}
    assert providers == {"aws", "gcp"}
    ours = result.scenario("spotfolio").bill.total_usd
    assert all(ours <= s.bill.total_usd + 0.01 for s in result.scenarios)


def test_market_options_reach_the_market_adapter(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--days", "1", "--json", "--market-option", "seed=3"]) == 0
    seeded = json.loads(capsys.readouterr().out)
    assert main(["plan", "--days", "1", "--json"]) == 0
    default = json.loads(capsys.readouterr().out)
    # another seed is another market: the plan's cost differs
    assert seeded["objective_usd"] != default["objective_usd"]
    assert main(["whatif", "--market-option", "no-equals-sign"]) == 2


@pytest.mark.slow
def test_plan_with_gap_proves_its_plan_within_it(capsys: pytest.CaptureFixture[str]) -> None:
    """~15 s: the quick solve and the proven one on the same day of the example fleet."""
    assert main(["plan", "--days", "1", "--json"]) == 0
    quick = json.loads(capsys.readouterr().out)
    assert main(["plan", "--days", "1", "--json", "--gap", "0.01", "--time-limit", "60"]) == 0
    proven = json.loads(capsys.readouterr().out)
    assert proven["meta"]["gap"] <= 0.01 + 1e-9
    # the proof never makes the plan worse than the quick one, and both
    # bounds are valid bounds of the same model
    assert proven["objective_usd"] <= quick["objective_usd"] + 1e-6
    assert proven["meta"]["lower_bound_usd"] <= proven["objective_usd"] + 0.01  # rounded
    assert quick["meta"]["lower_bound_usd"] <= proven["objective_usd"] + 0.01
    assert main(["plan", "--days", "1", "--gap", "0"]) == 2
    assert "--gap" in capsys.readouterr().err


@pytest.mark.slow
def test_whatif_with_gap_proves_spotfolio_plan(capsys: pytest.CaptureFixture[str]) -> None:
    """~20 s: the same --gap as plan, reported per scenario as plan_gap."""
    args = ["whatif", "--days", "2", "--json"]
    assert main(args) == 0
    quick = {s["name"]: s for s in json.loads(capsys.readouterr().out)["scenarios"]}
    assert main([*args, "--gap", "0.01", "--time-limit", "60"]) == 0
    proven = {s["name"]: s for s in json.loads(capsys.readouterr().out)["scenarios"]}
    assert proven["spotfolio"]["plan_gap"] <= 0.01 + 1e-9
    assert proven["spotfolio"]["plan_gap"] <= quick["spotfolio"]["plan_gap"]
    assert quick["on_demand"]["plan_gap"] is None
    # baselines are not optimized: no gap to report, and the same bills
    assert proven["on_demand"]["total_cost_usd"] == quick["on_demand"]["total_cost_usd"]


def _tight_budget(tmp_path: Path, usd_per_hour: float = 1.0) -> Path:
    """The example fleet with a fleet budget far below what its demand costs."""
    import yaml

    src = Path(__file__).parents[3] / "policies" / "examples" / "workloads.yaml"
    data = yaml.safe_load(src.read_text())
    data["budget_usd_per_hour"] = usd_per_hour
    out = tmp_path / "tight.yaml"
    out.write_text(yaml.safe_dump(data))
    return out


def test_a_budget_that_leaves_demand_unmet_is_said_and_strict_exits_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # rc 0 still names the budget and the unmet demand (on stdout and stderr).
    tight = str(_tight_budget(tmp_path))
    assert main(["plan", "--days", "1", "--json", "--policies", tight]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["budget_unmet"]["budgets"] == ["fleet budget $1.00/h"]
    assert out["budget_unmet"]["unmet_unit_hours"] > 0
    [warning] = [line for line in captured.err.splitlines() if "budgets leave" in line]
    assert warning.startswith("warning: plan:") and "fleet budget $1.00/h" in warning
    assert main(["plan", "--days", "1", "--strict", "--policies", tight]) == 3
    err = capsys.readouterr().err
    assert "budgets leave demand unmet (--strict)" in err and "plan: fleet budget $1.00/h" in err


@pytest.mark.slow
def test_whatif_strict_names_the_budget_that_left_demand_unmet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tight = str(_tight_budget(tmp_path))
    assert main(["whatif", "--days", "1", "--json", "--policies", tight]) == 0
    captured = capsys.readouterr()
    found = {f["scenario"]: f for f in json.loads(captured.out)["budget_unmet"]}
    assert "fleet budget $1.00/h" in found["spotfolio"]["budgets"]
    assert "warning: spotfolio: budgets leave" in captured.err
    assert main(["whatif", "--days", "1", "--strict", "--policies", tight]) == 3
    assert "spotfolio: fleet budget $1.00/h" in capsys.readouterr().err


@pytest.mark.slow
def test_whatif_stress_shows_x1_beside_the_stressed_market(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = [
        "whatif",
        "--days",
        "1",
        "--json",
        "--interruption-multiplier",
        "5",
        "--availability-multiplier",
        "0.8",
    ]
    assert main(args) == 0
    stress = json.loads(capsys.readouterr().out)["stress"]
    assert stress["interruption_multiplier"] == 5 and stress["availability_multiplier"] == 0.8
    rows = {r["name"]: r for r in stress["scenarios"]}
    assert set(rows) == {"on_demand", "committed_quantile", "static_mix", "spotfolio"}
    mix = rows["static_mix"]
    assert mix["stressed_total_cost_usd"] != mix["x1_total_cost_usd"]
    assert mix["stressed_expected_revocations"] > mix["x1_expected_revocations"]


@pytest.mark.parametrize("command", ["whatif", "plan"])
def test_a_bad_owned_file_exits_2_naming_file_row_and_field(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    owned = tmp_path / "owned.csv"
    owned.write_text(
        "id,provider,kind,region,instance_type,count,start,end\n"
        "ri-1,aws,reserved,us-east-1,p4d.24xlarge,2,2026-01-01,2027-01-01\n"
        "ri-2,aws,reserved,us-east-1,p4d.24xlarge,-1,2026-01-01,2027-01-01\n"
    )
    assert main([command, "--days", "1", "--owned", str(owned)]) == 2
    err = capsys.readouterr().err
    assert str(owned) in err and "row 2: count" in err
