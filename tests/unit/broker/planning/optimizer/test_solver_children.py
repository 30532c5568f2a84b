"""A killed solve leaves no CBC running (broker.planning.optimizer.children).

Each case starts a real process that solves a MILP CBC cannot finish within
the test (a 150-item, 25-constraint knapsack with no gap allowed and an hour
of time limit: a 70-item one was once solved within the half second the test
waits on an idle machine), waits until its CBC child shows in /proc, signals the parent
and checks that CBC is gone. SIGTERM goes through the CLI's handler
(SystemExit unwinds the solve), SIGINT through KeyboardInterrupt, and
SIGKILL, which nothing in the parent can see, through the kernel's
parent-death signal (Linux only).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.paths import REPO

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/stat").exists(), reason="reads child processes from /proc (Linux)"
)

_SCRIPT = textwrap.dedent(
    """
    import random, sys
    import pulp
    from broker.cli import _terminate_as_exit
    from broker.planning.optimizer.backend import run_solver

    _terminate_as_exit()  # what ``spotfolio`` does at start
    rng = random.Random(7)
    n, m = 150, 25
    prob = pulp.LpProblem("hard", pulp.LpMaximize)
    x = [pulp.LpVariable(f"x{i}", cat=pulp.LpBinary) for i in range(n)]
    w = [[rng.randint(20, 100) for _ in range(n)] for _ in range(m)]
    prob += pulp.lpSum(rng.randint(20, 100) * v for v in x)
    for row in w:
        prob += pulp.lpSum(a * v for a, v in zip(row, x)) <= sum(row) // 2
    print("solving", flush=True)
    run_solver(prob, "cbc", gap=0.0, time_limit_s=3600.0)
    print("finished", flush=True)
    """
)


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces, so split after ')'
        fields = stat.rpartition(")")[2].split()
        if int(fields[1]) == pid:
            out.append(int(entry.name))
    return out


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")  # a zombie is dead


def _cbc_child(parent: subprocess.Popen[str]) -> int:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for pid in _children(parent.pid):
            try:
                if "cbc" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                    return pid
            except OSError:
                continue
        assert parent.poll() is None, parent.communicate()
        time.sleep(0.1)
    raise AssertionError("no CBC child appeared within 120 s")


@pytest.mark.parametrize(
    "sig",
    [
        pytest.param(signal.SIGTERM, id="sigterm"),
        pytest.param(signal.SIGINT, id="sigint"),
        pytest.param(signal.SIGKILL, id="sigkill-parent-death-signal"),
    ],
)
def test_killed_solve_leaves_no_cbc_process(sig: signal.Signals, tmp_path: Path) -> None:
    """... and, when the parent can act on the signal (SIGTERM, SIGINT), no
    file of the solve either: the model, start, solution and log files are
    removed as the solve unwinds (they were left in /tmp before, ~0.2-5 MB
    each stop)."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(scratch), "TMP": str(scratch)}
    parent = subprocess.Popen(
        [sys.executable, "-c", _SCRIPT],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    cbc = None
    try:
        cbc = _cbc_child(parent)
        time.sleep(0.5)  # CBC is searching, not starting
        assert _running(cbc)
        parent.send_signal(sig)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 10
        while _running(cbc) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(cbc), f"CBC {cbc} outlived its parent after {sig.name}"
        out, _err = parent.communicate()
        assert "finished" not in out  # the solve was cut short, not completed
        if sig is not signal.SIGKILL:  # a killed process removes nothing
            assert sorted(p.name for p in scratch.iterdir()) == []
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if cbc is not None and _running(cbc):
            os.kill(cbc, signal.SIGKILL)  # only the CBC this test saw start
        for pipe in (parent.stdout, parent.stderr):  # a failed case leaks no file
            if pipe is not None:
                pipe.close()
