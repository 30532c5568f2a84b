"""The bench's ``markets`` block: how well the market signals predict.

Owns: ``run(data, windows, seed)`` -> ``{"calibration": ...}``, the hazard
calibration (``markets.hazard.holdout``) on the bench's traces: with
``--data``, every recorded trace with its pool's prior as the replay market
gives it (the advisor bucket's, else the assumed one); on the default market,
its generated availability traces with the assumed prior. ``windows`` and
``seed`` do not change it (the measurement uses every trace whole).

A composition root (tests/contract/test_layers.py): it opens the traces the
CLI loaded into a calibration and names the replay market to ask it for each
pool's prior. Must not: read files (``BenchData`` carries what was loaded),
or decide anything.
"""

from __future__ import annotations

from typing import TypedDict

import numpy as np

from broker.bench import BenchData
from markets.files.datadir import DataInventory
from markets.hazard.holdout import CalibrationJson, CalibrationTrace, calibrate
from markets.hazard.prior import ASSUMED_PRIOR
from markets.replay.market import ReplayMarket

__all__ = ["MarketsBlock", "calibration_traces", "run"]


class MarketsBlock(TypedDict):
    """``markets`` in ``spotfolio.bench/1``; ``calibration`` is null without traces."""

    calibration: CalibrationJson | None


def calibration_traces(data: BenchData) -> list[CalibrationTrace]:
    """The bench's traces as calibration input (module docstring)."""
    if isinstance(data.inventory, DataInventory) and isinstance(data.market, ReplayMarket):
        _, details = data.market.snapshot_with_details()
        priors = {d.pool_key: d.hazard.prior for d in details}
        return CalibrationTrace.from_spot_traces(data.inventory.spot_traces, priors)
    return [
        CalibrationTrace(tr.name, tr.name, tr.held.astype(np.int64), tr.tick_s, ASSUMED_PRIOR)
        for tr in data.traces
    ]


def run(data: BenchData, windows: int, seed: int) -> MarketsBlock:
    traces = calibration_traces(data)
    return {"calibration": calibrate(traces).to_json() if traces else None}
