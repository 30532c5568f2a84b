"""Workloads inferred from a golden bill's shape (``broker.cli._usage``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.cli._usage import usage_inputs
from markets.registry import open_market
from tests.fakes.bills import write_focus_bill


def test_always_on_is_serving_a_spot_burst_training_the_night_batch(tmp_path: Path) -> None:
    write_focus_bill(tmp_path / "f.csv", days=14)
    src = open_market("default")
    got = usage_inputs(tmp_path / "f.csv", None, src.instance_types(), None, days=7)
    by = {i.name: i for i in got.inferences}
    assert {n: i.workload_class for n, i in by.items()} == {
        "web": "serving", "finetune": "training", "nightly": "batch"}  # fmt: skip
    assert all(i.regions == ("us-east-1",) and i.providers == ("aws",) for i in by.values())
    ft = by["finetune"]
    assert ft.spot_share == pytest.approx(1.0) and ft.peak_units == 32  # 4 x p4d (8 GPUs)
    # the work is the burst's unit-hours in the replayed week (its last 7 days)
    ih = got.usage.instance_hours("finetune", "p4d.24xlarge")
    assert ih[: 7 * 24].sum() == 0 and ih[7 * 24 :].sum() == 6 * 24 * 4
    per = got.unit_hours["finetune"] / ih.sum()
    assert ft.unit_hours == pytest.approx(6 * 24 * 4 * per)
    assert ft.deadline_hours is not None and ft.deadline_hours <= 7 * 24
    assert by["nightly"].recurring and by["nightly"].deadline_hours == 7 * 24
    ws = {w.name: w for w in got.workloads.workloads}
    assert ws["finetune"].unit_hours == pytest.approx(ft.unit_hours)
    assert ws["web"].regions == ["us-east-1"]
    assert set(got.demand.serving) == {"web"}  # jobs are no serving curve


def test_a_burst_is_released_at_its_first_hour_and_serving_keeps_off_spot(
    tmp_path: Path,
) -> None:
    write_focus_bill(tmp_path / "f.csv", days=14)
    src = open_market("default")
    got = usage_inputs(tmp_path / "f.csv", None, src.instance_types(), None, days=7)
    by = {i.name: i for i in got.inferences}
    ih = got.usage.instance_hours("finetune", "p4d.24xlarge")[7 * 24 :]  # the replayed week
    first = int(next(h for h, v in enumerate(ih) if v > 0))
    ft = by["finetune"]
    assert ft.release_hours == first > 0  # the burst starts inside the week, not at its start
    assert ft.deadline_hours is not None and ft.deadline_hours > ft.release_hours
    assert "from hour" in ft.line() and ft.to_dict()["release_hours"] == first
    ws = {w.name: w for w in got.workloads.workloads}
    assert ws["finetune"].release_hours == first
    assert ws["nightly"].release_hours == 0.0  # recurring: its work is there all window
    # the bill never ran web on spot: it is planned without spot
    assert by["web"].spot_share == 0.0 and ws["web"].max_spot_share == 0.0
    assert "never on spot" in by["web"].why
