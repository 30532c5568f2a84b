"""broker.scale.fanout: the same results, in input order, here or on Dask;
``bench --workers`` (deadline and fleet windows) through it."""

from __future__ import annotations

import pytest

from broker.bench import BenchData
from broker.bench import deadline as deadline_setting
from broker.bench import fleet as fleet_setting
from broker.scale.fanout import Executor, ExecutorSpec
from markets.errors import InputError
from tests.e2e.test_bench import _traces


def _square_slowly_for_small(x: int) -> int:
    import time

    time.sleep(0.05 * (5 - x) if x < 5 else 0)  # the first inputs finish last
    return x * x


def test_serial_map_reports_each_result() -> None:
    seen: list[tuple[int, int]] = []
    with Executor(ExecutorSpec()) as ex:
        assert ex.workers == 1
        got = ex.map(_square_slowly_for_small, [3, 1, 2], on_done=lambda d, t: seen.append((d, t)))
    assert got == [9, 1, 4]
    assert seen == [(1, 3), (2, 3), (3, 3)]


def test_serial_run_on_workers_returns_the_one_reading() -> None:
    with Executor(ExecutorSpec()) as ex:
        assert ex.run_on_workers(lambda: 7) == [7]


@pytest.mark.slow
def test_a_local_cluster_returns_the_serial_results_in_input_order() -> None:
    items = list(range(10))
    done: list[int] = []
    data = BenchData(source="synthetic", traces=_traces(days=6))
    with Executor(ExecutorSpec(workers=2)) as ex:
        assert ex.workers == 2
        got = ex.map(_square_slowly_for_small, items, on_done=lambda d, t: done.append(d))
        # bench --workers: the deadline and fleet windows on the same cluster
        dl = deadline_setting.run(data, 2, 0, executor=ex)
        fl = fleet_setting.run(data, 2, 0, executor=ex)
    assert got == [x * x for x in items]
    assert done == list(range(1, 11))
    assert dl == deadline_setting.run(data, 2, 0)
    assert fl == fleet_setting.run(data, 2, 0)


def test_an_unreachable_scheduler_names_the_option() -> None:
    with (
        pytest.raises(InputError, match="--scheduler"),
        Executor(ExecutorSpec(scheduler="tcp://127.0.0.1:9")),
    ):
        pass
