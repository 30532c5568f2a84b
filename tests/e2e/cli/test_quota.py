"""``spotfolio plan`` / ``whatif`` with ``--quota FILE`` on the embedded
default market: bad files exit 2 on one line; a plan keeps to the quota it
is given and says what keeping to it costs."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from broker.cli import main

# The default plan runs llm-finetune on 6 spot a2-highgpu-8g (48 A100s) in
# europe-west4; this quota allows 32 preemptible A100s there.
QUOTA = (
    "quotas:\n  - {provider: gcp, region: europe-west4, group: NVIDIA_A100_GPUS,"
    " tier: spot, limit: 32}\n"
)


def _plan(*args: str) -> dict[str, Any]:
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main(["plan", "--days", "1", "--json", *args]) == 0
    out = json.loads(buf.getvalue())
    assert isinstance(out, dict)
    return out


def _a100_spot_europe(doc: dict[str, Any]) -> float:
    per_period: dict[int, float] = {}
    for a in doc["allocations"]:
        if (
            a["tier"] == "spot"
            and a["pool_key"].startswith("gcp/europe-west4/")
            and "a2-" in a["pool_key"]
        ):
            gpus = 16 if "megagpu" in a["pool_key"] else int(a["pool_key"].split("-")[-1][:-1])
            per_period[a["period"]] = per_period.get(a["period"], 0.0) + a["instances"] * gpus
    return max(per_period.values(), default=0.0)


@pytest.mark.parametrize("command", ["whatif", "plan"])
def test_a_bad_quota_file_exits_2_naming_file_and_field(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    q = tmp_path / "quota.yaml"
    q.write_text(
        "quotas:\n  - {provider: gcp, region: europe-west4, group: NVIDIA_A100_GPUS,"
        " tier: spot, limit: many}\n"
    )
    assert main([command, "--days", "1", "--quota", str(q)]) == 2
    err = capsys.readouterr().err.strip()
    assert str(q) in err and "quotas[0].limit" in err and len(err.splitlines()) == 1


def test_the_plan_keeps_to_a_gpu_quota_and_prices_it(tmp_path: Path) -> None:
    free = _plan()
    assert _a100_spot_europe(free) > 32  # the quota would bind
    q = tmp_path / "quota.yaml"
    q.write_text(QUOTA)
    kept = _plan("--quota", str(q))
    assert _a100_spot_europe(kept) <= 32 + 1e-6
    [row] = kept["quotas"]["quotas"]
    assert row["code"] == "PREEMPTIBLE_NVIDIA_A100_GPUS" and row["peak_use"] <= 32 + 1e-6
    assert kept["quotas"]["quota_cost_usd"] >= 0
    assert kept["quotas"]["objective_without_quotas_usd"] <= kept["objective_usd"] + 1e-6


@pytest.mark.slow
def test_a_whatif_with_a_quota_shows_each_scenarios_bill_with_and_without_it(
    tmp_path: Path,
) -> None:
    q = tmp_path / "quota.yaml"
    q.write_text(QUOTA)
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main(["whatif", "--json", "--days", "2", "--scenarios", "0", "--quota", str(q)]) == 0
    doc = json.loads(buf.getvalue())
    rows = {r["name"]: r for r in doc["quota"]["scenarios"]}
    assert set(rows) == {s["name"] for s in doc["scenarios"]}
    # A spot-only quota leaves the on-demand scenario's bill as it was.
    assert rows["on_demand"]["quota_cost_usd"] == 0
    ours = rows["spotfolio"]
    assert ours["total_cost_usd"] == next(
        s["total_cost_usd"] for s in doc["scenarios"] if s["name"] == "spotfolio"
    )
    assert ours["quota_cost_usd"] == pytest.approx(
        ours["total_cost_usd"] - ours["without_quotas_usd"], abs=0.011
    )
    assert doc["quota"]["quotas"][0]["code"] == "PREEMPTIBLE_NVIDIA_A100_GPUS"
