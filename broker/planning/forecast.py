"""Serving demand forecasts: an hour-of-week profile with a quantile band.

Owns: ``Forecast`` and ``forecast_hour_of_week`` (plus the hourly UTC index
helper every demand series shares). Plans are made on the forecast and billed
on the actual demand; this module only forecasts.

Must not: read files (``broker.planning.demand``), know workloads or prices, or read
the clock (the caller says where the forecast starts).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np
import pandas as pd

from markets.clock import ensure_utc
from markets.errors import InputError

__all__ = ["DAY_HOURS", "HOUR", "WEEK_HOURS", "Forecast", "forecast_hour_of_week", "hourly_index"]

HOUR = pd.Timedelta(hours=1)
WEEK_HOURS = 168
DAY_HOURS = 24


def hourly_index(start: datetime | pd.Timestamp, hours: int) -> pd.DatetimeIndex:
    """``hours`` UTC hours from ``start`` (a whole hour; naive means UTC), named ``hour``."""
    begin = pd.Timestamp(ensure_utc(pd.Timestamp(start).to_pydatetime()))
    if begin != begin.floor("h"):
        raise ValueError(f"start {begin} is not on a whole hour")
    return pd.date_range(begin, periods=hours, freq="h", name="hour")


@dataclass(frozen=True, eq=False)
class Forecast:
    """Point forecast and a central band holding ``quantile`` of outcomes.

    ``low``/``high`` are the (1 - q)/2 and (1 + q)/2 quantiles of past forecast
    errors around ``point``. ``period_hours`` is 168 (hour of week) or 24 (hour
    of day, when history is shorter than a week).
    """

    point: pd.Series
    low: pd.Series
    high: pd.Series
    quantile: float
    period_hours: int


def forecast_hour_of_week(
    history: pd.Series,
    start: datetime | pd.Timestamp,
    hours: int,
    smoothing: float = 0.3,
    quantile: float = 0.9,
) -> Forecast:
    """Forecast hourly demand from ``start`` for ``hours`` from hourly ``history``.

    The profile is one level per hour of the week (``dayofweek * 24 + hour``),
    exponentially smoothed across weeks (``smoothing`` is the weight of the
    newest week, so a level shift is absorbed over ~1/smoothing weeks). With
    less than a week of history the period is the hour of the day; hours never
    seen take the mean of what was seen. The band comes from the errors the
    profile as known *before* each period made (relative errors when the
    profile is positive, so peaks get wider bands than troughs); with a single
    period of history, from in-sample errors.
    """
    if not 0.0 < smoothing <= 1.0:
        raise ValueError(f"smoothing must be in (0, 1], got {smoothing}")
    if not 0.0 < quantile < 1.0:
        raise ValueError(f"quantile must be in (0, 1), got {quantile}")
    hist = history.dropna().astype(float)
    if hist.empty:
        raise InputError("demand history", None, "at least one hourly value to forecast from")
    idx = pd.DatetimeIndex(hist.index)
    idx = idx.tz_localize("UTC") if idx.tz is None else idx.tz_convert("UTC")
    span_hours = (idx[-1] - idx[0]) / HOUR + 1
    period = WEEK_HOURS if span_hours >= WEEK_HOURS else DAY_HOURS

    keys = _period_key(idx, period)
    # Period number counted from the period start at or before the first hour.
    origin = idx[0].floor("D") - pd.Timedelta(
        days=idx[0].day_of_week if period == WEEK_HOURS else 0
    )
    cycle = ((idx - origin) // HOUR) // period
    # Every cycle from the first to the last, so row position = cycle - first.
    rows = range(int(cycle.min()), int(cycle.max()) + 1)
    grid = _cycle_grid(np.asarray(cycle - cycle.min()), keys, hist.to_numpy(), len(rows), period)
    levels = pd.DataFrame(_ewm_mean(grid, smoothing), index=rows, columns=range(period)).ffill()
    profile = levels.iloc[-1].fillna(float(hist.mean())).to_numpy()

    # Errors of the forecast each cycle would have had from earlier cycles only.
    prior = levels.shift(1)
    fitted = prior.to_numpy()[cycle - cycle.min(), keys]
    if np.isfinite(fitted).sum() < DAY_HOURS:  # one cycle of history: in-sample errors
        fitted = profile[keys]
    actual = hist.to_numpy()
    ok = np.isfinite(fitted)
    relative = bool((profile > 0).all() and (fitted[ok] > 0).all())
    errors = (actual[ok] / fitted[ok] - 1.0) if relative else (actual[ok] - fitted[ok])
    lo_q, hi_q = np.quantile(errors, [(1 - quantile) / 2, (1 + quantile) / 2])

    out_index = hourly_index(start, hours)
    point = profile[_period_key(out_index, period)]
    if relative:
        low, high = point * (1 + lo_q), point * (1 + hi_q)
    else:
        low, high = point + lo_q, point + hi_q
    name = history.name

    def series(values: np.ndarray) -> pd.Series:
        return pd.Series(np.clip(values, 0.0, None), index=out_index, name=name, dtype=float)

    return Forecast(series(point), series(low), series(high), quantile, period)


def _cycle_grid(
    row: np.ndarray, key: np.ndarray, values: np.ndarray, cycles: int, period: int
) -> np.ndarray:
    """Cycles x period keys, the mean of each cell's values (NaN where none):
    what ``pivot_table(aggfunc="mean")`` reindexed to every cycle and key
    gives, without its cost (a re-plan every 6 hours of a year's what-if
    forecasts from up to 9,000 hours of history; the pivot was ~40 % of each
    forecast). An hourly series has one value per cell, its own mean exactly;
    a cell with more (a repeated hour) takes pandas' mean, to the bit."""
    flat = row * period + key
    counts = np.bincount(flat, minlength=cycles * period)
    if counts.max(initial=0) > 1:
        table = pd.DataFrame({"cycle": row, "key": key, "v": values})
        piv = table.pivot_table(index="cycle", columns="key", values="v", aggfunc="mean")
        return piv.reindex(index=range(cycles), columns=range(period)).to_numpy(dtype=float)
    grid = np.full(cycles * period, np.nan)
    grid[flat] = values
    return grid.reshape(cycles, period)


