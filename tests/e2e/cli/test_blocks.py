"""``spotfolio whatif --blocks FILE`` on the embedded default market: a bad
file exits 2 on one line naming the file and field, with nothing written; a
good one prices the blocks for the deadline jobs and the advice names what to
reserve and when, with the saving."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from broker.cli import main
from broker.cli.report import render

START = "2026-03-02T00:00:00+00:00"
# A two-node H100 gang (625/3 productive hours a node at 48 units an hour
# for the two) with its deadline on the last day of a 10-day what-if.
POLICIES = """workloads:
  - name: finetune
    class: training
    instance_types: [p5.48xlarge]
    throughput: {p5.48xlarge: 3.0}
    min_units: 16
    max_units: 16
    unit_hours: 10000
    deadline_hours: 240
    min_on_non_revocable: false
"""


def _block(block_id: str, upfront: float, *, start: str = "2026-03-02T12:00:00Z",
           end: str = "2026-03-11T12:00:00Z", count: int = 2, zone: str = "us-east-1a"
           ) -> str:  # fmt: skip
    return (f"  - {{kind: aws_capacity_block, provider: aws, block_id: {block_id}, "
            f"instance_type: p5.48xlarge, region: us-east-1, zone: {zone}, "
            f"count: {count}, start: '{start}', end: '{end}', "
            f"upfront_usd: {upfront}}}\n")  # fmt: skip


@pytest.mark.parametrize(
    "row,field",
    [
        (_block("cb-1", 100.0, end="2026-03-02T18:00:00Z"), "blocks[0].end"),  # 6 h: not sold
        (_block("cb-1", 100.0, count=65), "blocks[0].count"),
        (_block("cb-1", -1.0), "blocks[0].upfront_usd"),
        (_block("cb-1", 1.0) + _block("cb-1", 2.0), "blocks[1].block_id"),
    ],
)
def test_a_bad_blocks_file_exits_2_naming_file_and_field(
    row: str, field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "blocks.yaml"
    f.write_text("blocks:\n" + row)
    out = tmp_path / "out.json"
    assert main(["whatif", "--days", "1", "--blocks", str(f), "--format", "json",
                 "--out", str(out)]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert str(f) in err and field in err and len(err.splitlines()) == 1
    assert not out.exists()


@pytest.mark.slow
def test_whatif_prices_the_blocks_and_names_what_to_reserve(tmp_path: Path) -> None:
    (tmp_path / "w.yaml").write_text(POLICIES)
    f = tmp_path / "blocks.yaml"
    # a cheap 9-day block that fits, and a dear one: only the cheap one pays; the
    # default market has no p5.48xlarge in us-east-1b: no job can run in that one
    f.write_text("blocks:\n" + _block("cb-cheap", 2_000.0) + _block("cb-dear", 500_000.0)
                 + _block("cb-nowhere", 1.0, zone="us-east-1b"))  # fmt: skip
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main(["whatif", "--json", "--days", "10", "--scenarios", "0", "--start", START,
                     "--policies", str(tmp_path / "w.yaml"), "--blocks", str(f)]) == 0  # fmt: skip
    full: dict[str, Any] = json.loads(buf.getvalue())
    doc: dict[str, Any] = full["blocks"]
    assert doc["chosen"] == ["cb-cheap"] and doc["unusable"] == ["cb-nowhere"]
    assert doc["blocks_usd"] == 2_000.0
    assert doc["saving_usd"] == pytest.approx(doc["without_blocks_usd"] - doc["with_blocks_usd"],
                                              abs=0.011)  # fmt: skip
    assert doc["saving_usd"] > 0
    assert doc["advice"][0].startswith("cb-nowhere: no deadline job can run in it")
    first = doc["advice"][1]
    assert first.startswith("reserve aws_capacity_block cb-cheap: 2 x p5.48xlarge in us-east-1a")
    assert "from 2026-03-02 12:00 UTC for 216 h, $2,000.00 upfront" in first
    assert f"save ${doc['saving_usd']:,.2f}" in doc["advice"][-1]
    text = render("text", full, 200)  # the text report has the section and its advice
    assert "Reserved-ahead blocks for the deadline jobs" in text and first in text
