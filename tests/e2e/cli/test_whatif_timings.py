"""``spotfolio whatif --timings``: every phase timed, the JSON block only with the flag."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from broker.cli import cli

PHASES = [
    "market",
    "forecast",
    "commitments plan",
    "replay planning",
    "reaction",
    "baselines",
    "billing",
    "advice",
    "risk band",
    "report",
]


def _run(*extra: str) -> tuple[dict[str, object], str]:
    args = ["whatif", "--days", "1", "--scenarios", "2", "--workers", "1", "--json", *extra]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout), res.stderr


@pytest.mark.slow
def test_timings_flag_times_every_phase_on_stderr_and_in_the_json() -> None:
    doc, err = _run("--timings")
    timings = doc["timings"]
    assert isinstance(timings, dict)
    phases = timings["phases"]
    assert isinstance(phases, dict)
    assert list(phases) == PHASES[:-1]  # the report is still being made when the JSON is
    for name, p in phases.items():
        assert p["cpu_s"] >= 0 and p["wall_s"] >= 0, name
        assert p["peak_rss_mib"] > 10, name
    cpu = sum(p["cpu_s"] for p in phases.values())
    assert cpu <= timings["total"]["cpu_s"] + 0.01  # disjoint: nested phases not counted twice
    lines = err.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.split()[:3] == ["phase", "CPU", "s"])
    names = [ln.rsplit(None, 3)[0] for ln in lines[head + 1 :]]
    assert names == [*PHASES, "total"]


@pytest.mark.slow
def test_without_the_flag_no_timings_block_nor_table() -> None:
    doc, err = _run()
    assert "timings" not in doc
    assert "peak MiB" not in err
