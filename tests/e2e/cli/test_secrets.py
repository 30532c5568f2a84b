"""No secret in what the command line prints or logs: a store
URL's password in a bad config's exit-2 line, a secret header in a log
record of any project logger."""

from __future__ import annotations

import json
import logging
import socket
from pathlib import Path

import pytest

from broker.cli import EXIT_INPUT, main
from broker.cli.daemon import PROJECT_LOGGERS, _logging

PASSWORD = "hunter2-Zq9"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param({}, id="unreachable-store"),
        pytest.param({"metrics_port": "STORE"}, id="the-url-as-a-bad-field-value"),
    ],
)
def test_a_store_url_password_never_reaches_the_exit_2_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: dict[str, str]
) -> None:
    url = f"postgresql+psycopg://spot:{PASSWORD}@127.0.0.1:{_closed_port()}/state"
    settings = {"owner": "me", "store_url": url, "metrics_port": 0}
    settings.update({k: url if v == "STORE" else v for k, v in extra.items()})
    cfg = tmp_path / "daemon.yaml"
    cfg.write_text(json.dumps(settings))  # JSON is YAML
    assert main(["daemon", "--config", str(cfg), "--once"]) == EXIT_INPUT
    err = capsys.readouterr().err
    assert err.startswith("spotfolio: error: ")
    assert PASSWORD not in err
    assert "spot:***@127.0.0.1" in err  # the user and host still say which store


@pytest.mark.parametrize("fmt", ["kv", "json"])
@pytest.mark.parametrize("logger", [*PROJECT_LOGGERS, "markets.aws.notices"])
def test_the_daemons_log_handler_redacts_every_project_logger(
    capsys: pytest.CaptureFixture[str], fmt: str, logger: str
) -> None:
    _logging(fmt, "info")
    logging.getLogger(logger).warning(
        "hook_call url=https://u:%s@drain/x header=Authorization: Bearer %s", PASSWORD, PASSWORD
    )
    err = capsys.readouterr().err
    assert "hook_call" in err and PASSWORD not in err
    assert "u:***@drain" in err


@pytest.mark.parametrize(
    ("hook", "field", "why"),
    [
        pytest.param(
            {"headers": {"X-Token": {"vault": "a"}}},
            "headers.X-Token",
            "unknown key",
            id="unknown-kind",
        ),
        pytest.param(
            {"signing_key": {"env": "A", "ssm": "/b"}}, "signing_key", "exactly one", id="two-kinds"
        ),
        pytest.param(
            {"headers": {"Authorization": 918273645}},
            "headers.Authorization",
            "a string, or a reference",
            id="not-a-string",
        ),
        pytest.param(
            {"signing_key": 918273645},
            "signing_key",
            "a string, or a reference",
            id="key-not-a-string",
        ),
    ],
)
def test_a_bad_secret_field_names_the_field_and_never_echoes_the_value(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    hook: dict[str, object],
    field: str,
    why: str,
) -> None:
    cfg = tmp_path / "daemon.yaml"
    settings = {"owner": "me", "checkpoint_hooks": {"api": {"url": "http://x/", **hook}}}
    cfg.write_text(json.dumps(settings))
    assert main(["daemon", "--config", str(cfg), "--once"]) == EXIT_INPUT
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"spotfolio: error: {cfg}: checkpoint_hooks.api.{field}: expected ")
    assert why in line and "918273645" not in line


def test_a_bugs_traceback_is_printed_redacted_by_the_cli_process() -> None:
    """``spotfolio`` as a process installs the redacting excepthook: an
    unexpected exception keeps its traceback, without the password."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from broker import cli\n"
        "def boom() -> None:\n"
        f"    raise RuntimeError('lost postgresql://spot:{PASSWORD}@db/x')\n"
        "cli.cli.add_command(cli.click.Command('boom', callback=boom))\n"
        "sys.argv = ['spotfolio', 'boom']\n"
        "cli.main()\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert run.returncode == 1
    assert "Traceback" in run.stderr and "RuntimeError" in run.stderr
    assert PASSWORD not in run.stderr and "spot:***@db" in run.stderr
