"""``spotfolio sweep --scheduler`` against a real ``dask scheduler`` and two
``dask worker`` processes on 127.0.0.1, one killed while it runs a scenario:
the Parquet equals a serial run's, and the sweep prints no Dask error. The
inputs travel with the tasks (a worker runs a scenario whose files exist
nowhere on its machine) or are read from one bundle at ``--inputs-url``. A
grid sets what-if options beyond the axes (``--usage``, ``--scenarios``,
``--strict``)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker.cli.sweep import run_shipped, shipped
from tests.paths import REPO
from tests.unit.broker.scale.test_sweep_cluster import TINY, _timeless

GRID = """\
policies: [tiny.yaml]
committed: [null, 0.5]
stress: [1, 2, {interruption: 3, availability: 0.8}]
options: {days: 1, replan-hours: 24, scenarios: 2, strict: false}
"""
RUN_CLI = "import sys; from broker.cli import main; sys.exit(main(sys.argv[1:]))"
DASK = shutil.which("dask") or str(Path(sys.executable).with_name("dask"))


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}


def _rows(path: Path) -> list[dict[str, object]]:
    import duckdb

    rel = duckdb.connect().sql(f"SELECT * FROM '{path}' ORDER BY scenario")
    rows = [dict(zip(rel.columns, r, strict=True)) for r in rel.fetchall()]
    for r in rows:
        r.pop("seconds", None)
        r["result_json"] = _timeless(json.loads(str(r["result_json"])))
    return rows


def test_a_scenario_runs_from_shipped_inputs_at_paths_that_do_not_exist(tmp_path: Path) -> None:
    src = tmp_path / "tiny.yaml"
    src.write_text(TINY.read_text())
    argv = ("--policies", str(src), "--days", "1", "--replan-hours", "24")
    files = shipped(argv)
    assert files == {str(src): {"": src.read_bytes()}}
    elsewhere = "/nonexistent/grid/tiny.yaml"
    moved = tuple(elsewhere if a == str(src) else a for a in argv)
    got = run_shipped((moved, {elsewhere: files[str(src)]}))
    assert got["error"] is None and got["result"] is not None
    here = run_shipped((argv, {}))
    assert _timeless(got["result"]) == _timeless(here["result"])


@pytest.mark.slow
@pytest.mark.parametrize("by_url", [False, True], ids=["shipped", "inputs-url"])
def test_a_sweep_on_dask_processes_survives_a_killed_worker_and_equals_serial(
    tmp_path: Path, by_url: bool
) -> None:
    from distributed import Client

    (tmp_path / "tiny.yaml").write_text(TINY.read_text())
    grid = tmp_path / "grid.yaml"
    grid.write_text(GRID)
    share = tmp_path / "share"
    share.mkdir()
    # the inputs as one bundle at a file:// URL the workers read, or with each task
    inputs = ["--inputs-url", share.as_uri()] if by_url else []
    serial = subprocess.run(
        [
            sys.executable,
            "-c",
            RUN_CLI,
            "sweep",
            str(grid),
            "--workers",
            "1",
            "--out",
            str(tmp_path / "serial.parquet"),
        ],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert serial.returncode == 0, serial.stderr
    sched_file = tmp_path / "scheduler.json"
    procs: list[subprocess.Popen[str]] = []
    logs = tmp_path / "logs"
    logs.mkdir()

    def start(*argv: str, name: str) -> subprocess.Popen[str]:
        with (logs / f"{name}.err").open("w") as err:
            p = subprocess.Popen(
                [DASK, *argv],
                env=_env(),
                cwd=logs,
                text=True,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        procs.append(p)
        return p

    try:
        start(
            "scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--no-dashboard",
            "--scheduler-file",
            str(sched_file),
            name="scheduler",
        )
        deadline = time.monotonic() + 120
        while not sched_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        address = json.loads(sched_file.read_text())["address"]
        workers = [
            start(
                "worker",
                address,
                "--nthreads",
                "1",
                "--nworkers",
                "1",
                "--no-dashboard",
                "--host",
                "127.0.0.1",
                "--name",
                f"w{i}",
                name=f"worker{i}",
            )
            for i in range(2)
        ]
        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
            sweep = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    RUN_CLI,
                    "sweep",
                    str(grid),
                    "--scheduler",
                    address,
                    "--out",
                    str(tmp_path / "cluster.parquet"),
                    "--json",
                    *inputs,
                ],
                env=_env(),
                cwd=tmp_path,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            # kill the first worker while it runs a scenario
            victim = None
            while victim is None and time.monotonic() < deadline + 300:
                busy = {a: t for a, t in client.processing().items() if t}
                info = client.scheduler_info()["workers"]
                names = {a: info[a]["name"] for a in busy if a in info}
                victim = next((a for a, n in names.items() if n == "w0"), None)
                time.sleep(0.05)
            assert victim is not None, "worker w0 never ran a scenario"
            os.kill(workers[0].pid, signal.SIGKILL)
            out, err = sweep.communicate(timeout=600)
        assert sweep.returncode == 0, err
        summary = json.loads(out)
        assert (summary["scenarios"], summary["failed"]) == (6, 0)
        assert "ERROR" not in err and "Traceback" not in err, err
        assert workers[0].wait(timeout=60) == -signal.SIGKILL
        assert len(list(share.glob("*.tar.gz"))) == (1 if by_url else 0)
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
    assert _rows(tmp_path / "cluster.parquet") == _rows(tmp_path / "serial.parquet")
