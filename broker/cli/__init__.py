"""The ``spotfolio`` command line: the composition root of the CLI.

Owns: the top-level click group, one sub-group per concern (each in its own
module of this package), and the error contract: a bad option, file or field
prints one line naming it and what was expected, and exits 2; an explainable
failure (infeasible plan, spot never finishes) exits 3; a cloud, credential or
runtime failure (any other ``SpotfolioError``) exits 1 with one line; anything
else is a bug and keeps its traceback (exit 1). The README's "Exit codes"
table says the same. Every line printed here passes through
``markets.redaction.redact`` (a store URL's password never reaches a terminal
or a log collector).

Sub-modules import heavy libraries (pandas, pulp, SDKs) inside their commands
so that ``spotfolio --help`` and ``spotfolio whatif`` start fast.
"""

from __future__ import annotations

import importlib.metadata
import signal
import sys
import threading
import traceback
from types import TracebackType

import click

from broker.cli import _logcontext, bench, cost, daemon, db, market
from broker.cli.sweep import sweep_command
from broker.cli.whatif import plan_command, whatif_command
from markets.errors import ExplainableError, InputError, SpotfolioError
from markets.redaction import redact

__all__ = ["EXIT_EXPLAIN", "EXIT_INPUT", "cli", "main", "redacted_excepthook"]

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
cli.add_command(db.group)
cli.add_command(sweep_command)


def redacted_excepthook(
    kind: type[BaseException], value: BaseException, tb: TracebackType | None
) -> None:
    """A bug keeps its traceback, redacted like every other line we print."""
    sys.stderr.write(redact("".join(traceback.format_exception(kind, value, tb))))


def _terminate_as_exit() -> None:
    """SIGTERM unwinds like Ctrl-C instead of ending the process on the spot,
    so a solve kills its CBC child and a half-written output is removed
    (``broker.planning.optimizer.children``, ``broker.atomic``). The daemon
    sets its own handler when it starts its scheduler."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _exit_on_term)


def _exit_on_term(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code (and exits with it when run as a script)."""
    if argv is None:  # the process is ours: its last words go through the rule too
        sys.excepthook = redacted_excepthook
        _terminate_as_exit()
    _logcontext.reset()

    def say(prefix: str, message: str, event: str, exit_code: int) -> None:
        # one line, whatever a parser or a file put in the message
        line = _logcontext.error_line(
            prefix, " ".join(message.split()), event=event, exit_code=exit_code
        )
        click.echo(redact(line), err=True)

    try:
        rv = cli.main(args=argv, prog_name="spotfolio", standalone_mode=False)
        code = rv if isinstance(rv, int) else 0
    except click.exceptions.Exit as e:
        code = e.exit_code
    except click.exceptions.Abort:
        say("spotfolio", "aborted", "aborted", 1)
        code = 1
    except click.exceptions.NoArgsIsHelpError as e:
        click.echo(e.ctx.get_help() if e.ctx else "")
        code = 0
    except click.UsageError as e:
        # click names the option and what it expects; keep it to one line.
        say("spotfolio: error", e.format_message(), "input_error", EXIT_INPUT)
        code = EXIT_INPUT
    except click.ClickException as e:
        say("spotfolio: error", e.format_message(), "input_error", EXIT_INPUT)
        code = EXIT_INPUT
    except InputError as e:
        say("spotfolio: error", str(e), "input_error", EXIT_INPUT)
        code = EXIT_INPUT
    except ExplainableError as e:
        # the explanation may list its conflicts a line each: kept as text, not in JSON
        if not _logcontext.json_chosen():
            click.echo(redact(f"spotfolio: cannot decide: {e}"), err=True)
        else:
            say("spotfolio: cannot decide", str(e), "cannot_decide", EXIT_EXPLAIN)
        code = EXIT_EXPLAIN
    except SpotfolioError as e:
        say("spotfolio", f"{type(e).__name__}: {e}", "fatal_error", 1)
        code = 1
    if argv is None:
        sys.exit(code)
    return code
