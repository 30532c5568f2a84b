"""broker.cli.progress: a line on a terminal, nothing anywhere else."""

from __future__ import annotations

import io
import os
import pty
import select

from broker.cli.progress import Progress


def _ticks(*values: float):  # a clock that returns the given times in turn
    it = iter(values)
    return lambda: next(it)


def _read_all(fd: int) -> str:
    """Everything written so far: a pty hands it over in pieces."""
    out = b""
    while select.select([fd], [], [], 0.5)[0]:
        out += os.read(fd, 4096)
    return out.decode()


def test_a_pipe_or_file_gets_nothing() -> None:
    buf = io.StringIO()  # isatty() is False, as for a redirected stderr
    with Progress("sweep", buf) as p:
        p("starting")
        p.step(3, 3, "scenarios")
    assert buf.getvalue() == ""
    assert not p.shown


def test_a_terminal_gets_one_line_rewritten_and_cleared() -> None:
    leader, follower = pty.openpty()
    try:
        with open(follower, "w", closefd=False) as tty:
            p = Progress("whatif", tty, clock=_ticks(0.0, 1.0, 1.05, 2.0, 3.0))
            assert p.shown
            with p:
                p("planning")  # t=1.0: drawn
                p("too soon")  # t=1.05: throttled (< MIN_REDRAW_S after the last)
                p.step(5, 5, "steps")  # the last step is always drawn
        got = _read_all(leader)
    finally:
        os.close(leader)
        os.close(follower)
    assert "whatif: planning [1s]" in got
    assert "too soon" not in got
    assert "whatif: steps 5/5 [2s]" in got
    assert got.startswith("\r\x1b[K")
    assert got.endswith("\r\x1b[K")  # cleared on exit: the next output starts clean


def test_whatif_json_on_a_pipe_has_no_progress_on_stderr(tmp_path) -> None:
    from click.testing import CliRunner

    from broker.cli import cli

    tiny = os.path.join(os.path.dirname(__file__), "scale", "tiny_workloads.yaml")
    res = CliRunner().invoke(
        cli, ["whatif", "--days", "1", "--replan-hours", "24", "--policies", tiny, "--json"]
    )
    assert res.exit_code == 0, res.output
    assert "whatif:" not in res.stderr
    assert "\x1b[K" not in res.stderr
