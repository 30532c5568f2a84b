"""The child process of ``spotfolio bench``'s year what-if
(``broker.bench.scale.year_whatif``): ``spotfolio whatif --days N --json``
run in this process as a user runs it, then one JSON line of its wall time,
peak RSS (its own and its solver children's), CPU time, each phase's CPU
and wall seconds and peak memory (``--timings``) and the Spotfolio total.

Owns: ``measured_whatif``. It lives under the command line (a composition
root) so that the bench, which the ``bench`` command imports, never imports
the command line back: the bench starts it with ``python -m``.

Must not: be imported by the bench (it is run, not imported).
"""

from __future__ import annotations

import json
import resource
import sys
import time

__all__ = ["measured_whatif"]


def measured_whatif(days: int) -> None:
    """``spotfolio whatif --days DAYS --json`` as a user runs it (its defaults:
    the example fleet, 6-hourly re-plans), its JSON to a pipe we drop."""
    import contextlib
    import io

    from broker.cli import main

    t0 = time.perf_counter()
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["whatif", "--days", str(days), "--json", "--timings"])
    wall = time.perf_counter() - t0
    if code != 0:
        raise SystemExit(code)
    doc = json.loads(buf.getvalue())
    cost = next(s["total_cost_usd"] for s in doc["scenarios"] if s["name"] == "spotfolio")
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        json.dumps(
            {
                "seconds": wall,
                "rss_kib": own.ru_maxrss,
                "children_rss_kib": kids.ru_maxrss,
                "cost": cost,
                "phases_s": doc["seconds"],
                "timings": doc["timings"],
                "cpu_s": own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime,
            }
        )
    )


if __name__ == "__main__":
    measured_whatif(int(sys.argv[1]))
