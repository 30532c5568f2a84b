"""PhaseClock: phases present, in order, non-negative, summing to about the total."""

from broker.whatif.phases import PhaseClock


def _work(n: int) -> int:
    return sum(i * i for i in range(n))


def test_phases_present_in_order_and_non_negative() -> None:
    clock = PhaseClock()
    with clock.phase("load"):
        _work(20_000)
    with clock.phase("replay"):
        _work(50_000)
    out = clock.as_dict()
    phases = out["phases"]
    assert isinstance(phases, dict)
    assert list(phases) == ["load", "replay"]
    for figures in phases.values():
        assert figures["cpu_s"] >= 0.0
        assert figures["wall_s"] >= 0.0
        assert figures["peak_rss_mib"] > 0.0


def test_phase_run_twice_accumulates_and_sum_is_within_total() -> None:
    clock = PhaseClock()
    for _ in range(2):
        with clock.phase("solve"):
            _work(30_000)
    (solve,) = clock.phases
    out = clock.as_dict()
    total = out["total"]
    assert isinstance(total, dict)
    # Phases are disjoint slices of the run, so their sum cannot exceed the total
    # (rounding slack only); CPU time is this process's own, not the machine's.
    assert solve.cpu_s <= total["cpu_s"] + 1e-3
    assert solve.wall_s <= total["wall_s"] + 1e-3
    assert total["peak_rss_mib"] >= solve.peak_rss_mib - 0.1  # the total is rounded to 0.1 MiB


def test_phase_is_recorded_when_it_raises() -> None:
    clock = PhaseClock()
    try:
        with clock.phase("fails"):
            raise ValueError("boom")
    except ValueError:
        pass
    assert [p.name for p in clock.phases] == ["fails"]


def test_a_nested_phase_counts_to_itself_only() -> None:
    clock = PhaseClock()
    with clock.phase("outer"):
        _work(20_000)
        with clock.phase("inner"):
            _work(400_000)
    outer, inner = clock.phases
    assert (outer.name, inner.name) == ("outer", "inner")
    # the inner work is 20x the outer's own: counted twice, outer would exceed inner
    assert outer.cpu_s < inner.cpu_s
    assert outer.wall_s < inner.wall_s
    total = clock.as_dict()["total"]
    assert isinstance(total, dict)
    assert outer.cpu_s + inner.cpu_s <= total["cpu_s"] + 1e-3


def test_lines_are_a_table_with_every_phase_and_the_total() -> None:
    clock = PhaseClock()
    with clock.phase("market"):
        _work(10_000)
    with clock.phase("risk band"):
        _work(10_000)
    lines = clock.lines()
    assert lines[0].split() == ["phase", "CPU", "s", "wall", "s", "peak", "MiB"]
    assert [ln.rsplit(None, 3)[0] for ln in lines[1:]] == ["market", "risk band", "total"]
    assert all(float(ln.split()[-1]) > 0 for ln in lines[1:])  # peak MiB
