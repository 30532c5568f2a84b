"""``spotfolio cost ...``: the economics calculators (effective, breakeven,
checkpoint, reserve). Thin wrappers over ``policies``; no economics here."""

from __future__ import annotations

import click


@click.group(
    name="cost",
    help="Economics calculators: effective spot cost, break-even, "
    "checkpoint interval, reservations.",
)
def group() -> None:
    pass
