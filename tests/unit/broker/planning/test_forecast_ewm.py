"""The forecast's grid and smoothing are pandas' to the bit
(broker.planning.forecast: ``_cycle_grid``, ``_ewm_mean``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from broker.planning.forecast import _cycle_grid, _ewm_mean


@pytest.mark.parametrize("alpha", [0.3, 0.1, 0.5, 1.0, 0.77])
@pytest.mark.parametrize("nan_share", [0.0, 0.2, 0.7])
def test_ewm_mean_is_pandas_bit_for_bit(alpha: float, nan_share: float) -> None:
    rng = np.random.default_rng(3)
    grid = rng.gamma(2.0, 50.0, size=(60, 168))
    grid[rng.random(grid.shape) < nan_share] = np.nan
    grid[:3, :5] = np.nan  # columns that start late
    grid[10:14, 7] = grid[9, 7]  # a constant stretch (pandas keeps the mean as it is)
    want = pd.DataFrame(grid).ewm(alpha=alpha, ignore_na=True).mean().to_numpy()
    assert np.array_equal(_ewm_mean(grid, alpha), want, equal_nan=True)


def test_ewm_mean_of_no_rows_is_empty() -> None:
    assert _ewm_mean(np.empty((0, 24)), 0.3).shape == (0, 24)


def test_cycle_grid_is_the_pivot_reindexed_and_means_repeated_cells() -> None:
    rng = np.random.default_rng(5)
    row = np.repeat(np.arange(4), 24)
    key = np.tile(np.arange(24), 4)
    keep = rng.random(len(row)) > 0.3
    row, key = row[keep], key[keep]
    values = rng.normal(100.0, 10.0, len(row))
    for r, k, v in [(row, key, values), (np.r_[row, 1], np.r_[key, 2], np.r_[values, 7.0])]:
        table = pd.DataFrame({"cycle": r, "key": k, "v": v})
        piv = table.pivot_table(index="cycle", columns="key", values="v", aggfunc="mean")
        want = piv.reindex(index=range(5), columns=range(24)).to_numpy(dtype=float)
        assert np.array_equal(_cycle_grid(r, k, v, 5, 24), want, equal_nan=True)
