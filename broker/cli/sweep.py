"""``spotfolio sweep GRID.yaml``: a grid of what-if scenarios on Dask, one Parquet row each.

Owns: the command, ``run_scenario`` (one scenario on a worker: the
``spotfolio whatif --json`` command itself, run in the worker's process on
the scenario's arguments, so a row is what that command prints when run
alone) and ``check_option`` (a grid value parsed as ``whatif`` parses its
option). Must not: parse the grid (``broker.scale.grid``), schedule tasks
(``broker.scale.fanout``) or lay out the table (``broker.scale.table``).

``--workers N`` starts a local Dask cluster of N processes (default: the
CPUs); ``--scheduler tcp://host:8786`` uses an existing cluster, whose
workers need spotfolio installed: the grid's files (markets, demands,
policies, owned, usage) ship with each task (``shipped``, ``run_shipped``),
so no worker needs them at the same paths. ``--inputs-url URL`` (a
``file://`` directory every worker sees, or ``s3://bucket/prefix``) instead
publishes them once as one bundle there (``broker.scale.sweep_inputs``) and each
task carries only its location: a worker reads it once (``bundled``,
``run_fetched``).
Scenarios that fail are rows with ``error`` set; the command then exits 1
after writing the file. A bad grid exits 2 before anything runs.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import time
from pathlib import Path

import click

from broker.cli._numbers import ranged
from broker.cli._output import console, emit_json
from broker.cli.progress import progress
from markets.errors import InputError, SpotfolioError
from markets.extras import require

__all__ = [
    "bundled",
    "check_option",
    "run_fetched",
    "run_scenario",
    "run_shipped",
    "shipped",
    "sweep_command",
]


def check_option(option: str, text: str) -> None:
    """Raise ``ValueError`` (what was expected) when ``spotfolio whatif
    --option text`` would be refused."""
    from broker.cli import whatif

    try:
        if option == "committed":  # parsed by the command, not by click
            whatif._levels(text)
        elif option == "start":
            whatif._start(text)
        else:
            whatif.whatif_command.make_context("whatif", [f"--{option}", text])
    except InputError as e:
        raise ValueError(e.expected) from e
    except click.BadParameter as e:  # "expected a whole number >= 1 ..., got '0'"
        what = e.message.removeprefix("expected ").split(", got ")[0]
        raise ValueError(what) from e
    except click.UsageError as e:
        raise ValueError(" ".join(e.format_message().split())) from e


def run_scenario(argv: tuple[str, ...]) -> dict[str, object]:
    """``spotfolio whatif ARGV --json`` in this process: ``{"result": its
    JSON object | None, "error": str | None, "warnings": its stderr,
    "seconds": wall time}``. Errors a user can act on are returned, not
    raised (they would not unpickle on the client: ``broker.scale.fanout``)."""
    import json

    from broker.cli.whatif import whatif_command

    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    result: object = None
    error: str | None = None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            whatif_command.main(
                [*argv, "--json"], prog_name="spotfolio whatif", standalone_mode=False
            )
            result = json.loads(out.getvalue())
        except (SpotfolioError, click.ClickException) as e:
            error = str(e) if isinstance(e, SpotfolioError) else e.format_message()
    return {
        "result": result,
        "error": error,
        "warnings": err.getvalue().strip(),
        "seconds": round(time.perf_counter() - t0, 3),
    }


# What a scenario ships to a worker at most (its files, directories
# included): a larger input belongs in a location every worker reads.
SHIP_MAX_BYTES = 256 * 2**20


def shipped(argv: tuple[str, ...]) -> dict[str, dict[str, bytes]]:
    """The inputs ``argv`` names (``broker.scale.grid.PATH_ARGS``), read here:
    ``{path as written: {path inside it ('' for a file): bytes}}``, so a
    worker need not have them at the same paths."""
    from broker.scale.grid import PATH_ARGS

    out: dict[str, dict[str, bytes]] = {}
    size = 0
    for flag, value in itertools.pairwise(argv):
        p = Path(value)
        if flag not in PATH_ARGS or value in out or not p.exists():
            continue  # a market's registry name (default, aws) is no file
        files = (
            [("", p)]
            if p.is_file()
            else sorted((str(f.relative_to(p)), f) for f in p.rglob("*") if f.is_file())
        )
        size += sum(f.stat().st_size for _, f in files)
        if size > SHIP_MAX_BYTES:
            raise InputError(
                flag,
                None,
                f"inputs of at most {SHIP_MAX_BYTES >> 20} MiB a scenario to ship to the workers",
                got=value,
            )
        out[value] = {rel: f.read_bytes() for rel, f in files}
    return out


def run_shipped(task: tuple[tuple[str, ...], dict[str, dict[str, bytes]]]) -> dict[str, object]:
    """``run_scenario`` on a worker, its inputs (``shipped``) written to a
    scratch directory of its own and the arguments pointed at them; the
    scratch paths in its messages read as the paths written in the grid."""
    import tempfile

    argv, files = task
    if not files:
        return run_scenario(argv)
    with tempfile.TemporaryDirectory(prefix="spotfolio-sweep-") as tmp:
        where: dict[str, str] = {}
        for i, (orig, parts) in enumerate(files.items()):
            base = Path(tmp) / str(i) / Path(orig).name
            for rel, data in parts.items():
                target = base / rel if rel else base
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            where[orig] = str(base)
        return _as_written(run_scenario(tuple(where.get(a, a) for a in argv)), where)


def _as_written(got: dict[str, object], where: dict[str, str]) -> dict[str, object]:
    """The worker's local paths in ``got``'s messages read as the grid's."""
    for key in ("error", "warnings"):
        text = got.get(key)
        if isinstance(text, str):
            for orig, local in where.items():
                text = text.replace(local, orig)
            got[key] = text
    return got


