"""``spotfolio daemon --dry-run --once`` on a small simulated fleet prints
what its actions would do to the bill: per workload and tier, $/h now and in
the plan, the delta and the delta over the horizon, which the test works out
on its own from the account's instances, the printed actions and the
market's prices."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest
from click.testing import CliRunner

from broker.cli import cli
from broker.daemon.config import load_daemon_config
from broker.daemon.wiring import open_config_market
from markets.cloud_fleet import OWNER_TAG, Instance
from markets.model import MarketSnapshot
from markets.sim.persist import load_state

FLEET = """workloads:
  - name: api
    class: serving
    instance_types: [g5.xlarge]
    throughput: {{g5.xlarge: 1.0}}
    demand: {{base_units: {n}, peak_units: {n}}}
  - name: batch
    class: batch
    instance_types: [g5.xlarge]
    throughput: {{g5.xlarge: 1.0}}
    unit_hours: 200
    deadline_hours: 100
"""


def _config(tmp_path: Path, n: int) -> Path:
    (tmp_path / f"w{n}.yaml").write_text(FLEET.format(n=n))
    cfg = tmp_path / f"daemon{n}.yaml"
    cfg.write_text(
        f"owner: me\nstore_url: sqlite:///{tmp_path}/state.db\nprovider: sim\nplanner: fast\n"
        f"metrics_port: 0\nworkloads: w{n}.yaml\nhorizon_hours: 12\n"
        "market_options: {regions: us-east-1}\n"
        f"sim: {{state_file: {tmp_path}/account.json, seed: 0}}\n"
    )
    return cfg


def _price(snap: MarketSnapshot, pool: str, tier: str) -> float:
    p = snap.by_key()[pool]
    if tier == "spot" and p.spot_usd_per_hour is not None:
        return p.spot_usd_per_hour
    return p.on_demand_usd_per_hour


def _expected(
    snap: MarketSnapshot, fleet: list[Instance], out: str
) -> dict[tuple[str, str], list[float]]:
    now: dict[tuple[str, str], float] = defaultdict(float)
    by_id = {i.instance_id: i for i in fleet}
    for i in fleet:
        now[(i.workload, i.tier.value)] += _price(snap, i.pool_key, i.tier.value)
    plan = dict(now)
    for count, pool, tier, workload in re.findall(
        r"would launch: (\d+) x (\S+) (\S+) for (\S+)", out
    ):
        plan[(workload, tier)] = plan.get((workload, tier), 0.0) + int(count) * _price(
            snap, pool, tier
        )
    for ids in re.findall(r"would terminate: (\S+)", out):
        for iid in ids.split(","):
            i = by_id.pop(iid)
            plan[(i.workload, i.tier.value)] -= _price(snap, i.pool_key, i.tier.value)
    return {k: [now.get(k, 0.0), plan.get(k, 0.0)] for k in set(now) | set(plan)}


def _usd(text: str) -> float:
    sign = -1.0 if text.startswith("-") else 1.0
    return sign * float(text.lstrip("+- $").replace(",", ""))


@pytest.mark.slow
def test_a_dry_run_prints_the_plans_cost_against_the_fleet_now(tmp_path: Path) -> None:
    runner = CliRunner()
    first = runner.invoke(cli, ["daemon", "--config", str(_config(tmp_path, 4)), "--once"])
    assert first.exit_code == 0, first.output
    # twice the serving demand: the dry run would launch (and may move tiers)
    cfg = _config(tmp_path, 8)
    market = open_config_market(load_daemon_config(cfg))
    cloud, clock = load_state(market, tmp_path / "account.json")
    before = clock.now()
    fleet = [i for i in cloud.alive() if i.tags.get(OWNER_TAG) == "me"]
    assert fleet, "the first run launched nothing"
    done = runner.invoke(cli, ["daemon", "--config", str(cfg), "--once", "--dry-run"])
    assert done.exit_code == 0, done.output
    out = done.output
    assert "would launch:" in out
    _, clock = load_state(market, tmp_path / "account.json")
    table = out[out.index("cost of the plan") :].splitlines()
    assert "12 h horizon" in table[0]
    rows = {}
    for line in table[2:]:
        cells = line.split()
        if cells[0] == "total":
            total = [_usd(c) for c in cells[1:]]
        else:
            rows[(cells[0], cells[1])] = [_usd(c) for c in cells[2:]]
    # the prices of the hour the dry run ran in (the sim's clock runs at the real rate)
    candidates = [market.snapshot(t) for t in (before, clock.now())]
    for snap in candidates:
        want = _expected(snap, fleet, out)
        want = {k: v for k, v in want.items() if abs(v[0]) > 1e-9 or abs(v[1]) > 1e-9}
        if set(want) != set(rows):
            continue
        if all(
            abs(rows[k][0] - v[0]) <= 0.005 and abs(rows[k][1] - v[1]) <= 0.005
            for k, v in want.items()
        ):
            break
    else:
        raise AssertionError(f"the table does not match the prices:\n{out}")
    for k, (now, plan) in want.items():
        delta = plan - now
        assert rows[k][2] == pytest.approx(delta, abs=0.005)
        assert rows[k][3] == pytest.approx(delta * 12, abs=0.005)
    assert total[0] == pytest.approx(sum(v[0] for v in want.values()), abs=0.01)
    assert total[1] == pytest.approx(sum(v[1] for v in want.values()), abs=0.01)
    assert total[3] == pytest.approx(12 * (total[1] - total[0]), abs=0.01 * 12)
    assert total[1] > total[0]  # twice the serving demand costs more
