"""``spotfolio cost breakeven``: the spot price, interruption rate and
checkpoint intervals at which spot costs what on-demand does
(``policies.breakeven``).

Owns: the command (its options come from ``broker.cli.cost.options``), its
table and its JSON (``spotfolio.cost.breakeven/1``, schema in
``broker.cli.cost``). Must not: compute any cost itself.
"""

from __future__ import annotations

import click

from broker.cli._output import emit_json
from broker.cli.cost.options import RunOptions, build_run, run_options
from broker.cli.cost.output import fmt_num, print_table, round_field, with_exact
from markets.errors import SpotNeverFinishesError

__all__ = ["breakeven"]


@click.command("breakeven")
@run_options
def breakeven(opts: RunOptions) -> None:
    """Spot price, interruption rate and checkpoint intervals at which spot = on-demand."""
    # lazy: policies pulls pydantic; ``spotfolio --help`` imports this module
    from policies.breakeven import (
        breakeven_checkpoint_window,
        breakeven_interruption_rate,
        breakeven_spot_price,
        price_ratio,
    )
    from policies.effective_cost import effective_cost

    run = build_run(opts)
    try:
        price: float | None = breakeven_spot_price(run)
        worth = effective_cost(run).spot_worth_it
    except SpotNeverFinishesError:
        price, worth = None, False
    rate = breakeven_interruption_rate(run)
    status, window = "not_computed", None
    if run.checkpoint_write_hours is not None:
        w = breakeven_checkpoint_window(run)
        status = "never_pays" if w is None else "window"
        if w is not None:
            window = {
                "min_interval_hours": w.min_interval_hours,
                "max_interval_hours": w.max_interval_hours,
                "min_interval_s": w.min_interval_s,
                "max_interval_s": w.max_interval_s,
            }
    od = run.on_demand_usd_per_unit_hour
    fields: dict[str, object] = {
        "convention": rate.convention.value,
        "price_ratio": price_ratio(run),
        "spot_finishes": price is not None,
        "spot_worth_it": worth,
        "breakeven_spot_usd_per_unit_hour": price,
        "breakeven_discount": None if price is None else 1.0 - price / od,
        "breakeven_interruptions_per_hour": rate.interruptions_per_hour,
        "breakeven_interruptions_per_day": rate.interruptions_per_day,
        "breakeven_mean_minutes_between": rate.mean_minutes_between,
        "checkpoint_window_status": status,
    }
    if opts.as_json:
        rounded = None if window is None else {k: round_field(k, v) for k, v in window.items()}
        emit_json(with_exact("spotfolio.cost.breakeven/1", fields, {"checkpoint_window": rounded}))
        return
    per = "productive" if rate.convention.value == "productive" else "wall-clock"
    rows = [
        ("break-even spot price", "never finishes" if price is None else f"${price:.4f}"),
        ("break-even discount", "-" if price is None else f"{1 - price / od:.1%}"),
        (
            f"break-even rate ({per})",
            f"{fmt_num(rate.interruptions_per_day, ' / day')} "
            f"(one every {fmt_num(rate.mean_minutes_between, ' min', ',.1f')})",
        ),
    ]
    if window is not None:
        rows.append(("checkpoint at least every", fmt_num(window["min_interval_s"], " s", ",.1f")))
        rows.append(("checkpoint at most every", fmt_num(window["max_interval_hours"], " h")))
    elif status == "never_pays":
        rows.append(("checkpoint interval", "no interval makes spot pay"))
    print_table("Spot break-even", rows)
