"""Progress lines for the long commands: on a terminal, one line on stderr
rewritten in place; anywhere else, nothing.

Owns: ``Progress`` (a callable taking one message; a context manager that
clears its line on exit) and ``progress(label)``, the one way ``whatif``,
``simulate``, ``bench`` and ``sweep`` report how far a run is. Whether to show
is decided once, from ``stream.isatty()``: a redirected or piped stderr (a log
file, CI, a Dask worker) gets no progress at all, so JSON on stdout and
warnings on stderr stay clean. Must not: write to stdout, or print anything
that is not a progress line (warnings and results are the commands').

A line reads ``whatif: step 12/120 [34s]``: the label, the latest message and
the seconds since the run started. Redraws are throttled (``MIN_REDRAW_S``);
a message ending a run (``done``/``total`` equal) is always drawn.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

__all__ = ["MIN_REDRAW_S", "Progress", "progress"]

# At most ten redraws a second: a serial loop over thousands of windows must
# not spend its time writing to the terminal.
MIN_REDRAW_S = 0.1
_CLEAR = "\r\x1b[K"  # carriage return, erase to the end of the line (ECMA-48 EL)


class Progress:
    """One progress line on ``stream`` (stderr), shown only on a terminal."""

    def __init__(
        self,
        label: str,
        stream: TextIO | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self._clock = clock
        try:
            self.shown = self.stream.isatty()
        except (AttributeError, ValueError):  # a closed or bare stream
            self.shown = False
        self._t0 = clock()
        self._last = -MIN_REDRAW_S
        self._drawn = False

    def __call__(self, message: str) -> None:
        """Show ``message`` (throttled)."""
        self._draw(message, force=False)

    def step(self, done: int, total: int, what: str) -> None:
        """``what done/total``; the last step is always drawn."""
        self._draw(f"{what} {done}/{total}", force=done >= total)

    def _draw(self, message: str, *, force: bool) -> None:
        if not self.shown:
            return
        now = self._clock()
        if not force and now - self._last < MIN_REDRAW_S:
            return
        self._last = now
        line = f"{self.label}: {message} [{now - self._t0:.0f}s]"
        self.stream.write(_CLEAR + line)
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        """Erase the line, so what is printed next starts on a clean one."""
        if self._drawn:
            self.stream.write(_CLEAR)
            self.stream.flush()
            self._drawn = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def progress(label: str, stream: TextIO | None = None) -> Progress:
    """A ``Progress`` for the command ``label`` on stderr (or ``stream``)."""
    return Progress(label, stream)
