"""Reserved-ahead capacity: a fixed count of one type, for a fixed window, at a fixed price.

Owns: ``BlockKind`` (AWS Capacity Block for ML, AWS On-Demand Capacity
Reservation, GCP future reservation / DWS calendar mode), ``CapacityBlock``
(one offering, or one block the account holds), the AWS Capacity Block
rules the offerings keep to (``check_aws_block_hours``) and the blocks file
a what-if reads (``BlockFile``, ``load_blocks``: one line naming the field).

Must not: call a cloud (``markets.aws.blocks`` reads the offerings) or decide
whether a block is worth buying (``policies.blocks`` does).

A block's price is paid whether its instances run or not: ``upfront_usd`` for
a Capacity Block (charged at purchase), ``hourly_usd`` per instance-hour of
the window for a reservation billed as it runs (an ODCR bills at the
on-demand rate while it is active). A held block (``held``) is a sunk cost:
the planner uses it first and prices it at zero.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from markets.errors import InputError
from markets.model import Provider
from markets.validation import input_error_from, read_json, read_yaml

__all__ = [
    "AWS_BLOCK_MAX_AHEAD_DAYS",
    "AWS_BLOCK_MAX_INSTANCES",
    "MAX_BLOCK_FILE_BYTES",
    "BlockFile",
    "BlockKind",
    "CapacityBlock",
    "check_aws_block_hours",
    "load_blocks",
    "parse_blocks",
]

# "Capacity Blocks for ML" (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/
# ec2-capacity-blocks.html, capacity-blocks-purchase.html): durations in 1-day
# steps up to 14 days, then 7-day steps up to 182 days; up to 64 instances in
# one block; the start may be up to 8 weeks ahead; the price is paid up front.
_DAY = 24
AWS_BLOCK_MAX_INSTANCES = 64
AWS_BLOCK_MAX_AHEAD_DAYS = 56
MAX_BLOCK_FILE_BYTES = 1_000_000


class BlockKind(StrEnum):
    """Which reserved-ahead product a block is."""

    AWS_CAPACITY_BLOCK = "aws_capacity_block"
    AWS_ODCR = "aws_odcr"
    GCP_FUTURE_RESERVATION = "gcp_future_reservation"


def check_aws_block_hours(hours: int) -> bool:
    """Whether ``hours`` is a Capacity Block duration AWS sells (24..336 in
    24-hour steps, then 168-hour steps up to 4,368)."""
    if hours <= 0 or hours % _DAY:
        return False
    days = hours // _DAY
    return days <= 14 or (days % 7 == 0 and days <= 182)


class CapacityBlock(BaseModel):
    """``count`` instances of ``instance_type`` in ``zone`` from ``start`` to ``end``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: BlockKind
    provider: Provider
    block_id: str = Field(min_length=1, max_length=128)
    instance_type: str = Field(min_length=1, max_length=64)
    region: str = Field(min_length=1)
    zone: str = Field(min_length=1)
    count: int = Field(ge=1, le=10_000)
    start: datetime
    end: datetime
    upfront_usd: float = Field(default=0.0, ge=0.0, allow_inf_nan=False)
    hourly_usd: float = Field(default=0.0, ge=0.0, allow_inf_nan=False)
    held: bool = False

    @model_validator(mode="after")
    def _window(self) -> CapacityBlock:
        if self.start.tzinfo is None or self.end.tzinfo is None:
            raise ValueError("start and end must carry a time zone")
        if self.end <= self.start:
            raise ValueError("end must be after start")
        return self

    @property
    def hours(self) -> float:
        """The window's length in hours."""
        return (self.end - self.start).total_seconds() / 3600.0

    @property
    def cost_usd(self) -> float:
        """What the block costs the account from now on (0 once held)."""
        if self.held:
            return 0.0
        return self.upfront_usd + self.hourly_usd * self.count * self.hours


class BlockFile(BaseModel):
    """A blocks file: offerings the plan may buy and blocks the account holds
    (``held: true``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    blocks: list[CapacityBlock] = Field(max_length=10_000)


def parse_blocks(data: object, source: str) -> tuple[CapacityBlock, ...]:
    """Blocks from parsed data (a mapping with a ``blocks`` list, or the list);
    an AWS Capacity Block offering keeps to AWS's durations and size."""
    if isinstance(data, list):
        data = {"blocks": data}
    try:
        doc = BlockFile.model_validate(data)
    except ValidationError as e:
        raise input_error_from(source, e) from e
    seen: set[str] = set()
    for i, b in enumerate(doc.blocks):
        where = f"blocks[{i}]"
        if b.block_id in seen:
            raise InputError(source, f"{where}.block_id", "each block listed once",
                             got=b.block_id)  # fmt: skip
        seen.add(b.block_id)
        if b.kind is BlockKind.AWS_CAPACITY_BLOCK and not b.held:
            hours = b.hours
            if hours != int(hours) or not check_aws_block_hours(int(hours)):
                what = "a Capacity Block of 1 to 14 days, or 7-day steps to 182, after start"
                raise InputError(source, f"{where}.end", what, got=f"{hours:g} h")
            if b.count > AWS_BLOCK_MAX_INSTANCES:
                most = f"at most {AWS_BLOCK_MAX_INSTANCES} instances"
                raise InputError(source, f"{where}.count", most, got=b.count)
        if (b.kind is BlockKind.GCP_FUTURE_RESERVATION) != (b.provider is Provider.GCP):
            raise InputError(source, f"{where}.provider", f"the provider of a {b.kind.value}",
                             got=b.provider.value)  # fmt: skip
    return tuple(doc.blocks)


def load_blocks(path: str | Path) -> tuple[CapacityBlock, ...]:
    """Read a blocks file (``.json``: JSON, else YAML)::

    blocks:
      - {kind: aws_capacity_block, provider: aws, block_id: cb-0a1,
         instance_type: p5.48xlarge, region: us-east-1, zone: us-east-1a, count: 2,
         start: "2026-12-07T23:30:00Z", end: "2026-12-16T23:30:00Z", upfront_usd: 13592.45}
    """
    p = Path(path)
    source = str(path)
    try:
        if p.stat().st_size > MAX_BLOCK_FILE_BYTES:
            raise InputError(source, None, f"a file under {MAX_BLOCK_FILE_BYTES} bytes")
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(source, None, "a readable UTF-8 file", got=type(e).__name__) from e
    data = read_json(text, source) if p.suffix.lower() == ".json" else read_yaml(text, source)
    return parse_blocks(data, source)
