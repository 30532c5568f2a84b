"""Shell completion as the README documents it: ``_SPOTFOLIO_COMPLETE=<shell>_source
spotfolio`` prints a script (click's), and the completions it asks for name
the real commands and choices."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from markets.registry import PROVIDERS

REPO = Path(__file__).resolve().parents[3]
CLI = "import sys; from broker.cli import main; sys.exit(main(sys.argv[1:]))"


def spotfolio(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CLI],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def complete(words: str) -> list[str]:
    cword = len(words.split()) - (0 if words.endswith(" ") else 1)
    done = spotfolio(
        {"_SPOTFOLIO_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": str(cword)}
    )
    assert done.returncode == 0, done.stderr
    return [line.split(",", 1)[1] for line in done.stdout.splitlines()]


def test_the_console_script_is_named_spotfolio() -> None:
    """click derives the variable from the program name: _SPOTFOLIO_COMPLETE."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["spotfolio"] == "broker.cli:main"


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_each_shell_gets_a_completion_script(shell: str) -> None:
    done = spotfolio({"_SPOTFOLIO_COMPLETE": f"{shell}_source"})
    assert done.returncode == 0, done.stderr
    assert "_spotfolio_completion" in done.stdout
    assert f"_SPOTFOLIO_COMPLETE={shell}_complete" in done.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_the_bash_script_registers_the_completion(tmp_path: Path) -> None:
    script = tmp_path / "spotfolio.bash"
    script.write_text(spotfolio({"_SPOTFOLIO_COMPLETE": "bash_source"}).stdout)
    done = subprocess.run(
        ["bash", "-c", f"source {script} && complete -p spotfolio"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert "-F _spotfolio_completion" in done.stdout


def test_completions_name_commands_options_and_choices() -> None:
    assert "daemon" in complete("spotfolio da")
    assert complete("spotfolio daemon --prov") == ["--provider"]
    assert sorted(complete("spotfolio daemon --provider ")) == sorted(PROVIDERS.names())
