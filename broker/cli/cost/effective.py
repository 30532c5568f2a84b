"""``spotfolio cost effective``: the effective $ per productive unit-hour of a
spot run and its saving against on-demand (``policies.effective_cost``).

Owns: the command (its options come from ``broker.cli.cost.options``), its
table and its JSON (``spotfolio.cost.effective/1``, schema in
``broker.cli.cost``). Must not: compute any cost itself.
"""

from __future__ import annotations

from dataclasses import asdict

import click

from broker.cli._output import emit_json
from broker.cli.cost.options import RunOptions, build_run, run_options
from broker.cli.cost.output import fmt_num, fmt_usd, print_table, with_exact

__all__ = ["effective"]


@click.command("effective")
@run_options
def effective(opts: RunOptions) -> None:
    """Effective $ per productive unit-hour of a spot run, and the saving vs on-demand."""
    # lazy: policies pulls pydantic; ``spotfolio --help`` imports this module
    from policies.effective_cost import effective_cost

    b = effective_cost(build_run(opts))
    if opts.as_json:
        fields: dict[str, object] = asdict(b)
        fields["convention"] = b.convention.value
        emit_json(with_exact("spotfolio.cost.effective/1", fields))
        return
    verdict = "spot pays" if b.spot_worth_it else "on-demand is cheaper (hidden premium)"
    print_table(
        f"Effective spot cost ({b.convention.value} convention)",
        [
            ("productive hours", fmt_num(b.base_hours, " h")),
            ("checkpoint hours", fmt_num(b.checkpoint_hours, " h")),
            ("lost work hours", fmt_num(b.lost_work_hours, " h")),
            ("restart hours", fmt_num(b.restart_hours, " h")),
            ("total hours", f"{fmt_num(b.total_hours, ' h')} (+{b.calendar_stretch:.1%} calendar)"),
            ("interruptions expected", fmt_num(b.interruptions_expected)),
            ("cost per interruption", fmt_usd(b.usd_per_interruption)),
            ("spot total", fmt_usd(b.spot_total_usd)),
            ("on-demand total", fmt_usd(b.on_demand_total_usd)),
            ("saving", f"{fmt_usd(b.saving_usd)} ({b.saving_fraction:.1%})"),
            ("effective price", f"${b.effective_usd_per_unit_hour:.4f} per unit-hour"),
            ("verdict", verdict),
        ],
    )
