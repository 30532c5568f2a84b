"""Demand inputs (CSV/YAML, shapes) and the hour-of-week forecast."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from broker.planning.demand import (
    DemandSet,
    example_demand_path,
    forecast_hour_of_week,
    load_demand,
)
from broker.planning.forecast import hourly_index
from markets.errors import InputError
from policies.workloads.spec import WorkloadSet, default_workloads, parse_workloads

START = pd.Timestamp("2026-01-05T00:00:00Z")  # a Monday


@pytest.fixture(scope="module")
def fleet() -> WorkloadSet:
    return default_workloads()


def _two_serving(*, shapes: bool) -> WorkloadSet:
    shape = {"base_units": 10, "peak_units": 20}
    workloads = [
        {"name": "api", "class": "serving", "instance_types": ["g5.xlarge"]},
        {"name": "search", "class": "serving", "instance_types": ["g6.xlarge"]},
        {"name": "job", "class": "batch", "instance_types": ["p3.2xlarge"], "unit_hours": 10},
    ]
    if shapes:
        for w in workloads[:2]:
            w["demand"] = shape  # type: ignore[index]
    return parse_workloads({"workloads": workloads}, demand_supplied=not shapes)


def _csv(tmp_path: Path, text: str, name: str = "demand.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# --- curves from inline shapes -----------------------------------------------------------


def test_from_shapes_is_hourly_utc_and_seeded(fleet: WorkloadSet) -> None:
    a = DemandSet.from_shapes(fleet, START, 24 * 14, seed=7)
    b = DemandSet.from_shapes(fleet, START, 24 * 14, seed=7)
    c = DemandSet.from_shapes(fleet, START, 24 * 14, seed=8)
    s = a.series("chat-api")
    assert a.names() == ["chat-api"]  # training and batch come from their specs
    assert isinstance(s.index, pd.DatetimeIndex) and str(s.index.tz) == "UTC"
    assert s.index.freqstr == "h" and len(s) == 24 * 14 and s.dtype == float
    assert s.index[0] == START
    pd.testing.assert_series_equal(s, b.series("chat-api"))
    assert not np.allclose(s.to_numpy(), c.series("chat-api").to_numpy())


def test_from_shapes_follows_the_shape(fleet: WorkloadSet) -> None:
    shape = fleet.by_name("chat-api").demand
    assert shape is not None
    s = DemandSet.from_shapes(fleet, START, 24 * 28, seed=1).series("chat-api")
    expected = np.array(
        [shape.units_at(t.hour, weekend=t.day_of_week >= 5) for t in s.index], dtype=float
    )
    ratio = s.to_numpy() / expected
    assert abs(ratio.mean() - 1.0) < 0.01  # noise is centred
    assert 0.01 < ratio.std() < 0.06  # "a little" noise: 3 % by default
    weekday_peak = s[(s.index.day_of_week < 5) & (s.index.hour == 12)].mean()  # type: ignore[attr-defined]
    weekend_peak = s[(s.index.day_of_week >= 5) & (s.index.hour == 12)].mean()  # type: ignore[attr-defined]
    base, peak = shape.base_units, shape.peak_units
    assert weekday_peak == pytest.approx(peak, rel=0.03)
    assert weekend_peak == pytest.approx(base + (peak - base) * shape.weekend_factor, rel=0.03)


def test_adding_a_workload_leaves_other_curves_unchanged() -> None:
    both = DemandSet.from_shapes(_two_serving(shapes=True), START, 48, seed=3)
    one = parse_workloads(
        {
            "workloads": [
                {
                    "name": "api",
                    "class": "serving",
                    "instance_types": ["g5.xlarge"],
                    "demand": {"base_units": 10, "peak_units": 20},
                }
            ]
        }
    )
    alone = DemandSet.from_shapes(one, START, 48, seed=3)
    pd.testing.assert_series_equal(both.series("api"), alone.series("api"))


def test_from_shapes_without_a_shape_is_an_input_error() -> None:
    with pytest.raises(InputError, match=r"api\.demand"):
        DemandSet.from_shapes(_two_serving(shapes=False), START, 24)


def test_window_and_frame(fleet: WorkloadSet) -> None:
    d = DemandSet.from_shapes(fleet, START, 72)
    w = d.window(START + pd.Timedelta(hours=24), 24)
    assert w.hours == 24 and w.start == START + pd.Timedelta(hours=24)
    assert list(w.frame().columns) == ["chat-api"]
    pd.testing.assert_series_equal(w.series("chat-api"), d.series("chat-api").iloc[24:48])
    with pytest.raises(InputError, match="covers"):  # names the demand source
        d.window(START + pd.Timedelta(hours=60), 24)


# --- CSV files ------------------------------------------------------------------------------


def test_wide_and_long_csv_agree(tmp_path: Path) -> None:
    ws = _two_serving(shapes=False)
    wide = _csv(
        tmp_path,
        "hour,api,search\n"
        "2026-01-05T00:00:00Z,10,1\n"
        "2026-01-05T01:00:00Z,11.5,2\n"
        "\n"  # blank lines are skipped but still counted
        "2026-01-05T02:00:00+00:00,12,3\n",
    )
    long = _csv(
        tmp_path,
        "hour,workload,units\n"
        + "".join(
            f"2026-01-05T0{h}:00Z,{name},{v}\n"
            for name, vals in (("api", (10, 11.5, 12)), ("search", (1, 2, 3)))
            for h, v in enumerate(vals)
        ),
        "long.csv",
    )
    a, b = load_demand(wide, ws), load_demand(long, ws)
    assert a.series("api").tolist() == [10.0, 11.5, 12.0]
    assert a.index.equals(hourly_index(START, 3))
    for name in ("api", "search"):
        pd.testing.assert_series_equal(a.series(name), b.series(name))
    assert a.source == str(wide)


def test_missing_column_falls_back_to_the_inline_shape(tmp_path: Path) -> None:
    ws = _two_serving(shapes=True)
    path = _csv(tmp_path, "hour,api\n2026-01-05T00:00Z,3\n2026-01-05T01:00Z,4\n")
    d = load_demand(path, ws)
    assert d.series("api").tolist() == [3.0, 4.0]
    assert d.series("search").index.equals(d.index)
    assert d.series("search").iloc[0] == pytest.approx(10, rel=0.15)


def test_missing_column_without_shape_is_named(tmp_path: Path) -> None:
    path = _csv(tmp_path, "hour,api\n2026-01-05T00:00Z,3\n")
    with pytest.raises(InputError, match="'search'") as info:
        load_demand(path, _two_serving(shapes=False))
    assert info.value.source == str(path)


H0, H1, H2 = "2026-01-05T00:00Z", "2026-01-05T01:00Z", "2026-01-05T02:00Z"

CSV_ERRORS = [
    pytest.param(
        f"hour,api,search\n{H0},1,1\n{H1},-2,1\n", "line 3, column api", ">= 0", id="negative"
    ),
    pytest.param(
        f"hour,api,search\n{H0},1,1\n{H1},1,lots\n",
        "line 3, column search",
        "a number",
        id="non-numeric",
    ),
    pytest.param(
        f"hour,api,search\n{H0},1,1\n{H1},,1\n", "line 3, column api", "a number", id="empty-cell"
    ),
    pytest.param(
        f"hour,api,search\n{H0},1,inf\n", "line 2, column search", "a number", id="infinite"
    ),
    pytest.param(
        f"hour,api,serch\n{H0},1,1\n",
        "line 1, column serch",
        "serving workload",
        id="unknown-workload",
    ),
    pytest.param(
        f"hour,api,job\n{H0},1,1\n",
        "line 1, column job",
        "from their spec",
        id="batch-workload-column",
    ),
    pytest.param(
        f"hour,api,search\n{H0},1,1\n{H2},1,1\n",
        "line 3, column hour",
        "1 hour(s) missing",
        id="gap",
    ),
    pytest.param(
        f"hour,api,search\n{H0},1,1\n{H1},1,1\n\n{H1},1,1\n",
        "line 5, column hour",
        "line 3 has the same",
        id="duplicate-hour-after-blank-line",
    ),
    pytest.param(
        f"hour,api,search\n{H1},1,1\n{H0},1,1\n",
        "line 3, column hour",
        "increasing order",
        id="out-of-order",
    ),
    pytest.param(
        "hour,api,search\n2026-01-05T00:30Z,1,1\n",
        "line 2, column hour",
        "whole hour",
        id="half-hour",
    ),
    pytest.param(
        "hour,api,search\n2026-01-05T00:00:01Z,1,1\n",
        "line 2, column hour",
        "whole hour",
        id="stray-second",
    ),
    pytest.param(
        "hour,api,search\nyesterday,1,1\n", "line 2, column hour", "ISO 8601", id="not-a-time"
    ),
    pytest.param(f"time,api,search\n{H0},1,1\n", "line 1", "'hour'", id="no-hour-column"),
    pytest.param(f"hour,api,api\n{H0},1,1\n", "line 1, column 3", "unique", id="repeated-column"),
    pytest.param(f"hour,api,search\n{H0},1,1,1\n", "line 2", "3 fields", id="ragged-row"),
    pytest.param("hour,api,search\n", "line 2", "at least one row", id="header-only"),
    pytest.param("", "line 1", "header row", id="empty-file"),
    pytest.param(
        f"hour,workload,units\n{H0},api,1\n{H1},apx,1\n",
        "line 3, column workload",
        "serving workload",
        id="long-unknown-workload",
    ),
    pytest.param(
        f"hour,workload,units\n{H0},api,1\n{H0},api,2\n",
        "line 3, column hour",
        "line 2 has the same",
        id="long-duplicate-hour",
    ),
    pytest.param(
        f"hour,workload,units\n{H0},api,1\n{H1},api,x\n",
        "line 3, column units",
        "a number",
        id="long-bad-units",
    ),
    pytest.param(
        f"hour,workload,units\n{H0},api,1\n{H1},api,1\n{H0},search,1\n",
        "column workload (search)",
        "same hours",
        id="long-uneven-coverage",
    ),
]


@pytest.mark.parametrize(("text", "field", "expected"), CSV_ERRORS)
def test_csv_error_names_file_line_and_column(
    tmp_path: Path, text: str, field: str, expected: str
) -> None:
    path = _csv(tmp_path, text)
    with pytest.raises(InputError) as info:
        load_demand(path, _two_serving(shapes=True))
    err = info.value
    assert err.source == str(path)
    assert err.field == field
    assert expected in err.expected
    assert str(path) in str(err) and field in str(err)


def test_shipped_example_loads_and_forecasts(fleet: WorkloadSet) -> None:
    d = load_demand(example_demand_path(), fleet)
    assert d.names() == ["chat-api"] and d.hours == 24 * 7 * 6 and d.start == START
    shape = fleet.by_name("chat-api").demand
    assert shape is not None
    assert d.series("chat-api").max() == pytest.approx(shape.peak_units, rel=0.15)
    at = START + pd.Timedelta(weeks=2)
    f = d.forecast(at, 24 * 7 * 4)["chat-api"]
    actual = d.series("chat-api")[at:]
    assert np.mean(np.abs(f.point / actual - 1)) < 0.05


def test_missing_file(tmp_path: Path, fleet: WorkloadSet) -> None:
    with pytest.raises(InputError, match="readable"):
        load_demand(tmp_path / "absent.csv", fleet)


# --- YAML files ----------------------------------------------------------------------------


def test_yaml_lists_and_shapes(tmp_path: Path) -> None:
    path = tmp_path / "d.yaml"
    path.write_text(
        "start: 2026-01-05T00:00:00Z\n"
        "workloads:\n"
        "  api: [1, 2, 3, 4.5]\n"
        "  search: {base_units: 5, peak_units: 9, peak_start_hour: 2, peak_end_hour: 3}\n"
    )
    d = load_demand(path, _two_serving(shapes=False), seed=0)
    assert d.hours == 4 and d.start == START
    assert d.series("api").tolist() == [1.0, 2.0, 3.0, 4.5]
    peak_hour = d.series("search").iloc[2]
    assert peak_hour == pytest.approx(9, rel=0.15)
    assert d.series("search").drop(d.index[2]).max() < 7


YAML_ERRORS = [
    pytest.param("workloads:\n  api: [1]\n", "start", "first hour", id="no-start"),
    pytest.param(
        "start: 2026-01-05T00:30:00Z\nworkloads:\n  api: [1]\n",
        "start",
        "whole hour",
        id="start-off-the-hour",
    ),
    pytest.param(
        "start: 2026-01-05T00:00:00Z\nworkloads:\n  api: [1, -1]\n",
        "workloads.api[1]",
        ">= 0",
        id="negative",
    ),
    pytest.param(
        "start: 2026-01-05T00:00:00Z\nworkloads:\n  api: [1, x]\n",
        "workloads.api[1]",
        "a finite number",
        id="non-numeric",
    ),
    pytest.param(
        "start: 2026-01-05T00:00:00Z\nworkloads:\n  api: [1, 2]\n  search: [1]\n",
        "workloads.search",
        "2 hourly values",
        id="uneven-lengths",
    ),
    pytest.param(
        "start: 2026-01-05T00:00:00Z\nworkloads:\n  nope: [1]\n",
        "workloads.nope",
        "serving workload",
        id="unknown-workload",
    ),
    pytest.param(
        "start: 2026-01-05T00:00:00Z\nhours: 3\nworkloads:\n"
        "  api: {base_units: 5, peak_units: 2}\n",
        "workloads.api.peak_units",
        "peak_units >= base_units",
        id="bad-shape",
    ),
    pytest.param(
        "start: 2026-01-05T00:00:00Z\nworkloads:\n  api: {base_units: 5}\n",
        "hours",
        "whole number",
        id="shape-without-hours",
    ),
    pytest.param(
        "start: 2026-01-05T00:00:00Z\nworkload:\n  api: [1]\n",
        "workloads",
        "mapping",
        id="misspelt-key",
    ),
    pytest.param(
        "start: 2026-01-05T00:00:00Z\nstep: 1\nworkloads:\n  api: [1]\n",
        "step",
        "one of start",
        id="unknown-key",
    ),
    pytest.param("start: [\n", "line 2, column 1", "valid YAML", id="syntax"),
]


@pytest.mark.parametrize(("text", "field", "expected"), YAML_ERRORS)
def test_yaml_error_names_file_and_field(
    tmp_path: Path, text: str, field: str, expected: str
) -> None:
    path = tmp_path / "d.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        load_demand(path, _two_serving(shapes=True))
    assert info.value.source == str(path)
    assert info.value.field == field
    assert expected in info.value.expected


# --- forecasting -----------------------------------------------------------------------------


def _weekly_truth(index: pd.DatetimeIndex) -> np.ndarray:
    """A known hour-of-week pattern: daily sine + weekday/weekend level + Friday bump."""
    hod = index.hour.to_numpy()
    dow = index.day_of_week.to_numpy()
    daily = 40 + 20 * np.sin((hod - 6) / 24 * 2 * np.pi)
    level = np.where(dow >= 5, 0.6, 1.0) * np.where(dow == 4, 1.2, 1.0)
    return np.asarray(daily * level, dtype=float)


def _noisy(index: pd.DatetimeIndex, sigma: float, seed: int) -> pd.Series:
    truth = _weekly_truth(index)
    rng = np.random.default_rng(seed)
    return pd.Series(truth * (1 + sigma * rng.standard_normal(len(index))), index=index)


def test_forecast_recovers_a_weekly_pattern() -> None:
    history = _noisy(hourly_index(START, 24 * 7 * 8), sigma=0.05, seed=11)
    future_index = hourly_index(START + pd.Timedelta(weeks=8), 24 * 7 * 2)
    held_out = _noisy(future_index, sigma=0.05, seed=12)
    f = forecast_hour_of_week(history, future_index[0], len(future_index), quantile=0.9)
    assert f.period_hours == 168
    assert f.point.index.equals(future_index)
    truth = _weekly_truth(future_index)
    # Smoothing over ~3 effective weeks of 5 % noise: a few % from the truth.
    assert np.mean(np.abs(f.point.to_numpy() / truth - 1)) < 0.04
    covered = (held_out >= f.low) & (held_out <= f.high)
    assert 0.82 <= covered.mean() <= 0.97
    assert (f.low <= f.point).all() and (f.point <= f.high).all() and (f.low >= 0).all()


def test_band_widens_with_the_quantile() -> None:
    history = _noisy(hourly_index(START, 24 * 7 * 6), sigma=0.05, seed=2)
    at = START + pd.Timedelta(weeks=6)
    narrow = forecast_hour_of_week(history, at, 48, quantile=0.5)
    wide = forecast_hour_of_week(history, at, 48, quantile=0.95)
    assert ((wide.high - wide.low) > (narrow.high - narrow.low)).all()
    pd.testing.assert_series_equal(narrow.point, wide.point)


def test_smoothing_recalibrates_after_a_level_shift() -> None:
    index = hourly_index(START, 24 * 7 * 10)
    level = np.where(np.arange(len(index)) < 24 * 7 * 6, 100.0, 120.0)  # +20 % in week 7
    history = pd.Series(level, index=index)
    at = START + pd.Timedelta(weeks=10)
    fast = forecast_hour_of_week(history, at, 24, smoothing=0.5).point.mean()
    slow = forecast_hour_of_week(history, at, 24, smoothing=0.1).point.mean()
    # Four weeks at the new level: weight 1 - (1 - a)^4 on it (bias-corrected EWMA
    # puts at least that much there).
    assert fast >= 100 + 20 * (1 - 0.5**4) - 1e-9
    assert slow < fast <= 120


def test_short_history_falls_back_to_hour_of_day() -> None:
    index = hourly_index(START, 24 * 4)  # Monday to Thursday
    hod = index.hour.to_numpy()
    history = pd.Series(50.0 + hod, index=index)
    f = forecast_hour_of_week(history, index[-1] + pd.Timedelta(hours=1), 24)
    assert f.period_hours == 24
    np.testing.assert_allclose(f.point.to_numpy(), 50.0 + np.arange(24))


def test_hours_never_seen_take_the_mean() -> None:
    index = hourly_index(START, 6)
    f = forecast_hour_of_week(pd.Series([1.0, 2, 3, 4, 5, 6], index=index), index[-1], 3)
    assert f.point.tolist() == [6.0, 3.5, 3.5]


def test_naive_history_is_taken_as_utc() -> None:
    index = hourly_index(START, 48)
    aware = pd.Series(np.arange(48.0) % 24, index=index)
    naive = aware.copy()
    naive.index = index.tz_localize(None)
    at = START + pd.Timedelta(hours=48)
    pd.testing.assert_series_equal(
        forecast_hour_of_week(aware, at, 24).point, forecast_hour_of_week(naive, at, 24).point
    )


def test_forecast_rejects_nonsense() -> None:
    index = hourly_index(START, 24)
    with pytest.raises(InputError, match="at least one hourly value"):
        forecast_hour_of_week(pd.Series([np.nan] * 24, index=index), START, 24)
    with pytest.raises(ValueError, match="smoothing"):
        forecast_hour_of_week(pd.Series(1.0, index=index), START, 24, smoothing=0)
    with pytest.raises(ValueError, match="quantile"):
        forecast_hour_of_week(pd.Series(1.0, index=index), START, 24, quantile=1.0)


def test_demand_set_forecast_uses_only_the_past(fleet: WorkloadSet) -> None:
    d = DemandSet.from_shapes(fleet, START, 24 * 7 * 5, seed=4)
    at = START + pd.Timedelta(weeks=4)
    via_set = d.forecast(at, 24)["chat-api"]
    direct = forecast_hour_of_week(d.series("chat-api").iloc[: 24 * 7 * 4], at, 24)
    pd.testing.assert_series_equal(via_set.point, direct.point)
