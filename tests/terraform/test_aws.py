"""The Terraform deployment (terraform/) checked by the tools: terraform fmt,
init + validate, the module's terraform test, checkov; and what the module
renders (configuration, entrypoint) run against the daemon's own code.

What runs where:

- ``terraform fmt -check``, ``terraform init -backend=false -plugin-dir=DIR``
  + ``terraform validate`` for every module and example, and the module's own
  ``terraform test`` (a mocked AWS provider): need the ``terraform`` binary
  and a plugin directory holding registry.terraform.io/hashicorp/aws
  5.100.0 (the registry is out of reach). DIR is
  ``$SPOTFOLIO_TF_PLUGIN_DIR``, else the first of ``PLUGIN_DIR_CANDIDATES``
  that has the provider. Init runs in a temporary copy of terraform/, so the
  work tree gets no ``.terraform``.
- checkov: ``$CHECKOV_BIN`` (``.ci/run`` installs it in a venv of its own),
  else ``checkov`` on PATH.
- The IAM policy and the other checks of the files as text are in
  tests/terraform/test_policy.py (nothing to install).
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.cli.daemon import daemon_command
from broker.daemon.config import load_daemon_config
from markets.aws.options import REGION_PATTERN, parse_names
from markets.aws.settings import settings_from_options
from tests.terraform.hcl import TF_ROOT, config_dirs

ROOT = TF_ROOT.parent
AWS_PROVIDER_VERSION = "5.100.0"
PLUGIN_DIR_CANDIDATES = (
    Path("/opt/tf-plugins"),
    Path.home() / ".terraform.d" / "plugins",
    Path.home() / ".local" / "share" / "terraform" / "plugins",
    Path("/usr/local/share/terraform/plugins"),
    Path("/usr/share/terraform/plugins"),
)

# -- finding the tools -----------------------------------------------------------


def _platform_dir() -> str:
    machine = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower(), platform.machine().lower()
    )
    return f"{platform.system().lower()}_{machine}"


def _has_provider(d: Path) -> bool:
    base = d / "registry.terraform.io" / "hashicorp" / "aws" / AWS_PROVIDER_VERSION
    return (base / _platform_dir()).is_dir() or any(base.glob(f"*{_platform_dir()}.zip"))


def _plugin_dir() -> Path:
    configured = os.environ.get("SPOTFOLIO_TF_PLUGIN_DIR")
    if configured:
        if not _has_provider(Path(configured)):
            pytest.fail(
                f"SPOTFOLIO_TF_PLUGIN_DIR={configured} has no registry.terraform.io/hashicorp/"
                f"aws/{AWS_PROVIDER_VERSION}/{_platform_dir()}"
            )
        return Path(configured)
    for d in PLUGIN_DIR_CANDIDATES:
        if _has_provider(d):
            return d
    pytest.skip(
        f"no plugin directory with hashicorp/aws {AWS_PROVIDER_VERSION} for {_platform_dir()}: "
        f"set SPOTFOLIO_TF_PLUGIN_DIR (looked in {', '.join(map(str, PLUGIN_DIR_CANDIDATES))})"
    )


def _terraform() -> str:
    exe = shutil.which("terraform")
    if exe is None:
        pytest.skip("terraform is not on PATH (install Terraform >= 1.5 to run these checks)")
    return exe


def _tf_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TF_")}
    # No user CLI configuration (plugin caches, mirrors): -plugin-dir decides.
    env.update(TF_IN_AUTOMATION="1", TF_INPUT="0", CHECKPOINT_DISABLE="1")
    env["TF_CLI_CONFIG_FILE"] = os.devnull
    return env


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=cwd, env=_tf_env(), capture_output=True, text=True, timeout=600, check=False
    )


@pytest.fixture(scope="module")
def tf_copy() -> Iterator[Path]:
    """A temporary copy of terraform/ (no .terraform dirs), removed after:
    each init copies the ~700 MB provider binary into it."""
    with tempfile.TemporaryDirectory(prefix="spotfolio-tf-") as tmp:
        dst = Path(tmp) / "terraform"
        shutil.copytree(TF_ROOT, dst, ignore=shutil.ignore_patterns(".terraform*", "*.tfstate*"))
        yield dst


def _init(tf_copy: Path, rel: str) -> Path:
    terraform, plugin_dir = _terraform(), _plugin_dir()
    where = tf_copy / rel
    if not (where / ".terraform").is_dir():
        init = _run([terraform, "init", "-backend=false", f"-plugin-dir={plugin_dir}"], where)
        assert init.returncode == 0, f"terraform init in {rel}:\n{init.stdout}\n{init.stderr}"
    return where


# -- terraform itself ------------------------------------------------------------


def test_every_module_and_example_is_found() -> None:
    assert {"modules/aws", "examples/aws"} <= set(config_dirs())


def test_terraform_files_are_formatted() -> None:
    fmt = _run([_terraform(), "fmt", "-check", "-recursive", "-diff", str(TF_ROOT)], ROOT)
    assert fmt.returncode == 0, f"terraform fmt -check -recursive terraform/:\n{fmt.stdout}"


@pytest.mark.slow
@pytest.mark.parametrize("rel", config_dirs())
def test_validates_offline(tf_copy: Path, rel: str) -> None:
    if "hashicorp/google" in "".join(p.read_text() for p in (TF_ROOT / rel).glob("*.tf")):
        # tests/terraform/test_gcp.py: skips with the reason, or validates
        # once a plugin directory holds hashicorp/google.
        pytest.skip(f"{rel} needs hashicorp/google: validated by tests/terraform/test_gcp.py")
    where = _init(tf_copy, rel)
    validate = _run([_terraform(), "validate", "-no-color"], where)
    assert validate.returncode == 0, f"terraform validate in {rel}:\n{validate.stderr}"
    assert "Warning" not in validate.stdout + validate.stderr.replace(
        "Unable to open CLI configuration", ""
    ), validate.stdout + validate.stderr


@pytest.fixture(scope="module")
def module_tests(tf_copy: Path) -> dict[str, dict[str, Any]]:
    """Runs the module's ``terraform test`` (mocked provider) once; returns
    the final state of each run that applied, by run name."""
    version = _run([_terraform(), "version", "-json"], ROOT)
    major, minor = (int(x) for x in json.loads(version.stdout)["terraform_version"].split(".")[:2])
    if (major, minor) < (1, 7):
        pytest.skip(
            f"terraform test with mock_provider needs Terraform >= 1.7, found {major}.{minor}"
        )
    where = _init(tf_copy, "modules/aws")
    test = _run([_terraform(), "test", "-json", "-verbose", "-no-color"], where)
    messages = [json.loads(line) for line in test.stdout.splitlines() if line.startswith("{")]
    summary = [m["test_summary"] for m in messages if m.get("type") == "test_summary"]
    failures = [m["@message"] for m in messages if m.get("@level") == "error"]
    assert test.returncode == 0 and summary and summary[0]["status"] == "pass", (
        "terraform test in modules/aws failed:\n" + "\n".join(failures) + test.stderr
    )
    assert summary[0]["passed"] > 0 and summary[0]["failed"] == summary[0]["errored"] == 0
    return {m["@testrun"]: m["test_state"] for m in messages if m.get("type") == "test_state"}


def _resource(state: dict[str, Any], address: str) -> dict[str, Any]:
    (found,) = [r for r in state["root_module"]["resources"] if r["address"] == address]
    values: dict[str, Any] = found["values"]
    return values


@pytest.mark.slow
def test_module_terraform_tests_pass_with_a_mocked_provider(
    module_tests: dict[str, dict[str, Any]],
) -> None:
    assert {"sqlite_on_efs", "postgres_on_rds"} <= set(module_tests)


@pytest.mark.slow
@pytest.mark.parametrize("run", ["sqlite_on_efs", "postgres_on_rds"])
def test_rendered_configuration_loads_in_the_daemon(
    module_tests: dict[str, dict[str, Any]], run: str, tmp_path: Path
) -> None:
    """The YAML the module stores in SSM is what ``spotfolio daemon`` loads:
    DaemonConfig, then the AWS provider's settings and the market's options."""
    outputs = {k: v["value"] for k, v in module_tests[run]["outputs"].items()}
    path = tmp_path / "config.yaml"
    path.write_text(outputs["daemon_config_yaml"])
    # Its paths (/var/lib/spotfolio, /run/spotfolio) are the container's.
    cfg = load_daemon_config(path, check_paths=False)
    assert (cfg.provider, cfg.market, cfg.owner) == ("aws", "aws", "team-ml-prod")
    # The composition root passes owner= beside the provider options.
    settings = settings_from_options({"owner": cfg.owner, **cfg.provider_options})
    assert settings.queue_url == outputs["queue_url"]
    assert settings.regions == ("us-east-1",)
    assert settings.launch["us-east-1"].launch_template_name == "spotfolio-gpu"
    regions = parse_names(cfg.market_options["regions"], "regions", REGION_PATTERN, "regions")
    assert regions == ("us-east-1",)
    assert set(cfg.market_options) <= {"regions", "instance_types"}
    if run == "sqlite_on_efs":
        assert cfg.store_url == "sqlite:////var/lib/spotfolio/state.db"
        assert (cfg.planner, cfg.horizon_hours) == ("fast", 48)
        assert cfg.committed == {"aws/us-east-1/g5.xlarge": 2}
        assert cfg.market_options["instance_types"] == "g5.xlarge,g6.xlarge"
    else:
        assert cfg.store_url.startswith("postgresql+psycopg://spotfolio@")
        assert cfg.workloads == Path("/run/spotfolio/workloads.yaml")


@pytest.mark.slow
def test_entrypoint_writes_the_configuration_then_runs_the_daemon(
    module_tests: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    """Runs the task definition's entrypoint script with /bin/sh, its run
    directory moved to a temporary one, and a stand-in for the daemon."""
    state = module_tests["postgres_on_rds"]
    task = _resource(state, "aws_ecs_task_definition.daemon")
    (container,) = json.loads(task["container_definitions"])
    shell, flag, script, argv0 = container["entryPoint"]
    assert container["readonlyRootFilesystem"] and container["user"] == "1000:1000"
    # The command is the CLI's: `spotfolio daemon --config <the file written>`.
    command = container["command"]
    assert command[:2] == ["spotfolio", "daemon"]
    ctx = daemon_command.make_context("daemon", command[2:], resilient_parsing=True)
    assert ctx.params["config_path"] == "/run/spotfolio/config.yaml"
    assert "/run/spotfolio/config.yaml" in script
    config_text = "owner: team-ml-prod\n"
    env = {
        "PATH": os.environ["PATH"],
        "SPOTFOLIO_CONFIG_YAML": config_text,
        "SPOTFOLIO_WORKLOADS_YAML": "workloads: []",
    }
    stand_in = [sys.executable, "-c", "import os, sys; print(sorted(os.environ), sys.argv[1:])"]
    ran = subprocess.run(
        [shell, flag, script.replace("/run/spotfolio", str(tmp_path)), argv0, *stand_in, "ok"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert (tmp_path / "config.yaml").read_text() == config_text + "\n"
    assert (tmp_path / "workloads.yaml").read_text() == "workloads: []\n"
    assert (tmp_path / "config.yaml").stat().st_mode & 0o077 == 0  # umask 077
    assert "SPOTFOLIO_CONFIG_YAML" not in ran.stdout and ran.stdout.rstrip().endswith("['ok']")
    names = {s["name"] for s in container["secrets"]}
    assert names == {"SPOTFOLIO_CONFIG_YAML", "SPOTFOLIO_WORKLOADS_YAML", "PGPASSWORD"}


# -- checkov -------------------------------------------------------------------------

_SKIP = re.compile(r"#\s*checkov:skip=(CKV2?_AWS_\d+)(?::(.*))?")


def _checkov() -> str:
    configured = os.environ.get("CHECKOV_BIN")
    if configured:
        if not os.access(configured, os.X_OK):
            pytest.fail(f"CHECKOV_BIN={configured} is not an executable")
        return configured
    exe = shutil.which("checkov")
    if exe is None:
        pytest.skip(
            "checkov is not installed (CHECKOV_BIN unset, none on PATH); .ci/run installs it"
        )
    return exe


def test_every_checkov_suppression_says_why() -> None:
    skips = [
        (path.name, m.group(1), (m.group(2) or "").strip())
        for path in TF_ROOT.rglob("*.tf")
        for m in _SKIP.finditer(path.read_text())
    ]
    assert skips, "the scanner found no suppression at all (expected the key policy's)"
    unexplained = [(f, check) for f, check, why in skips if len(why) < 30]
    assert not unexplained, f"suppressions without a reason: {unexplained}"


@pytest.mark.slow
def test_checkov_finds_no_failed_check() -> None:
    args = [_checkov(), "-d", str(TF_ROOT), "--framework", "terraform", "--compact"]
    # terraform test files are not Terraform configuration to checkov.
    args += ["--skip-download", "--skip-path", r"\.tftest\.hcl$", "-o", "json"]
    run = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    reports = json.loads(run.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    results = [r["results"] for r in reports if "results" in r]
    assert results, f"checkov scanned nothing:\n{run.stdout[:2000]}\n{run.stderr[-2000:]}"
    failed = [
        f"{c['check_id']} {c['resource']} ({c['file_path']}): {c['check_name']}"
        for r in results
        for c in r.get("failed_checks", [])
    ]
    assert not failed, "checkov failed checks:\n" + "\n".join(failed)
    assert not [e for r in results for e in r.get("parsing_errors", [])]
    assert all(
        c["check_result"].get("suppress_comment") for r in results for c in r["skipped_checks"]
    )
    # Both modules were scanned (GCP too), with GCP checks among
    # those that passed (examples/gcp holds only a module call: no resource).
    checked = [c for r in results for c in (*r["passed_checks"], *r["failed_checks"])]
    for where in ("/modules/aws/", "/modules/gcp/"):
        assert any(where in c["file_path"] for c in checked), f"checkov scanned no {where}"
    assert any(c["check_id"].startswith(("CKV_GCP_", "CKV2_GCP_")) for c in checked)


# -- the provider constraint ---------------------------------------------------

# What hashicorp/aws 6.0.0 removed or deprecated among the arguments of the
# types the module uses (its changelog), which the constraint's "< 7.0"
# relies on staying out of the files.
_GONE_IN_AWS_6 = {
    r"\binference_accelerator\b": "aws_ecs_task_definition: removed (Elastic Inference ended)",
    r"\bdata\.aws_region\.\w+\.name\b": "data.aws_region: `name` deprecated (use `id`)",
}
_AWS_CONSTRAINT = re.compile(r'source\s*=\s*"hashicorp/aws"(?:\s|#[^\n]*)*version\s*=\s*"([^"]+)"')


def _admits(constraint: str, version: str) -> bool:
    """Terraform's ``>=``/``<`` constraint list, enough for the one used here."""

    def key(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in v.split("."))

    ops = {">=": lambda a, b: a >= b, "<": lambda a, b: a < b}
    for part in constraint.split(","):
        op, _, bound = part.strip().partition(" ")
        n = len(key(bound))
        if not ops[op](key(version)[:n], key(bound)):
            return False
    return True


def test_aws_configs_use_nothing_provider_6_removed() -> None:
    hits = [
        f"{path.relative_to(TF_ROOT)}: {why}"
        for path in TF_ROOT.rglob("*.tf")
        for pattern, why in _GONE_IN_AWS_6.items()
        if re.search(pattern, path.read_text())
    ]
    assert hits == []


def test_aws_constraint_admits_the_validated_release_and_6x_in_module_and_example() -> None:
    found = {
        path.relative_to(TF_ROOT).as_posix(): m.group(1)
        for path in TF_ROOT.rglob("*.tf")
        for m in _AWS_CONSTRAINT.finditer(path.read_text())
    }
    assert set(found) >= {"modules/aws/versions.tf", "examples/aws/main.tf"}
    assert len(set(found.values())) == 1, found  # the example follows the module
    constraint = next(iter(found.values()))
    assert _admits(constraint, AWS_PROVIDER_VERSION)  # the release validated here
    assert _admits(constraint, "6.0.0") and not _admits(constraint, "7.0.0")
    assert not _admits(constraint, "5.99.0")
