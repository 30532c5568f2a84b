"""``map_shared``: pieces of one run on worker processes, as if run here.

Real worker processes (``spawn``), no mock: each test starts a pool of two.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from broker.scale.pool import map_shared, usable_cpus
from tests.paths import REPO


def scaled(shared: dict[str, float], x: int) -> tuple[int, float, int]:
    """A piece: its item, the shared factor times it, and where it ran."""
    return x, shared["factor"] * x, os.getpid()


def fails_on_three(shared: dict[str, float], x: int) -> float:
    if x == 3:
        raise ValueError(f"piece {x} failed")
    return shared["factor"] * x


def dies_in_a_worker(shared: dict[str, int], x: int) -> int:
    """Item 2 kills the worker process it runs in (as the kernel's OOM killer
    would); anywhere, the item squared."""
    if x == 2 and os.getpid() != shared["parent"]:
        os._exit(9)
    return x * x


def test_the_pieces_run_on_workers_and_come_back_in_order() -> None:
    done: list[tuple[int, int]] = []
    got = map_shared(
        scaled, {"factor": 2.5}, list(range(8)), workers=2, on_done=lambda d, t: done.append((d, t))
    )
    assert [(x, y) for x, y, _pid in got] == [(x, 2.5 * x) for x in range(8)]
    assert os.getpid() not in {pid for _x, _y, pid in got}  # not here
    assert done == [(i, 8) for i in range(1, 9)]
    assert multiprocessing.active_children() == []  # none left behind


def test_one_worker_or_one_piece_runs_here() -> None:
    for workers, items in ((1, [1, 2, 3]), (4, [7])):
        got = map_shared(scaled, {"factor": 1.0}, items, workers=workers)
        assert {pid for _x, _y, pid in got} == {os.getpid()}
        assert [x for x, _y, _pid in got] == items


def test_a_piece_s_error_is_raised_here_and_no_worker_is_left() -> None:
    with pytest.raises(ValueError, match="piece 3 failed"):
        map_shared(fails_on_three, {"factor": 1.0}, list(range(6)), workers=2)
    assert multiprocessing.active_children() == []


def test_a_worker_s_death_costs_time_not_results(caplog: pytest.LogCaptureFixture) -> None:
    done: list[int] = []
    got = map_shared(
        dies_in_a_worker,
        {"parent": os.getpid()},
        list(range(6)),
        workers=2,
        on_done=lambda d, _t: done.append(d),
    )
    assert got == [x * x for x in range(6)]
    assert done == list(range(1, 7))  # each piece counted once
    assert "a worker process died" in caplog.text
    assert multiprocessing.active_children() == []


def test_the_workers_do_not_run_the_caller_s_script_again(tmp_path: Path) -> None:
    """A script with no ``__main__`` guard: ``spawn`` would run it again in
    each worker (and fail there: a pool started while importing); here it
    runs once, and the pieces are still done on the workers."""
    marker = tmp_path / "ran"
    script = tmp_path / "unguarded.py"
    script.write_text(
        textwrap.dedent(f"""
        import os
        from broker.scale.pool import map_shared
        from tests.unit.broker.scale.test_pool import scaled
        with open({str(marker)!r}, "a") as f:
            f.write("ran\\n")
        got = map_shared(scaled, {{"factor": 3.0}}, [1, 2, 3, 4], workers=2)
        print([y for _x, y, _pid in got], os.getpid() in {{p for _x, _y, p in got}})
        """)
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[3.0, 6.0, 9.0, 12.0] False"
    assert marker.read_text() == "ran\n"


def test_usable_cpus_is_what_this_process_may_use() -> None:
    n = usable_cpus()
    assert 1 <= n <= (os.cpu_count() or 1)
    if hasattr(os, "sched_getaffinity"):
        assert n == len(os.sched_getaffinity(0))