def _ewm_mean(grid: np.ndarray, alpha: float) -> np.ndarray:
    """Each column's ``Series.ewm(alpha=alpha, ignore_na=True).mean()``
    (adjusted weights), all columns at once, by pandas' own recurrence and
    float operations (``pandas._libs.window.aggregations.ewm``: alpha via
    the centre of mass, ``old_wt`` decayed and the mean re-weighted only at
    an observation, a value equal to the mean left as it is), so the result
    is pandas' to the bit (``tests/unit/broker/planning/test_forecast_ewm.py``
    compares them); pandas runs one column at a time, 168 of them."""
    com = 1.0 / alpha - 1.0  # pandas keeps the centre of mass, and goes back
    old_wt_factor = 1.0 - 1.0 / (1.0 + com)
    new_wt = 1.0
    out = np.empty_like(grid)
    if not len(grid):
        return out
    weighted = grid[0].copy()
    old_wt = np.ones(grid.shape[1])
    out[0] = weighted
    with np.errstate(invalid="ignore"):
        for i in range(1, len(grid)):
            cur = grid[i]
            seen = ~np.isnan(cur)
            update = seen & ~np.isnan(weighted)
            old_wt = np.where(update, old_wt * old_wt_factor, old_wt)
            mixed = (old_wt * weighted + new_wt * cur) / (old_wt + new_wt)
            weighted = np.where(update & (weighted != cur), mixed, weighted)
            old_wt = np.where(update, old_wt + new_wt, old_wt)
            weighted = np.where(seen & np.isnan(weighted), cur, weighted)
            out[i] = weighted
    return out


def _period_key(index: pd.DatetimeIndex, period: int) -> np.ndarray:
    hod = index.hour.to_numpy()
    if period == WEEK_HOURS:
        return np.asarray(index.day_of_week.to_numpy() * DAY_HOURS + hod, dtype=np.int64)
    return np.asarray(hod, dtype=np.int64)
