"""``python -m tests.hostile.report``: run every deterministic hostile case
and print the tally (exit 0 / exit 2 / exit 3; tracebacks, hangs, silent
accepts and bad error lines), then each failing case. Exit status 1 if any
case failed."""

from __future__ import annotations

import collections
import sys
import tempfile
import time
from pathlib import Path

from tests.hostile.cases import all_cases
from tests.hostile.harness import run_case, verdict


def main() -> int:
    cases = all_cases()
    tally: collections.Counter[str] = collections.Counter()
    failures: list[str] = []
    t0 = time.perf_counter()
    slowest = (0.0, "")
    for case in cases:
        with tempfile.TemporaryDirectory() as tmp:
            out = run_case(case, Path(tmp))
            problem = verdict(case, out, Path(tmp))
        tally[f"exit {out.code}" if out.code is not None else "no exit"] += 1
        slowest = max(slowest, (out.seconds, case.id))
        if problem is not None:
            kind = (
                "traceback"
                if problem.startswith("traceback")
                else "hang"
                if problem == "hang"
                else "silent accept"
                if problem.startswith("silent")
                else "bad error line"
            )
            tally[kind] += 1
            failures.append(f"{case.id}: {problem}")
    print(
        f"{len(cases)} cases in {time.perf_counter() - t0:.1f} s "
        f"(slowest {slowest[0]:.2f} s: {slowest[1]})"
    )
    for key in (
        "exit 0",
        "exit 2",
        "exit 3",
        "no exit",
        "traceback",
        "hang",
        "silent accept",
        "bad error line",
    ):
        print(f"  {key:15} {tally[key]}")
    for line in failures:
        print("FAIL", line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
