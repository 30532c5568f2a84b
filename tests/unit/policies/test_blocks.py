"""The reserved-ahead choice, golden: the example fine-tune (10,000 A100-GPU-hours,
an H100 three A100s, a two-node gang of p5.48xlarge) with a 10-day deadline.

By hand: each node needs 10,000 / 3 / 16 = 625/3 h. Spot at $12/h with a time
factor of 1.25 costs $15 per productive hour. A 9-day block of 2 x p5.48xlarge
at AWS's $31.464 per instance-hour costs 2 x 216 x 31.464 = $13,592.448.
- Deadline 240 h, spot always there: spot may take (240 - 625/3) / 0.25 =
  380/3 h, on-demand the other 245/3 h: 2 x (380/3 x 15 + 245/3 x 98.32) =
  $19,858.9333... The block wins, saving $6,266.4853...
- Deadline 480 h: all 625/3 h fit on spot: 2 x 625/3 x 15 = $6,250. No block.
- Deadline 240 h, spot there half the time: stretch 2.5, spot 190/9 h,
  on-demand 1685/9 h: 2 x (190/9 x 15 + 1685/9 x 98.32) = $37,449.8222...
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from markets.blocks import BlockKind, CapacityBlock
from markets.model import Provider
from policies.blocks import BlockJob, block_fits, choose_block, spot_then_on_demand

NOW = datetime(2026, 12, 7, 11, 30, tzinfo=UTC)
H = 10_000 / 3 / 16


def _job(deadline: float, availability: float = 1.0) -> BlockJob:
    return BlockJob(
        instance_type="p5.48xlarge",
        nodes=2,
        work_hours=H,
        deadline_hours=deadline,
        spot_usd_per_hour=12.0,
        on_demand_usd_per_hour=98.32,
        spot_time_factor=1.25,
        spot_availability=availability,
    )


def _block(
    start_h: float, days: int = 9, count: int = 2, held: bool = False, bid: str = "cb-0a1"
) -> CapacityBlock:
    start = NOW + timedelta(hours=start_h)
    return CapacityBlock(
        kind=BlockKind.AWS_CAPACITY_BLOCK,
        provider=Provider.AWS,
        block_id=bid,
        instance_type="p5.48xlarge",
        region="us-east-1",
        zone="us-east-1a",
        count=count,
        start=start,
        end=start + timedelta(days=days),
        upfront_usd=count * days * 24 * 31.464,
        held=held,
    )


def test_tight_deadline_picks_the_block() -> None:
    mix = spot_then_on_demand(_job(240))
    assert mix is not None
    assert mix.spot_hours == pytest.approx(380 / 3)
    assert mix.on_demand_hours == pytest.approx(245 / 3)
    assert mix.cost_usd == pytest.approx(2 * (380 / 3 * 15 + 245 / 3 * 98.32))
    choice = choose_block(_job(240), (_block(12),), NOW)
    assert choice.block is not None and choice.block.block_id == "cb-0a1"
    assert choice.block_cost_usd == pytest.approx(13_592.448)
    assert choice.saving_usd == pytest.approx(19_858.933333 - 13_592.448)
    assert choice.advice().startswith("reserve aws_capacity_block cb-0a1: 2 x p5.48xlarge")
    assert "2026-12-07 23:30 UTC for 216 h, $13,592.45 vs $19,858.93" in choice.advice()


def test_loose_deadline_keeps_spot() -> None:
    choice = choose_block(_job(480), (_block(12),), NOW)
    assert choice.block is None
    assert choice.mix is not None and choice.mix.cost_usd == pytest.approx(6_250.0)
    assert choice.mix.on_demand_hours == 0.0
    assert choice.advice().startswith("no block: $6,250.00 on spot + on-demand")


def test_scarce_spot_costs_more_and_the_block_still_wins() -> None:
    mix = spot_then_on_demand(_job(240, availability=0.5))
    assert mix is not None and mix.spot_hours == pytest.approx(190 / 9)
    assert mix.cost_usd == pytest.approx(2 * (190 / 9 * 15 + 1685 / 9 * 98.32))
    assert choose_block(_job(240, availability=0.5), (_block(12),), NOW).block is not None


def test_a_block_that_cannot_finish_in_time_is_not_chosen() -> None:
    late = _block(36)  # 36 + 208.33 h > 240 h
    short = _block(0, days=8)  # 192 h < 208.33 h of work
    small = _block(0, count=1)
    other = _block(0).model_copy(update={"instance_type": "p4d.24xlarge"})
    for b in (late, short, small, other):
        assert not block_fits(_job(240), b, NOW)
    assert choose_block(_job(240), (late, short, small, other), NOW).block is None
    assert block_fits(_job(240), _block(31), NOW)  # 31 + 208.33 <= 240


def test_held_block_is_used_and_cheapest_fitting_block_wins() -> None:
    dear = _block(0, days=10, bid="cb-dear")
    cheap = _block(12, bid="cb-cheap")
    assert choose_block(_job(240), (dear, cheap), NOW).block == cheap
    held = _block(24, bid="cr-held", held=True)
    choice = choose_block(_job(480), (dear, held), NOW)  # spot is $6,250; held costs 0
    assert choice.block == held and choice.block_cost_usd == 0.0
    assert choice.advice().startswith("use held aws_capacity_block cr-held")


def test_no_mix_when_the_deadline_is_shorter_than_the_work() -> None:
    assert spot_then_on_demand(_job(200)) is None
    assert choose_block(_job(200), (_block(0),), NOW).block is None  # the block cannot either


def test_spot_dearer_than_on_demand_is_not_used() -> None:
    job = BlockJob(
        instance_type="p5.48xlarge",
        nodes=1,
        work_hours=10,
        deadline_hours=100,
        spot_usd_per_hour=90.0,
        on_demand_usd_per_hour=98.32,
        spot_time_factor=1.2,
    )
    mix = spot_then_on_demand(job)
    assert mix is not None and mix.spot_hours == 0.0 and mix.cost_usd == pytest.approx(983.2)


@pytest.mark.parametrize(
    "field,value",
    [("nodes", 0), ("work_hours", -1.0), ("spot_time_factor", 0.9), ("spot_availability", 1.5)],
)
def test_bad_job_is_refused(field: str, value: float) -> None:
    args = dict(
        instance_type="p5.48xlarge",
        nodes=1,
        work_hours=1.0,
        deadline_hours=2.0,
        spot_usd_per_hour=1.0,
        on_demand_usd_per_hour=2.0,
    )
    args[field] = value
    with pytest.raises(ValueError, match=field):
        BlockJob(**args)  # type: ignore[arg-type]
