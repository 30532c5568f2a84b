"""Telemetry: the JSON log (timestamps, typed fields, tracebacks, every
project logger), the metrics endpoint on a configured address scraped from
another process, and the metrics the daemon keeps (build info, market
staleness, spend by capacity type, capped pool labels, known label values,
notice to replacement, the preemption tax)."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from broker.cli.daemon import PROJECT_LOGGERS, _logging
from broker.daemon.config import DaemonConfig
from broker.daemon.executor import kv
from broker.daemon.health import Liveness, readiness
from broker.daemon.metrics import (
    CAPACITY_TYPE,
    KNOWN_LABELS,
    OTHER_POOL,
    POOL_LABEL_CAP,
    DaemonMetrics,
)
from broker.daemon.preemption import preemption_tax
from broker.lifecycle.values import CheckpointVerdict
from markets.cloud_fleet import Instance, InstanceState
from markets.errors import InputError
from markets.model import Tier
from policies.workloads.spec import parse_workloads
from tests.unit.broker.daemon.test_daemon import World

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


# -- the JSON log ----------------------------------------------------------------


def _lines(err: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in err.splitlines() if line.strip()]


def test_json_log_lines_parse_with_utc_timestamps_and_typed_fields(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _logging("json", "info")
    logging.getLogger("spotfolio.daemon").info(
        kv(
            "decision",
            launches=3,
            latency_s=0.25,
            ok=True,
            usd="12.50",
            reason="a b",
            key="0001",
            level="x",
            p99=float("nan"),
        )
    )
    (line,) = _lines(capsys.readouterr().err)
    ts = datetime.fromisoformat(line["ts"])
    assert line["ts"].endswith("Z") and ts.utcoffset() == timedelta(0)
    assert abs((datetime.now(UTC) - ts).total_seconds()) < 60
    assert line["level"] == "info" and line["logger"] == "spotfolio.daemon"
    assert line["event"] == "decision"
    assert line["launches"] == 3 and line["latency_s"] == 0.25 and line["ok"] is True
    assert line["usd"] == 12.5  # formatted by the call site, still a number
    assert line["reason"] == "a b" and line["key"] == "0001"  # an id stays a string
    assert line["level_"] == "x" and line["p99"] == "nan"  # no clash, no bare NaN


def test_a_structured_line_is_redacted_and_keeps_its_types(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _logging("json", "info")
    logging.getLogger("spotfolio.daemon").info(
        kv("store_error", url="postgresql://u:hunter2@db/x", token="abc123", launches=2)
    )
    logging.getLogger("markets.aws.provider").info("connect %s", "postgresql://u:pw9@db/x")
    err = capsys.readouterr().err
    assert "hunter2" not in err and "abc123" not in err and "pw9" not in err
    structured, plain = _lines(err)
    assert structured["event"] == "store_error" and structured["launches"] == 2
    assert structured["url"].startswith("postgresql://u:") and "args" not in plain


def test_every_project_logger_writes_json_including_markets_and_policies(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _logging("json", "info")
    logging.getLogger("markets.aws.provider").info("launch replayed: key=%s n=%d", "k1", 2)
    logging.getLogger("policies.checkpoint").warning("plain message")
    logging.getLogger("broker.planning").info("from the broker package")
    lines = _lines(capsys.readouterr().err)
    assert [x["logger"] for x in lines] == [
        "markets.aws.provider",
        "policies.checkpoint",
        "broker.planning",
    ]
    assert lines[0]["message"] == "launch replayed: key=k1 n=2"
    assert lines[0]["args"] == ["k1", 2]
    assert all("ts" in x for x in lines)
    assert set(PROJECT_LOGGERS) == {"spotfolio", "markets", "policies", "broker"}


def test_a_logged_exception_keeps_its_type_and_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _logging("json", "info")

    def broken_job() -> None:
        raise ValueError("bad price row")

    try:
        broken_job()
    except ValueError as e:
        logging.getLogger("spotfolio.daemon").exception(kv("job_error", job="replan", error=e))
    (line,) = _lines(capsys.readouterr().err)
    assert line["event"] == "job_error" and line["error"] == "bad price row"
    assert line["exc_type"] == "ValueError"
    assert "Traceback" in line["exc"] and "broken_job" in line["exc"]


def test_lists_are_json_arrays_and_a_comma_list_in_text(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _logging("json", "info")
    line = kv(
        "spot_returned",
        pools=["aws/a/z/g5", "aws/b/z/g5"],
        empty=[],
        ids=("i-1",),
        seen={"b", "a"},
        token=["tok-1"],
    )
    assert line.startswith('spot_returned pools=aws/a/z/g5,aws/b/z/g5 empty="" ids=i-1')
    logging.getLogger("spotfolio.daemon").info(line)
    (out,) = _lines(capsys.readouterr().err)
    assert out["pools"] == ["aws/a/z/g5", "aws/b/z/g5"] and out["empty"] == []
    assert out["ids"] == ["i-1"] and out["seen"] == ["a", "b"]
    assert "tok-1" not in json.dumps(out)  # a secret-named list is redacted item by item


def test_every_json_line_carries_owner_and_account(capsys: pytest.CaptureFixture[str]) -> None:
    """Null until the config is read; the config's once it is."""
    from broker.cli import _logcontext, main

    _logcontext.reset()  # as a new process starts: an earlier test's main() may have set it
    _logging("json", "info")
    logging.getLogger("markets.aws.provider").info("before the config")
    assert (
        main(
            [
                "daemon",
                "--provider",
                "sim",
                "--hours",
                "2",
                "--log-format",
                "json",
                "--log-level",
                "debug",
            ]
        )
        == 0
    )
    lines = _lines(capsys.readouterr().err)
    assert lines[0]["owner"] is None and lines[0]["account"] is None
    ran = lines[1:]
    assert len(ran) >= 5 and {x["logger"] for x in ran} >= {"spotfolio.daemon"}
    assert all(x["owner"] == "spotfolio-sim" and x["account"] == "default" for x in ran)
    launches = [x for x in ran if x.get("event") == "launch"]
    assert launches and all(isinstance(x["instances"], list) for x in launches)
    assert all(i.startswith("i-") for x in launches for i in x["instances"])


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        pytest.param(["--config", "{missing}"], "--config", id="missing-config"),
        pytest.param(["--config", "{bad}"], "store_url", id="bad-config-field"),
        pytest.param(["--hours", "abc"], "--hours", id="bad-option-before-log-format"),
        pytest.param(
            ["--provider", "sim", "--hours", "1", "--market", ""],
            "--market",
            id="bad-market-option",
        ),
    ],
)
def test_a_fatal_start_up_error_is_one_json_line_with_json_logs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], names: str
) -> None:
    from broker.cli import main

    bad = tmp_path / "daemon.yaml"
    bad.write_text("owner: team-a\naccount: acct-1\nstore_url: garbage\n")
    args = [a.format(missing=tmp_path / "nope.yaml", bad=bad) for a in argv]
    assert main(["daemon", *args, "--log-format", "json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    (line,) = _lines(err)
    assert line["level"] == "error" and line["event"] == "input_error"
    assert line["exit_code"] == 2 and names in line["message"]
    assert set(line) >= {"ts", "logger", "owner", "account", "message"}
    # the same error as text without --log-format json
    assert main(["daemon", *args]) == 2
    text = capsys.readouterr().err
    assert text.startswith("spotfolio: error: ") and names in text and text.count("\n") == 1


def test_a_fatal_error_in_json_hides_secrets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from broker.cli import main

    cfg = tmp_path / "daemon.yaml"
    cfg.write_text(
        "owner: t\nstore_url: postgresql+psycopg://u:hunter2@127.0.0.1:1/x\nmetrics_port: 0\n"
    )
    assert main(["daemon", "--config", str(cfg), "--once", "--log-format", "json"]) == 2
    err = capsys.readouterr().err
    (line,) = _lines(err.splitlines()[-1])
    assert "hunter2" not in err and line["event"] == "input_error"


def test_kv_log_keeps_its_text_form() -> None:
    line = kv("lease_acquired", lease="account/a", holder="h 1", n=2)
    assert line == 'lease_acquired lease=account/a holder="h 1" n=2'


# -- the endpoint -----------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _listening_on(port: int) -> set[str]:
    """Local IPv4 addresses with a socket listening on ``port`` (/proc/net/tcp)."""
    out = set()
    for row in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = row.split()[1], row.split()[3]
        addr_hex, port_hex = local.split(":")
        if int(port_hex, 16) == port and state == "0A":  # TCP_LISTEN
            out.add(socket.inet_ntoa(bytes.fromhex(addr_hex)[::-1]))
    return out


SCRAPE = """
import sys, urllib.request
with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=10) as r:
    sys.stdout.write(r.read().decode())
"""


def _scrape(port: int) -> str:
    """GET /metrics through loopback from another process (a subprocess)."""
    done = subprocess.run(
        [sys.executable, "-c", SCRAPE, str(port)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def test_the_endpoint_binds_0000_and_is_scraped_through_loopback_from_another_process() -> None:
    m = DaemonMetrics()
    m.revoked("aws/us-east-1/us-east-1a/p3.2xlarge", unit_hours=0.5, usd=1.5)
    port = m.serve(0, "0.0.0.0")
    assert _listening_on(port) == {"0.0.0.0"}
    try:
        text = _scrape(port)
    finally:
        m.stop_serving()
    assert _listening_on(port) == set()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    (info,) = families["spotfolio_build_info"].samples
    assert info.value == 1 and info.labels["python"] == ".".join(map(str, sys.version_info[:3]))
    assert info.labels["version"]
    tax = {s.name: s.value for s in families["spotfolio_preemption_tax_usd"].samples}
    assert tax["spotfolio_preemption_tax_usd_sum"] == 1.5
    assert tax["spotfolio_preemption_tax_usd_count"] == 1


def test_the_default_endpoint_binds_loopback_only() -> None:
    m = DaemonMetrics()
    port = m.serve(0, DaemonConfig(owner="me").metrics_addr)
    try:
        assert _listening_on(port) == {"127.0.0.1"}
        assert "spotfolio_build_info" in _scrape(port)
    finally:
        m.stop_serving()


def test_metrics_addr_must_be_an_ip_address() -> None:
    with pytest.raises(InputError, match="metrics_addr"):
        from broker.cli.daemon import _config

        _config(None, metrics_addr="localhost; rm")


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian: prometheus) absent")
def test_promtool_accepts_every_metric_the_daemon_exports(tmp_path: Path) -> None:
    w = World(tmp_path)
    d = w.daemon()
    d.start()
    w.clock.advance(3600)
    d.reconcile()
    spot = [i for i in w.cloud.alive() if i.tier is Tier.SPOT]
    w.cloud.revoke(spot[0].instance_id, w.clock.now() + timedelta(seconds=120))
    w.clock.advance(5)
    d.poll_notices()
    port = d.metrics.serve(0, "127.0.0.1")
    try:
        text = _scrape(port)
    finally:
        d.metrics.stop_serving()
    done = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    names = {f.name for f in text_string_to_metric_families(text)}
    for name in (
        "spotfolio_build_info",
        "spotfolio_market_staleness_seconds",
        "spotfolio_spend_usd",
        "spotfolio_spot_share_ratio",
        "spotfolio_decisions",
        "spotfolio_job_errors",
        "spotfolio_pool_cost_rate_usd_per_hour",
        "spotfolio_pool_labels_folded",
        "spotfolio_notice_to_replacement_seconds",
        "spotfolio_preemption_tax_gpu_seconds",
    ):
        assert name in names


# -- what the daemon measures -------------------------------------------------------


def test_spend_accrues_the_previous_ticks_rates_over_the_time_between_ticks() -> None:
    m = DaemonMetrics()
    pool = "aws/us-east-1/us-east-1a/p3.2xlarge"
    m.observe_fleet(T0, {(pool, "spot"): (2.0, 1), (pool, "on_demand"): (3.0, 1)})
    m.observe_fleet(T0 + timedelta(minutes=30), {(pool, "spot"): (4.0, 2)})
    assert m.value("spotfolio_spend_usd_total", {"capacity_type": "spot"}) == pytest.approx(1.0)
    assert m.value("spotfolio_spend_usd_total", {"capacity_type": "on-demand"}) == pytest.approx(
        1.5
    )
    m.observe_fleet(T0 + timedelta(minutes=90), {})
    assert m.value("spotfolio_spend_usd_total", {"capacity_type": "spot"}) == pytest.approx(5.0)
    assert m.value("spotfolio_spend_usd_total", {"capacity_type": "on-demand"}) == pytest.approx(
        1.5
    )
    # A clock that steps back adds nothing.
    m.observe_fleet(T0, {(pool, "spot"): (100.0, 1)})
    assert m.value("spotfolio_spend_usd_total", {"capacity_type": "spot"}) == pytest.approx(5.0)


def _other(capacity_type: str = "spot") -> dict[str, str]:
    return {
        "instance_type": OTHER_POOL,
        "zone": OTHER_POOL,
        "region": OTHER_POOL,
        "capacity_type": capacity_type,
    }


def test_pool_labels_stop_at_the_cap_and_the_rest_add_up_under_other() -> None:
    m = DaemonMetrics()
    m.pool_label.cap = 2
    rates = {(f"aws/us-east-1/us-east-1a/t{i}", "spot"): (1.0 + i, 1) for i in range(5)}
    rates[("aws/us-east-1/us-east-1a/t0", "on_demand")] = (10.0, 2)
    m.observe_fleet(T0, rates)
    samples = {
        (
            s.labels["instance_type"],
            s.labels["zone"],
            s.labels["region"],
            s.labels["capacity_type"],
        ): s.value
        for f in m.registry.collect()
        if f.name == "spotfolio_pool_cost_rate_usd_per_hour"
        for s in f.samples
    }
    assert samples == {
        ("t0", "us-east-1a", "us-east-1", "spot"): 1.0,
        ("t0", "us-east-1a", "us-east-1", "on-demand"): 10.0,
        ("t1", "us-east-1a", "us-east-1", "spot"): 2.0,
        (OTHER_POOL, OTHER_POOL, OTHER_POOL, "spot"): 3.0 + 4.0 + 5.0,
    }
    assert m.value("spotfolio_pool_units", _other()) == 3
    # each pool folded is counted once, however often it is seen
    assert m.value("spotfolio_pool_labels_folded_total") == 3
    m.observe_fleet(T0 + timedelta(minutes=1), rates)
    assert m.value("spotfolio_pool_labels_folded_total") == 3
    m.revoked("aws/us-east-1/us-east-1a/t4", unit_hours=1.0, usd=1.0)
    m.revoked("aws/us-east-1/us-east-1a/t0", unit_hours=1.0, usd=1.0)
    assert m.value("spotfolio_pool_revocations_total", _other()) == 1
    t0 = {
        "instance_type": "t0",
        "zone": "us-east-1a",
        "region": "us-east-1",
        "capacity_type": "spot",
    }
    assert m.value("spotfolio_pool_revocations_total", t0) == 1


def test_a_fleet_over_many_pools_stays_within_the_documented_series_bound() -> None:
    m = DaemonMetrics()
    tiers = ("spot", "on_demand", "committed")
    rates = {
        (f"aws/us-east-1/us-east-1{z}/g{i}", t): (1.0, 1)
        for i in range(60)
        for z in "abc"
        for t in tiers
    }
    m.observe_fleet(T0, rates)
    for key in {k for k, _ in rates}:
        m.revoked(key, "spot", unit_hours=0.1, usd=0.1)
    for name in (
        "spotfolio_pool_cost_rate_usd_per_hour",
        "spotfolio_pool_units",
        "spotfolio_pool_revocations_total",
    ):
        series = [s for f in m.registry.collect() for s in f.samples if s.name == name]
        assert len(series) <= (POOL_LABEL_CAP + 1) * len(CAPACITY_TYPE)
    assert m.value("spotfolio_pool_labels_folded_total") == 180 - POOL_LABEL_CAP
    # nothing is lost by folding: the fleet's total is every pool's
    total = sum(
        s.value
        for f in m.registry.collect()
        for s in f.samples
        if s.name == "spotfolio_pool_cost_rate_usd_per_hour"
    )
    assert total == pytest.approx(len(rates))


def test_every_known_label_value_is_exported_at_zero_before_anything_happens() -> None:
    m = DaemonMetrics()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in m.registry.collect()
        for s in f.samples
    }
    expected = {
        "spotfolio_decisions_total": ("kind",),
        "spotfolio_actions_total": ("kind", "outcome"),
        "spotfolio_notices_dropped_total": ("reason",),
        "spotfolio_job_errors_total": ("job",),
        "spotfolio_spend_usd_total": ("capacity_type",),
        "spotfolio_cost_rate_usd_per_hour": ("capacity_type",),
    }
    for attr, values in KNOWN_LABELS.items():
        name = m.__dict__[attr]._name
        sample = name if name.startswith("spotfolio_cost") else f"{name}_total"
        for labels in values:
            key = (sample, tuple(sorted(zip(expected[sample], labels, strict=True))))
            assert samples[key] == 0, key
    assert len(KNOWN_LABELS["actions"]) == 12 and len(KNOWN_LABELS["job_errors"]) == 7
    assert {v for (v,) in KNOWN_LABELS["spend_usd"]} == {"spot", "on-demand", "reserved"}


def test_the_known_job_names_are_the_jobs_the_daemon_schedules() -> None:
    import inspect

    from broker.daemon import jobs

    found = re.findall(r"DaemonJob\(Job\.([A-Z]+),", inspect.getsource(jobs.daemon_jobs))
    scheduled = {jobs.Job[name].value for name in found}
    assert scheduled == {j for (j,) in KNOWN_LABELS["job_errors"]}


def test_market_staleness_counts_from_the_last_successful_refresh(tmp_path: Path) -> None:
    w = World(tmp_path)
    d = w.daemon()
    d.start()
    assert d.metrics.value("spotfolio_market_staleness_seconds") == 0
    w.clock.advance(600)
    assert d.metrics.value("spotfolio_market_staleness_seconds") == 600
    w.clock.advance(3600)
    d.refresh_market()
    assert d.metrics.value("spotfolio_market_staleness_seconds") == 0
    assert d.metrics.value("spotfolio_market_last_refresh_timestamp_seconds") == (
        w.clock.now().timestamp()
    )


def test_a_revocation_records_its_replacement_time_and_its_preemption_tax(
    tmp_path: Path,
) -> None:
    w = World(tmp_path)
    d = w.daemon()
    d.start()
    spot = [i for i in w.cloud.alive() if i.tier is Tier.SPOT]
    assert spot, "the plan puts some work on spot"
    inst = spot[0]
    w.cloud.revoke(inst.instance_id, w.clock.now() + timedelta(seconds=120))
    w.clock.advance(7)
    assert d.poll_notices() >= 1
    with w.store.transaction() as tx:
        (dec,) = [x for x in tx.decisions("me") if x.notice_id]
    assert dec.kind == "replace" and dec.payload["launches"], dec.reason
    # launched, not yet seen running: nothing observed
    assert d.metrics.value("spotfolio_notice_to_replacement_seconds_count") == 0
    w.clock.advance(53)
    d.reconcile()  # the listing shows the replacement running, 60 s after the notice
    assert d.metrics.value("spotfolio_notice_to_replacement_seconds_count") == 1
    assert d.metrics.value("spotfolio_notice_to_replacement_seconds_sum") == 60
    d.reconcile()  # once per notice
    assert d.metrics.value("spotfolio_notice_to_replacement_seconds_count") == 1
    workload = w.workloads.by_name(inst.workload)
    tax = dec.payload["preemption_tax"]
    # the notice checkpoint fits the 120 s window (or the replica is stateless):
    # only the restart is lost
    assert tax["lost_hours"] == 0
    assert tax["unit_hours"] == pytest.approx(inst.units * workload.restart_hours, abs=1e-6)
    price = d.book.price(inst.pool_key, inst.tier)
    assert tax["usd"] == pytest.approx(price * workload.restart_hours, abs=1e-6)
    assert d.metrics.value("spotfolio_preemption_tax_gpu_seconds_sum") == pytest.approx(
        tax["unit_hours"] * 3600, abs=1e-3
    )
    assert d.metrics.value("spotfolio_preemption_tax_usd_count") == 1


# -- the preemption tax, by hand ------------------------------------------------------


def _train(**kw: Any) -> Any:
    w = {
        "name": "llm",
        "class": "training",
        "instance_types": ["p4d.24xlarge"],
        "min_units": 8,
        "unit_hours": 1000,
        "restart_minutes": 12,
        **kw,
    }
    return parse_workloads({"workloads": [w]}).workloads[0]


def _inst(ran_h: float, units: int = 8) -> Instance:
    return Instance(
        instance_id="i-1",
        pool_key="aws/us-east-1/us-east-1a/p4d.24xlarge",
        tier=Tier.SPOT,
        workload="llm",
        state=InstanceState.RUNNING,
        units=units,
        launched_at=T0 - timedelta(hours=ran_h),
    )


MISSED = CheckpointVerdict(False, 120.0, 300.0, 100.0, "does not fit")
FITS = CheckpointVerdict(True, 120.0, 60.0, 50.0, "fits")


@pytest.mark.parametrize(
    ("workload", "ran_h", "verdict", "lost_h"),
    [
        pytest.param({"checkpoint_interval_minutes": 60}, 2.5, MISSED, 0.5, id="hourly-missed"),
        pytest.param({"checkpoint_interval_minutes": 60}, 2.5, FITS, 0.0, id="notice-saves"),
        pytest.param({"checkpoint_interval_minutes": 45}, 1.0, MISSED, 0.25, id="45-min"),
        pytest.param({"checkpoint_write_seconds": 0}, 2.5, MISSED, 2.5, id="never-checkpoints"),
    ],
)
def test_preemption_tax_is_work_since_the_last_checkpoint_plus_restart(
    workload: dict[str, Any], ran_h: float, verdict: CheckpointVerdict, lost_h: float
) -> None:
    w = _train(**workload)
    tax = preemption_tax(
        w, _inst(ran_h), at=T0, checkpoint=verdict, hazard_per_hour=0.0, price_usd_per_hour=32.0
    )
    assert tax.lost_hours == pytest.approx(lost_h)
    assert tax.restart_hours == pytest.approx(0.2)
    assert tax.unit_hours == pytest.approx(8 * (lost_h + 0.2))
    assert tax.usd == pytest.approx(32.0 * (lost_h + 0.2))


def test_daly_interval_prices_the_loss_when_none_is_configured() -> None:
    # 180 s writes, one interruption per 10 h: the interval is Daly's optimum
    # (policies.checkpoint), the loss the time past its last multiple.
    from policies.checkpoint import daly_interval

    w = _train(checkpoint_write_seconds=180)
    tau = daly_interval(180 / 3600, 10.0)
    tax = preemption_tax(
        w,
        _inst(3 * tau + 0.1),
        at=T0,
        checkpoint=MISSED,
        hazard_per_hour=0.1,
        price_usd_per_hour=1.0,
    )
    assert tax.lost_hours == pytest.approx(0.1)


def test_notice_to_replacement_counts_each_notice_of_a_storm_once() -> None:
    # two notices at the same moment (a zone-wide revocation), one with two
    # replacement instances: two observations, at the first listing that
    # shows each running
    m = DaemonMetrics()
    m.replacement_launched("n-1", T0, ["r-1", "r-2"])
    m.replacement_launched("n-2", T0, ["r-3"])

    def inst(iid: str, state: InstanceState) -> Instance:
        return Instance(
            instance_id=iid,
            pool_key="aws/us-east-1/us-east-1a/g5.xlarge",
            tier=Tier.SPOT,
            workload="api",
            state=state,
            units=1,
            launched_at=T0,
        )

    m.replacements_seen([inst("r-1", InstanceState.PENDING)], T0 + timedelta(seconds=30))
    assert m.value("spotfolio_notice_to_replacement_seconds_count") == 0
    running = [inst(i, InstanceState.RUNNING) for i in ("r-1", "r-2", "r-3")]
    m.replacements_seen(running, T0 + timedelta(seconds=90))
    m.replacements_seen(running, T0 + timedelta(seconds=120))
    assert m.value("spotfolio_notice_to_replacement_seconds_count") == 2
    assert m.value("spotfolio_notice_to_replacement_seconds_sum") == 180


# -- health and readiness -------------------------------------------------------------


GET = """
import json, sys, urllib.error, urllib.request
try:
    with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}{sys.argv[2]}", timeout=10) as r:
        print(r.status, r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
"""


def _get(port: int, path: str) -> tuple[int, dict[str, Any]]:
    """GET ``path`` from another process: (status, its JSON body)."""
    done = subprocess.run(
        [sys.executable, "-c", GET, str(port), path],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    status, body = done.stdout.split(" ", 1)
    return int(status), json.loads(body)


class FlakyQueue:
    """The simulated cloud, whose notice queue fails while ``broken``."""

    def __init__(self, cloud: Any) -> None:
        self._cloud = cloud
        self.broken = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cloud, name)

    def poll_notices(self, limit: int) -> Any:
        if self.broken:
            raise ConnectionError("queue endpoint unreachable")
        return self._cloud.poll_notices(limit)


def test_healthz_answers_while_alive_and_readyz_says_why_not_ready(tmp_path: Path) -> None:
    w = World(tmp_path)
    flaky = FlakyQueue(w.cloud)
    d = w.daemon(provider=flaky)
    port = d.metrics.serve(0, "127.0.0.1", ready=d.readiness)
    try:
        assert _get(port, "/healthz") == (200, {"alive": True})
        status, body = _get(port, "/readyz")
        assert status == 503 and body["ready"] is False and "not running" in body["reason"]
        d.start()
        status, body = _get(port, "/readyz")
        assert status == 503 and body["reason"] == "notice queue not read yet"
        d.poll_notices()
        assert _get(port, "/readyz") == (200, {"ready": True})
        flaky.broken = True
        d.guarded("poll_notices", d.poll_notices)()  # the job boundary catches it
        status, body = _get(port, "/readyz")
        assert status == 503 and body["reason"] == "notice queue unreadable (ConnectionError)"
        assert d.metrics.value("spotfolio_job_errors_total", {"job": "poll_notices"}) == 1
        flaky.broken = False
        d.poll_notices()
        assert _get(port, "/readyz")[0] == 200
        # no refresh for three intervals (the market job not run): stale
        w.clock.advance(3 * d.config.intervals.refresh_market_s + 1)
        d.poll_notices()
        status, body = _get(port, "/readyz")
        assert status == 503 and body["reason"].startswith("market stale")
        d.refresh_market()
        assert _get(port, "/readyz")[0] == 200
        assert _get(port, "/nope")[0] == 404
        assert "spotfolio_lease_held 1.0" in _scrape(port)
        d.stop()
        status, body = _get(port, "/readyz")
        assert status == 503 and "not running" in body["reason"]
        assert _get(port, "/healthz")[0] == 200
    finally:
        d.metrics.stop_serving()


def test_readiness_needs_the_lease_a_fresh_market_and_a_recent_queue_read() -> None:
    ok = Liveness(
        now=T0,
        running=True,
        lease_required=True,
        lease_held=True,
        market_at=T0 - timedelta(minutes=44),
        refresh_market_s=900.0,
        queue_read_at=T0 - timedelta(seconds=29),
        queue_error=None,
        poll_notices_s=5.0,
    )
    assert readiness(ok) is None
    assert readiness(replace(ok, lease_held=False)) == "lease not held"
    assert readiness(replace(ok, lease_held=False, lease_required=False)) is None  # a dry run
    assert readiness(replace(ok, market_at=None)) == "no market snapshot yet"
    stale = replace(ok, market_at=T0 - timedelta(minutes=46))
    assert readiness(stale) == "market stale (2760 s since the last refresh)"
    late = replace(ok, queue_read_at=T0 - timedelta(seconds=31))
    assert readiness(late) == "notice queue not read for 31 s"
    # a slow poll interval allows six polls between reads
    assert readiness(replace(late, poll_notices_s=60.0)) is None
    assert readiness(replace(ok, running=False)) == "not running (starting, or stopped)"


REPO = Path(__file__).resolve().parents[4]


def _image_check() -> tuple[list[str], str]:
    """The Dockerfile's HEALTHCHECK command (exec form) and its default URL."""
    text = (REPO / "Dockerfile").read_text()
    m = re.search(r"HEALTHCHECK [^\n]*\\\n\s*CMD (\[.*\])", text)
    assert m is not None, "no exec-form HEALTHCHECK in the Dockerfile"
    url = re.search(r"HEALTHCHECK_URL=(\S+)", text)
    assert url is not None
    return json.loads(m.group(1)), url.group(1)


def _aws_check(port: int) -> list[str]:
    """The AWS module's container health check, rendered for ``port``."""
    text = (REPO / "terraform" / "modules" / "aws" / "runtime.tf").read_text()
    m = re.search(r"health_check = [^\n]*\{\s*command = (\[.*?\])\n", text, re.S)
    assert m is not None, "no health_check command in runtime.tf"
    body = m.group(1).replace("${var.metrics_port}", str(port))
    return [json.loads(s) for s in re.findall(r'"(?:[^"\\]|\\.)*"', body)]


def test_the_image_and_the_aws_module_check_readyz_and_fail_when_not_ready(
    tmp_path: Path,
) -> None:
    cmd, default_url = _image_check()
    assert cmd[0] == "python3" and default_url == "http://127.0.0.1:9108/readyz"
    w = World(tmp_path)
    d = w.daemon()
    port = d.metrics.serve(0, "127.0.0.1", ready=d.readiness)
    url = f"http://127.0.0.1:{port}/readyz"
    aws = _aws_check(port)
    assert aws[0] == "CMD" and url in aws[-1]

    def passes(argv: list[str]) -> bool:
        argv = [sys.executable if a == "python3" else a for a in argv]
        env = {**os.environ, "HEALTHCHECK_URL": url}
        return subprocess.run(argv, env=env, capture_output=True, timeout=60).returncode == 0

    try:
        assert not passes(cmd) and not passes(aws[1:])  # starting: 503
        d.start()
        d.poll_notices()
        assert passes(cmd) and passes(aws[1:])
        d.stop()
        assert not passes(cmd) and not passes(aws[1:])
    finally:
        d.metrics.stop_serving()


def test_quota_use_is_the_live_fleets_share_of_each_quota() -> None:
    from datetime import UTC, datetime

    from markets import catalog
    from markets.cloud_fleet import Instance, InstanceState
    from markets.model import (
        MarketSnapshot,
        Pool,
        PoolSnapshot,
        Provider,
        Quota,
        QuotaUnit,
        Tier,
    )

    t0 = datetime(2026, 3, 2, tzinfo=UTC)
    key = "aws/us-east-1/us-east-1a/p3.2xlarge"  # 8 vCPUs
    snap = MarketSnapshot(
        at=t0,
        pools=(
            PoolSnapshot(
                pool=Pool.from_key(key),
                instance=catalog.instance_type("p3.2xlarge"),
                on_demand_usd_per_hour=3.06,
                observed_at=t0,
            ),
        ),
        quotas=(
            Quota(
                provider=Provider.AWS,
                region="us-east-1",
                group="P",
                tier=Tier.ON_DEMAND,
                limit=32,
                unit=QuotaUnit.VCPUS,
                code="L-417A185B",
            ),
            Quota(
                provider=Provider.AWS,
                region="us-east-1",
                group="P",
                tier=Tier.SPOT,
                limit=64,
                unit=QuotaUnit.VCPUS,
                code="L-7212CCBC",
            ),
        ),
    )

    def inst(i: int, tier: Tier, state: InstanceState = InstanceState.RUNNING) -> Instance:
        return Instance(
            instance_id=f"i-{i}",
            pool_key=key,
            tier=tier,
            workload="w",
            state=state,
            units=1,
            launched_at=t0,
        )

    m = DaemonMetrics()
    fleet = [
        inst(1, Tier.ON_DEMAND),
        inst(2, Tier.COMMITTED),
        inst(3, Tier.SPOT),
        inst(4, Tier.SPOT, InstanceState.TERMINATED),
    ]
    m.observe_quotas(snap, fleet)
    labels = {"provider": "aws", "region": "us-east-1"}
    assert m.value("spotfolio_quota_used_ratio", {**labels, "quota": "L-417A185B"}) == 0.5
    assert m.value("spotfolio_quota_used_ratio", {**labels, "quota": "L-7212CCBC"}) == 0.125
