"""``spotfolio cost checkpoint``: Young/Daly checkpoint intervals, their
overhead, and whether a notice-triggered checkpoint fits the provider's
window (``policies.checkpoint``).

Owns: the command (the rate options come from ``broker.cli.cost.options``),
its table and its JSON (``spotfolio.cost.checkpoint/1``, schema in
``broker.cli.cost``). Must not: compute an interval or a time factor itself.
"""

from __future__ import annotations

import math

import click

from broker.cli._numbers import ranged
from broker.cli._output import emit_json
from broker.cli.cost.options import RateOptions, finite, rate_options, resolve_notice
from broker.cli.cost.output import fmt_num, print_table, with_exact
from markets.numbers import MAX_HOURS

__all__ = ["checkpoint"]


@click.command("checkpoint")
@click.option(
    "--checkpoint-write-hours", type=ranged(ge=0, le=MAX_HOURS), required=True, help="delta, hours."
)
@click.option(
    "--checkpoint-interval-hours",
    type=ranged(gt=0, le=MAX_HOURS),
    default=None,
    help="Evaluate this tau instead of Daly's optimum.",
)
@rate_options
def checkpoint(
    opts: RateOptions, checkpoint_write_hours: float, checkpoint_interval_hours: float | None
) -> None:
    """Young/Daly checkpoint intervals, overhead, and the notice-checkpoint check."""
    # lazy: policies pulls pydantic; ``spotfolio --help`` imports this module
    from policies.checkpoint import daly_interval, notice_checkpoint_fits, young_interval
    from policies.effective_cost import HOURS_PER_DAY, RateConvention, time_factor

    delta, tau_in = checkpoint_write_hours, checkpoint_interval_hours
    finite("--checkpoint-write-hours", delta, "hours >= 0")
    finite("--checkpoint-interval-hours", tau_in, "hours > 0", positive=True)
    finite("--interruptions", opts.interruptions, "a count >= 0")
    finite("--restart-hours", opts.restart_hours, "hours >= 0")
    finite("--notice-seconds", opts.notice_seconds, "seconds >= 0")
    finite("--notice-write-seconds", opts.notice_write_seconds, "seconds >= 0")
    conv_name, per = opts.per.split("-")
    conv = RateConvention(conv_name)
    rate = opts.interruptions / (HOURS_PER_DAY if per == "day" else 1.0)
    mtbi = math.inf if rate == 0 else 1.0 / rate
    young, daly = young_interval(delta, mtbi), daly_interval(delta, mtbi)
    tau = daly if tau_in is None else tau_in
    overhead = 0.0 if delta == 0 or math.isinf(tau) else delta / tau
    write_s = opts.notice_write_seconds
    notice = resolve_notice(opts.provider, opts.notice_seconds, write_s)
    fits = None if write_s is None or notice is None else notice_checkpoint_fits(write_s, notice)
    lost = 0.0 if fits else tau / 2.0
    factor = time_factor(overhead, rate, opts.restart_hours + lost, conv)
    fields: dict[str, object] = {
        "convention": conv.value,
        "interruptions_per_hour": rate,
        "mean_hours_between": mtbi,
        "checkpoint_write_hours": delta,
        "young_interval_hours": young,
        "daly_interval_hours": daly,
        "interval_hours": tau,
        "overhead_fraction": overhead,
        "lost_work_per_interruption_hours": lost,
        "time_factor": factor,
        "productive_fraction": 1.0 / factor,
        "notice_seconds": notice,
        "notice_write_seconds": write_s,
        "notice_checkpoint_fits": fits,
    }
    if opts.as_json:
        emit_json(with_exact("spotfolio.cost.checkpoint/1", fields))
        return
    rows = [
        ("mean time between interruptions", fmt_num(mtbi, " h")),
        ("Young interval", fmt_num(young, " h")),
        ("Daly interval", fmt_num(daly, " h")),
        ("interval used", fmt_num(tau, " h")),
        ("checkpoint overhead", f"{overhead:.2%}"),
        ("lost work per interruption", fmt_num(lost, " h")),
        ("productive fraction", f"{1.0 / factor:.2%}"),
    ]
    if fits is not None:
        rows.append(
            ("notice checkpoint fits", f"{'yes' if fits else 'no'} ({write_s:g} s in {notice:g} s)")
        )
    print_table(f"Checkpoint interval ({conv.value} convention)", rows)
