"""The ``spotfolio`` command line: the composition root of the CLI.

Owns: the top-level click group, one sub-group per concern (each in its own
module of this package), and the error contract: a bad option, file or field
prints one line naming it and what was expected, and exits 2; an explainable
failure (infeasible plan, spot never finishes) exits 3; anything else is a bug
and keeps its traceback.

Sub-modules import heavy libraries (pandas, pulp, SDKs) inside their commands
so that ``spotfolio --help`` and ``spotfolio whatif`` start fast.
"""

from __future__ import annotations

import importlib.metadata
import sys

import click

from broker.cli import bench, cost, daemon, market
from broker.cli.whatif import plan_command, whatif_command
from markets.errors import ExplainableError, InputError, SpotfolioError

__all__ = ["EXIT_EXPLAIN", "EXIT_INPUT", "cli", "main"]

EXIT_INPUT = 2
EXIT_EXPLAIN = 3


def _version() -> str:
    """The installed distribution's version (package metadata, so it is the
    one pip installed: pyproject.toml's at build time)."""
    try:
        return importlib.metadata.version("spotfolio")
    except importlib.metadata.PackageNotFoundError:  # a source tree on PYTHONPATH, not installed
        return "unknown (not installed)"


@click.group(
    name="spotfolio",
    help="Cost-aware capacity broker for GPU fleets: committed, on-demand and spot.",
)
@click.version_option(
    _version(), "--version", prog_name="spotfolio", message="%(prog)s %(version)s"
)
def cli() -> None:
    pass


cli.add_command(cost.group)
cli.add_command(whatif_command)
cli.add_command(plan_command)
cli.add_command(market.group)
cli.add_command(daemon.daemon_command)
cli.add_command(bench.simulate_command)
cli.add_command(bench.bench_command)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code (and exits with it when run as a script)."""
    try:
        rv = cli.main(args=argv, prog_name="spotfolio", standalone_mode=False)
        code = rv if isinstance(rv, int) else 0
    except click.exceptions.Exit as e:
        code = e.exit_code
    except click.exceptions.Abort:
        click.echo("spotfolio: aborted", err=True)
        code = 1
    except click.exceptions.NoArgsIsHelpError as e:
        click.echo(e.ctx.get_help() if e.ctx else "")
        code = 0
    except click.UsageError as e:
        # click names the option and what it expects; keep it to one line.
        msg = " ".join(e.format_message().split())
        click.echo(f"spotfolio: error: {msg}", err=True)
        code = EXIT_INPUT
    except click.ClickException as e:
        click.echo(f"spotfolio: error: {' '.join(e.format_message().split())}", err=True)
        code = EXIT_INPUT
    except InputError as e:
        click.echo(f"spotfolio: error: {e}", err=True)
        code = EXIT_INPUT
    except ExplainableError as e:
        click.echo(f"spotfolio: cannot decide: {e}", err=True)
        code = EXIT_EXPLAIN
    except SpotfolioError as e:
        click.echo(f"spotfolio: {type(e).__name__}: {e}", err=True)
        code = 1
    if argv is None:
        sys.exit(code)
    return code
