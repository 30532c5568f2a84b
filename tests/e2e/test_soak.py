"""The soak, scaled down: six days of simulated time on a real PostgreSQL,
with the daemon killed twice and the store server restarted once; the full
90 days are ``spotfolio bench``'s (``machinery.soak``)."""

from __future__ import annotations

from typing import Any

import pytest

from broker.bench import pgserver, runner, soak


def _day(day: int, pid: int, rss: float, notices: int, nbytes: int) -> dict[str, Any]:
    return {
        "day": day,
        "pid": pid,
        "rss_mib": rss,
        "rows": {"notices": notices},
        "bytes": nbytes,
        "p99_ms": 20.0,
    }


def test_the_growth_check_catches_a_leak_and_a_store_that_grows_with_its_history() -> None:
    flat = [_day(d, 1, 150.0 + 0.1 * d, 1000 * d, 4_000_000 * d) for d in range(1, 31)]
    growth = soak._growth(flat)
    assert soak.check({"growth": growth, "duplicate_launches": 0, "orphaned_instances": 0}) == []
    assert growth["store_bytes_per_notice"] == 4000.0
    leak = [_day(d, 1, 150.0 + 3.0 * d, 1000 * d, 4_000_000 * d) for d in range(1, 31)]
    quad = [_day(d, 1, 150.0, 1000 * d, 4_000 * d * d * 60) for d in range(1, 31)]
    for days, key in (
        (leak, "rss_mib_per_day_after_warmup"),
        (quad, "store_growth_second_half_vs_first"),
    ):
        bad = soak.check(
            {"growth": soak._growth(days), "duplicate_launches": 0, "orphaned_instances": 1}
        )
        assert [b.split()[0] for b in bad] == [key, "orphaned_instances"]


def test_the_bench_targets_read_the_soak_and_plan_scale_rows() -> None:
    out = {
        "machinery": {
            "soak": {
                "notices": 12_000,
                "duplicate_launches": 0,
                "orphaned_instances": 0,
                "growth": {
                    "rss_mib_per_day_after_warmup": 0.4,
                    "store_bytes_per_notice": 3000.0,
                    "store_growth_second_half_vs_first": 1.1,
                    "p99_last10_vs_first10": 4.0,
                },
            },
            "plan_scale": {"planned": False, "planned_seconds": None},
        }
    }
    rows = {t["metric"]: t["met"] for t in runner.check_targets(out)}
    assert rows["soak.notices"] is True and rows["soak.growth.p99_last10_vs_first10"] is False
    assert rows["soak.growth.rss_mib_per_day_after_warmup"] is True
    assert rows["plan_scale.planned"] is False  # no plan came out: not met
    assert rows["plan_scale.planned_seconds"] is None


@pytest.mark.slow
def test_six_days_of_waves_with_kills_and_a_store_restart_stays_bounded() -> None:
    why = pgserver.missing()
    if why is not None:
        pytest.skip(why)
    spec = soak.SoakSpec(
        days=6,
        waves_per_pool_hour=0.6,
        wave_size=6,
        kills=((31.3, "after"), (58.4, "before")),
        store_restart_hour=45.6,
    )
    with pgserver.TempPostgres() as pg:
        out = soak.run(spec, pg, timeout_s=900)
    # Both kills happened inside a cloud call, each stretch resumed from the store.
    assert [s["killed"] for s in out["segments"]] == [True, True, False]
    assert out["store_restarted"] is True
    days = out["days"]
    assert [d["day"] for d in days] == list(range(1, 7))
    assert len({d["pid"] for d in days}) == 3  # three daemon processes
    assert all(d["rss_mib"] > 0 and d["bytes"] > 0 and d["p99_ms"] is not None for d in days)
    assert out["notices"] >= 10_000
    assert out["orphaned_instances"] == 0 and out["unhandled_notices"] == 0
    # Rows grow with what happened: every notice the daemon recorded is a row.
    assert [d["rows"]["notices"] for d in days] == sorted(d["rows"]["notices"] for d in days)
    g = out["growth"]
    assert g["rss_kib_per_notice_after_warmup"] is not None
    assert g["store_growth_second_half_vs_first"] is not None
    # The wall-clock latency ratio is the bench's target (load moves it).
    leave_out = ("p99_last10_vs_first10", "rss_mib_per_day_after_warmup")
    assert soak.check(out, leave_out=leave_out) == []
    assert out["duplicate_launches"] == 0
