"""Run one hostile input and judge what came back.

A case is a file mutated from a shipped example (read by the loader the CLI
uses) or a command line (run in-process through ``broker.cli.main`` inside
click's ``CliRunner`` isolation). ``run_case`` gives an ``Outcome``;
``verdict`` says what is wrong with it, or ``None``:

- a traceback: any exception but ``InputError`` out of a loader, any
  exception at all out of ``main``;
- a hang: the case outlived ``TIMEOUT_S`` (SIGALRM interrupts it);
- a bad error: an exit other than 0 and 2 (3, "cannot decide", is allowed
  where ``allow_explain``), more or less than one line on stderr, or a line
  that does not name the file, the field or option (``names``);
- a silent accept: exit 0 for a value outside its documented range
  (``must_reject``).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from click.testing import CliRunner

from broker.cli import main
from markets.errors import InputError

__all__ = ["TIMEOUT_S", "Case", "Outcome", "run_case", "verdict"]

TIMEOUT_S = 20.0


class Hang(BaseException):
    """Raised by SIGALRM in a case that outlived its time."""


@dataclass(frozen=True)
class Outcome:
    code: int | None  # None: no exit code (a traceback or a hang)
    stderr: str
    problem: str | None = None  # "traceback: ..." / "hang"
    seconds: float = 0.0


@dataclass(frozen=True)
class Case:
    """One hostile input. ``make(tmp)`` writes its files under ``tmp`` and
    returns either argv for the CLI or a zero-argument loader call."""

    id: str
    make: Callable[[Path], list[str] | Callable[[], object]]
    names: tuple[str, ...] = ()  # every one must appear in the error line
    must_reject: bool = False
    allow_explain: bool = False
    # names the line must contain, given the tmp dir (the file written there)
    file_names: Callable[[Path], tuple[str, ...]] = field(default=lambda _tmp: ())
    # a case that plans (a what-if) may take longer than a parse, without hanging
    timeout_s: float = TIMEOUT_S


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    def fire(_sig: int, _frame: object) -> None:
        raise Hang

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _run_cli(argv: list[str]) -> Outcome:
    runner = CliRunner()
    with runner.isolation() as streams:
        try:
            code: int | None = main(argv)
            problem = None
        except Hang:
            raise
        except BaseException as e:  # anything out of main is a traceback
            code, problem = None, f"traceback: {type(e).__name__}: {e}"[:300]
        err = streams[1].getvalue().decode(errors="replace")
    return Outcome(code, err, problem)


def _run_loader(call: Callable[[], object]) -> Outcome:
    try:
        call()
    except Hang:
        raise
    except InputError as e:  # what the CLI prints: "spotfolio: error: <str(e)>"
        return Outcome(2, f"spotfolio: error: {e}\n")
    except BaseException as e:
        return Outcome(None, "", f"traceback: {type(e).__name__}: {e}"[:300])
    return Outcome(0, "")


def run_case(case: Case, tmp: Path, timeout_s: float | None = None) -> Outcome:
    timeout_s = case.timeout_s if timeout_s is None else timeout_s
    made = case.make(tmp)
    t0 = time.perf_counter()
    try:
        with _deadline(timeout_s):
            out = _run_cli(made) if isinstance(made, list) else _run_loader(made)
    except Hang:
        out = Outcome(None, "", "hang")
    return Outcome(out.code, out.stderr, out.problem, time.perf_counter() - t0)


def verdict(case: Case, out: Outcome, tmp: Path) -> str | None:
    """What is wrong with ``out`` for ``case`` (``None``: nothing)."""
    if out.problem is not None:
        return out.problem
    if out.code == 0:
        return "silent accept of a value outside its range" if case.must_reject else None
    allowed = {2, 3} if case.allow_explain else {2}
    if out.code not in allowed:
        return f"exit {out.code}: {out.stderr.strip()[:200]}"
    lines = out.stderr.strip("\n").split("\n")
    if len(lines) != 1 or not lines[0].strip():
        return f"{len(lines)} stderr lines: {out.stderr[:300]!r}"
    missing = [n for n in (*case.names, *case.file_names(tmp)) if n not in lines[0]]
    if missing:
        return f"the line does not name {missing}: {lines[0][:300]}"
    return None
