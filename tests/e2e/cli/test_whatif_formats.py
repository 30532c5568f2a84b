"""``spotfolio whatif --format text|json|csv|markdown|html`` through the real
CLI (``broker.cli.main``), on the embedded default market.

One what-if is computed for the module (``run_whatif`` memoised: every format
renders the same result, as the CLI would given the same inputs); the
renderers, the options and the files written are the CLI's own."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import broker.whatif.run
from broker.cli import main
from tests.browser import CHROMIUM, NO_CHROMIUM, render_page
from tests.paths import REPO
from tests.unit.broker.cli.report.test_markdown import assert_well_formed

RUN = [
    "whatif",
    "--days",
    "1",
    "--replan-hours",
    "24",
    "--committed",
    "0.4,0.6",
    "--scenarios",
    "2",
]
CLI = "import sys; from broker.cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.fixture(scope="module", autouse=True)
def one_run() -> Iterator[None]:
    real: Callable[..., Any] = broker.whatif.run.run_whatif
    done: dict[str, Any] = {}

    def memo(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("progress", None)
        # every run here is on the default market and workloads (the
        # positional arguments, new objects each call): the options decide
        key = repr(sorted(kwargs.items()))
        if key not in done:
            done[key] = real(*args, **kwargs)
        return done[key]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(broker.whatif.run, "run_whatif", memo)
        yield


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[str, str]:
    assert main([*RUN, *args]) == 0
    got = capsys.readouterr()
    return got.out, got.err


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    buf = io.StringIO()
    from contextlib import redirect_stdout

    with redirect_stdout(buf):
        assert main([*RUN, "--json"]) == 0
    out: dict[str, Any] = json.loads(buf.getvalue())
    return out


def _untimed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k != "seconds"}
    if isinstance(value, str):  # an explanation's solve time ("by cbc in 0.49 s")
        return re.sub(r" in \d+(\.\d+)? s\b", " in _ s", value)
    return [_untimed(v) for v in value] if isinstance(value, list) else value


def test_json_alias_and_format_json_print_the_same_document(
    doc: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = run(capsys, "--format", "json")
    # wall-clock timings aside (``seconds``, the risk band's own), the same document
    assert _untimed(json.loads(out)) == _untimed(doc)
    assert {"timeline", "spot_by_zone", "committed_sweep"} <= set(doc)


def test_the_timeline_adds_up_to_each_scenarios_planned_cost(doc: dict[str, Any]) -> None:
    per = doc["timeline"]["scenarios"]
    for s in doc["scenarios"]:
        planned = sum(sum(v) for v in per[s["name"]].values())
        assert planned == pytest.approx(s["planned_cost_usd"], abs=0.05), s["name"]
    ours = [z for z in doc["spot_by_zone"] if z["scenario"] == "spotfolio"]
    assert ours and sum(z["share"] for z in ours) == pytest.approx(1.0, abs=1e-5)
    assert all(z["zone"].count("/") == 1 for z in ours)  # provider/zone


@pytest.mark.parametrize("columns", ["80", None], ids=["COLUMNS=80", "not-a-terminal"])
def test_text_fits_80_columns(
    columns: str | None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    out, _ = run(capsys)
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)
    assert "== Scenarios" in out and "== Committed sweep" in out
    assert "$" in out and "k " in out  # condensed money: $81.9k


def test_text_fits_a_narrow_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    out, _ = run(capsys)
    assert max(len(line) for line in out.splitlines()) <= 40


def test_a_text_file_is_laid_out_in_80_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)  # a wide terminal, a file
    monkeypatch.setattr("shutil.get_terminal_size", lambda *_a: os.terminal_size((200, 50)))
    report = tmp_path / "w.txt"
    _, err = run(capsys, "--out", str(report))
    assert f"wrote {report}" in err.splitlines()
    assert max(len(line) for line in report.read_text().splitlines()) <= 80


def test_text_takes_a_wider_terminal_when_it_has_one(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "160")
    out, _ = run(capsys)
    heads = [line for line in out.splitlines() if line.startswith("scenario ")]
    assert "planned" in heads[0]  # one block: no wrap at 160 columns


def test_text_piped_from_a_real_process_fits_80_columns() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    done = subprocess.run(
        [sys.executable, "-c", CLI, "whatif", "--days", "1", "--replan-hours", "24"],
        cwd=REPO,
        env={**env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines and max(len(line) for line in lines) <= 80, max(lines, key=len)
    assert any(line.startswith("spotfolio ") and "$" in line for line in lines)


def test_csv_parses_and_its_totals_are_the_jsons(
    doc: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = run(capsys, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    want = {s["name"]: s for s in doc["scenarios"]}
    assert [r["name"] for r in rows] == [s["name"] for s in doc["scenarios"]]
    for r in rows:
        s = want[r["name"]]
        assert float(r["total_cost_usd"]) == s["total_cost_usd"]
        assert float(r["spot_usd"]) == s["cost_by_tier_usd"]["spot"]
        tiers = sum(float(r[k]) for k in ("committed_usd", "on_demand_usd", "spot_usd"))
        assert tiers - float(r["work_ahead_usd"]) == pytest.approx(s["total_cost_usd"], abs=0.05)


def test_csv_table_names_one_of_the_reports_tables(
    doc: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = run(capsys, "--format", "csv", "--table", "advice_cost_by_workload")
    rows = list(csv.DictReader(io.StringIO(out)))
    want = {r["name"]: r for r in doc["advice"]["cost_by_workload"]}
    assert rows and {r["name"] for r in rows} == set(want)
    for r in rows:
        assert float(r["total_usd"]) == want[r["name"]]["total_usd"]


def test_csv_table_all_writes_one_named_file_per_table(
    doc: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from broker.cli.report.csvfile import csv_tables, render_csv

    out = tmp_path / "r.csv"
    stdout, err = run(capsys, "--format", "csv", "--table", "all", "--out", str(out))
    names = csv_tables(doc)
    assert stdout == "" and "committed_sweep" in names and "advice_commitments" in names
    files = {n: out if n == "scenarios" else tmp_path / f"r.{n}.csv" for n in names}
    assert sorted(err.splitlines()) == sorted(f"wrote {f}" for f in files.values())
    for name, f in files.items():
        assert f.read_text() == render_csv(_untimed(doc), name), name


def test_markdown_tables_are_well_formed(capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = run(capsys, "--format", "markdown")
    assert assert_well_formed(out) >= 2  # scenarios, sweep
    assert "## Scenarios, billed on the actual demand and market" in out


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_html_out_is_written_named_and_renders_in_chromium(
    doc: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "r.html"
    out, err = run(capsys, "--format", "html", "--out", str(page))
    assert out == "" and f"wrote {page}" in err.splitlines()
    got = render_page(page, tmp_path)
    assert got.resources == [] and got.errors == []
    assert 'id="chart-tiers"' in got.dom and 'id="chart-sweep"' in got.dom
    assert 'id="chart-timeline"' in got.dom and 'id="chart-zones"' in got.dom
    assert 'id="chart-risk"' in got.dom  # the run's two sampled scenarios
    ours = next(s for s in doc["scenarios"] if s["name"] == "spotfolio")
    assert f"${ours['total_cost_usd']:,.0f}" in got.dom


def test_out_without_format_takes_the_suffixs_format(
    doc: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = tmp_path / "w.csv"
    _, err = run(capsys, "--out", str(table))
    assert f"wrote {table}" in err.splitlines()
    rows = list(csv.DictReader(io.StringIO(table.read_text())))
    assert [float(r["total_cost_usd"]) for r in rows] == [
        s["total_cost_usd"] for s in doc["scenarios"]
    ]


def test_plot_names_the_file_it_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib", reason="the plot extra is not installed")
    png = tmp_path / "w.png"
    _, err = run(capsys, "--json", "--plot", str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {png}" in err.splitlines()


def _one_line(capsys: pytest.CaptureFixture[str], args: list[str]) -> str:
    assert main(["whatif", "--days", "1", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("spotfolio: error: "), err
    return err


def test_a_bad_format_exits_2_naming_the_option_and_choices(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _one_line(capsys, ["--format", "pdf"])
    assert "--format" in err and "'pdf'" in err
    for name in ("text", "json", "csv", "markdown", "html"):
        assert name in err


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        pytest.param(["--json", "--format", "csv"], "--json", id="json-with-csv"),
        pytest.param(["--format", "html", "--out", "r.csv"], ".html", id="suffix-mismatch"),
        pytest.param(
            ["--out", "/no/such/dir/r.txt"], "existing, writable directory", id="no-directory"
        ),
        pytest.param(["--table", "advice_totals"], "--format csv", id="table-without-csv"),
        pytest.param(
            ["--format", "csv", "--table", "bogus"], "advice_commitments", id="unknown-table"
        ),
        pytest.param(["--format", "csv", "--table", "all"], "--out", id="all-to-stdout"),
    ],
)
def test_bad_output_options_exit_2_before_the_run(
    args: list[str],
    needle: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_run(*_a: object, **_k: object) -> None:
        raise AssertionError("the what-if ran before the output options were checked")

    monkeypatch.setattr(broker.whatif.run, "run_whatif", no_run)
    err = _one_line(capsys, args)
    assert needle in err