def bundled(argvs: list[tuple[str, ...]]) -> tuple[bytes, dict[str, str]]:
    """Every input the scenarios name (``shipped``) in one bundle
    (``broker.scale.sweep_inputs.pack``): its bytes and ``{path as written: its
    directory or file inside the bundle}``."""
    from broker.scale.sweep_inputs import pack

    members: dict[str, bytes] = {}
    where: dict[str, str] = {}
    for argv in argvs:
        for orig, parts in shipped(argv).items():
            if orig in where:
                continue
            base = f"{len(where)}/{Path(orig).name}"
            where[orig] = base
            members.update({f"{base}/{rel}" if rel else base: b for rel, b in parts.items()})
    return pack(members), where


def run_fetched(task: tuple[tuple[str, ...], str, str, dict[str, str]]) -> dict[str, object]:
    """``run_scenario`` on a worker, its inputs read from the published bundle
    (``bundled``; read once a process) and the arguments pointed at them."""
    from broker.scale.sweep_inputs import fetch
    from markets.aws.sdk import s3_client

    argv, location, digest, members = task
    try:
        root = fetch(location, digest, s3_client)
    except (OSError, SpotfolioError) as e:
        return {
            "result": None,
            "error": f"sweep inputs at {location}: {e}",
            "warnings": "",
            "seconds": 0.0,
        }
    where = {orig: str(root / m) for orig, m in members.items()}
    return _as_written(run_scenario(tuple(where.get(a, a) for a in argv)), where)


@click.command(name="sweep")
@click.argument("grid", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The Parquet file, a row per scenario [default: GRID with .parquet].",
)
@click.option(
    "--workers",
    type=ranged(ge=1, le=256, integer=True),
    default=None,
    help="Processes of the local Dask cluster [default: the CPUs]; 1: serially.",
)
@click.option(
    "--scheduler",
    default=None,
    metavar="ADDRESS",
    help="An existing Dask scheduler (tcp://host:8786) instead of a local cluster.",
)
@click.option(
    "--inputs-url",
    default=None,
    metavar="URL",
    help="Publish the grid's files once at URL (file:///dir or s3://bucket/prefix) "
    "for the workers to read, instead of with each task.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (the summary).")
def sweep_command(
    grid: Path,
    out: Path | None,
    workers: int | None,
    scheduler: str | None,
    inputs_url: str | None,
    as_json: bool,
) -> None:
    """Run a grid of what-if scenarios (markets x demands x policies x committed x stress)."""
    from broker.scale.fanout import Executor, ExecutorSpec
    from broker.scale.grid import load_grid
    from broker.scale.table import scenario_row, write_parquet

    require("duckdb", "sweep", got=str(grid))  # DuckDB writes the Parquet
    if workers is not None and scheduler is not None:
        raise InputError(
            "--workers", None, "either --workers or --scheduler, not both", got=workers
        )
    target = out if out is not None else grid.with_suffix(".parquet")
    if not os.access(target.parent if str(target.parent) else Path("."), os.W_OK | os.X_OK):
        raise InputError("--out", None, "a file in a writable directory", got=str(target))
    if inputs_url is not None:
        from broker.scale.sweep_inputs import check_url

        inputs_url = check_url(inputs_url)
    g = load_grid(grid, check_option)
    spec = ExecutorSpec(workers=workers or os.cpu_count() or 1, scheduler=scheduler)
    t0 = time.perf_counter()
    with progress("sweep") as say:
        say("starting the cluster" if not spec.serial else "running")
        with Executor(spec) as ex:
            step = lambda d, t: say.step(d, t, "scenarios")  # noqa: E731
            if inputs_url is not None:  # one bundle at one URL (module doc)
                from broker.scale.sweep_inputs import publish
                from markets.aws.sdk import s3_client

                data, where = bundled([s.argv for s in g.scenarios])
                location, digest = publish(inputs_url, data, s3_client)
                fetched = [(s.argv, location, digest, where) for s in g.scenarios]
                outcomes = ex.map(run_fetched, fetched, on_done=step)
            else:  # a cluster's workers get the inputs with the task (module doc)
                tasks = [(s.argv, {} if spec.serial else shipped(s.argv)) for s in g.scenarios]
                outcomes = ex.map(run_shipped, tasks, on_done=step)
            n_workers = ex.workers
    rows = [scenario_row(s, o) for s, o in zip(g.scenarios, outcomes, strict=True)]
    write_parquet(rows, target)
    failed = [r for r in rows if r["error"] is not None]
    summary = {
        "schema": "spotfolio.sweep/1",
        "grid": str(grid),
        "out": str(target),
        "scenarios": len(rows),
        "failed": len(failed),
        "workers": n_workers,
        "scheduler": scheduler,
        "seconds": round(time.perf_counter() - t0, 2),
    }
    if as_json:
        emit_json(summary)
    else:
        console.print(
            f"wrote {target} ({len(rows)} scenarios on {n_workers} workers, "
            f"{summary['seconds']} s)",
            markup=False,
            highlight=False,
        )
    if failed:
        first = failed[0]
        raise SpotfolioError(
            f"{len(failed)} of {len(rows)} scenarios failed (rows with an "
            f"error in {target}); scenario {first['scenario']}: "
            f"{first['error']}"
        )
