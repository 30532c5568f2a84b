"""The Terraform deployment (terraform/): format, validity, checkov, and a
daemon IAM policy that grants exactly the AWS calls the code makes.

What runs where:

- ``terraform fmt -check``, ``terraform init -backend=false -plugin-dir=DIR``
  + ``terraform validate`` for every module and example, and the module's own
  ``terraform test`` (a mocked AWS provider): need the ``terraform`` binary
  and a plugin directory holding registry.terraform.io/hashicorp/aws
  {AWS_PROVIDER_VERSION} (the registry is out of reach). DIR is
  ``$SPOTFOLIO_TF_PLUGIN_DIR``, else the first of ``PLUGIN_DIR_CANDIDATES``
  that has the provider. Init runs in a temporary copy of terraform/, so the
  work tree gets no ``.terraform``.
- checkov: ``$CHECKOV_BIN`` (``.ci/run`` installs it in a venv of its own),
  else ``checkov`` on PATH.
- The policy checks read iam.tf as text (a small HCL scanner below) and need
  nothing installed: the daemon's policy statements must list exactly
  ``markets.aws.sdk``'s manifest (kept honest against the code by
  tests/test_aws_market.py and tests/test_aws_provider.py) plus the
  permissions those calls imply.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from broker.cli.daemon import daemon_command
from broker.daemon_config import DaemonConfig, load_daemon_config
from markets.aws.launch import RegionLaunch
from markets.aws.notices import DEFAULT_VISIBILITY_TIMEOUT_S, DETAIL_TYPES, EVENT_SOURCE
from markets.aws.options import REGION_PATTERN, parse_names
from markets.aws.provider_config import AwsProviderSettings, settings_from_options
from markets.aws.sdk import (
    AWS_API_CALLS,
    AWS_MARKET_API_CALLS,
    AWS_PROVIDER_IMPLIED_PERMISSIONS,
    PRICING_REGION,
)
from markets.fleet import OWNER_TAG

ROOT = Path(__file__).resolve().parents[1]
TF_ROOT = ROOT / "terraform"
MODULE = TF_ROOT / "modules" / "aws"
AWS_PROVIDER_VERSION = "5.100.0"
PLUGIN_DIR_CANDIDATES = (
    Path("/opt/tf-plugins"),
    Path.home() / ".terraform.d" / "plugins",
    Path.home() / ".local" / "share" / "terraform" / "plugins",
    Path("/usr/local/share/terraform/plugins"),
    Path("/usr/share/terraform/plugins"),
)
# Permissions in the daemon's policy that no SDK call is named after, each
# with why: SQS decrypts a CMK-encrypted message for its reader with the
# reader's kms:Decrypt; a launch with an instance profile passes its role.
DEPLOYMENT_PERMISSIONS = {"kms:Decrypt", "iam:PassRole"}

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


def _config_dirs() -> list[str]:
    """Every module and example (a directory under modules/ or examples/
    with .tf files)."""
    dirs = {
        p.parent.relative_to(TF_ROOT).as_posix()
        for top in ("modules", "examples")
        for p in (TF_ROOT / top).glob("*/*.tf")
    }
    return sorted(dirs)


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
    assert {"modules/aws", "examples/aws"} <= set(_config_dirs())


def test_terraform_files_are_formatted() -> None:
    fmt = _run([_terraform(), "fmt", "-check", "-recursive", "-diff", str(TF_ROOT)], ROOT)
    assert fmt.returncode == 0, f"terraform fmt -check -recursive terraform/:\n{fmt.stdout}"


@pytest.mark.slow
@pytest.mark.parametrize("rel", _config_dirs())
def test_validates_offline(tf_copy: Path, rel: str) -> None:
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
    cfg = load_daemon_config(path)
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
    env = {"PATH": os.environ["PATH"], "SPOTFOLIO_CONFIG_YAML": config_text,
           "SPOTFOLIO_WORKLOADS_YAML": "workloads: []"}  # fmt: skip
    stand_in = [sys.executable, "-c", "import os, sys; print(sorted(os.environ), sys.argv[1:])"]
    ran = subprocess.run(
        [shell, flag, script.replace("/run/spotfolio", str(tmp_path)), argv0, *stand_in, "ok"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
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


# -- a small HCL scanner (enough for terraform fmt'ed blocks) --------------------


def _end_of_string(text: str, i: int) -> int:
    """Index after the string opening at text[i] == '"' (templates nest)."""
    i += 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == '"':
            return i + 1
        elif text.startswith(("${", "%{"), i):
            i = _end_of_block(text, i + 1)
        else:
            i += 1
    raise ValueError("unterminated string")


def _end_of_block(text: str, i: int) -> int:
    """Index after the brace/bracket group opening at text[i]."""
    close = {"{": "}", "[": "]", "(": ")"}
    stack = [close[text[i]]]
    i += 1
    while stack:
        c = text[i]
        if c == '"':
            i = _end_of_string(text, i)
            continue
        if c == "#":
            i = text.index("\n", i)
        elif c in close:
            stack.append(close[c])
        elif c == stack[-1]:
            stack.pop()
        i += 1
    return i


def _blocks(text: str, header: str) -> list[str]:
    """Bodies of the blocks whose header matches ``header`` (a regex up to,
    not including, the opening brace), at any depth."""
    out = []
    for m in re.finditer(header + r"\s*\{", text):
        start = m.end() - 1
        out.append(text[start + 1 : _end_of_block(text, start) - 1])
    return out


def _top_level(body: str, header: str) -> list[str]:
    """Blocks of ``body`` matching ``header`` at its top level only."""
    found, i = [], 0
    pattern = re.compile(r"\s*(" + header + r")\s*\{")
    while i < len(body):
        m = pattern.match(body, i)
        if m:
            start = m.end() - 1
            end = _end_of_block(body, start)
            found.append(body[start + 1 : end - 1])
            i = end
        elif body[i] == '"':
            i = _end_of_string(body, i)
        elif body[i] == "#":
            i = body.find("\n", i) % (len(body) + 1) + 1
        elif body[i] in "{[(":
            i = _end_of_block(body, i)
        else:
            i += 1
    return found


def _attr(body: str, name: str) -> str:
    """The expression assigned to ``name``: up to the end of its line, or of
    the brackets it opens there."""
    m = re.search(rf"^[ \t]*{name}[ \t]*=[ \t]*", body, re.M)
    assert m, f"no {name} in:\n{body}"
    i = m.end()
    while i < len(body) and body[i] != "\n":
        if body[i] == '"':
            i = _end_of_string(body, i)
        elif body[i] in "{[(":
            i = _end_of_block(body, i)
        elif body[i] == "#":
            break
        else:
            i += 1
    return body[m.end() : i].strip()


def _strings(expr: str) -> list[str]:
    return re.findall(r'"([^"$]*)"', expr)


@dataclass(frozen=True)
class Statement:
    """One statement of an aws_iam_policy_document, as written in iam.tf."""

    sid: str
    actions: frozenset[str]
    resources: str  # the expression, as text
    conditions: tuple[tuple[str, str, str], ...]  # (test, variable, values expression)
    for_each: str | None  # a dynamic statement's for_each expression


def _statements(doc: str) -> list[Statement]:
    stmts = []
    for body in _top_level(doc, r'statement|dynamic\s+"statement"'):
        dynamic = _top_level(body, "content")
        inner = dynamic[0] if dynamic else body
        conditions = tuple(
            (_attr(c, "test").strip('"'), _attr(c, "variable").strip('"'), _attr(c, "values"))
            for c in _top_level(inner, "condition")
        )
        stmts.append(
            Statement(
                sid=_attr(inner, "sid").strip('"'),
                actions=frozenset(_strings(_attr(inner, "actions"))),
                resources=_attr(inner, "resources"),
                conditions=conditions,
                for_each=_attr(body, "for_each") if dynamic else None,
            )
        )
    return stmts


def _policy(name: str) -> list[Statement]:
    (doc,) = _blocks(
        (MODULE / "iam.tf").read_text(), rf'data\s+"aws_iam_policy_document"\s+"{name}"'
    )
    return _statements(doc)


def _actions(stmts: list[Statement]) -> set[str]:
    return {a for s in stmts for a in s.actions}


def _with(stmts: list[Statement], action: str) -> list[Statement]:
    found = [s for s in stmts if action in s.actions]
    assert found, f"no statement grants {action}"
    return found


# -- the daemon's policy is the code's calls ------------------------------------


def test_daemon_policy_grants_exactly_the_calls_the_code_makes() -> None:
    stmts = _policy("daemon")
    granted = _actions(stmts)
    expected = AWS_API_CALLS | AWS_PROVIDER_IMPLIED_PERMISSIONS | DEPLOYMENT_PERMISSIONS
    assert granted == expected, (
        f"missing: {sorted(expected - granted)}, not called: {sorted(granted - expected)}"
    )
    assert not [a for a in granted if "*" in a], "no wildcard actions"
    market = _actions([s for s in stmts if s.sid in ("ReadMarket", "ReadPrices")])
    assert market == AWS_MARKET_API_CALLS


def test_launches_need_the_owner_tag_and_terminations_our_tag() -> None:
    stmts = _policy("daemon")
    launches = _with(stmts, "ec2:RunInstances")
    # Instances and volumes: only with our owner tag in the request.
    (tagged,) = [s for s in launches if s.resources == "local.launch_tagged_arns"]
    assert tagged.conditions == (
        ("StringEquals", "aws:RequestTag/${local.owner_tag}", "[var.owner]"),
    )
    # Everything else a launch touches: never an instance or a volume.
    assert [s.resources for s in launches if s is not tagged] == ["local.launch_untagged_arns"]
    locals_blocks = _blocks((MODULE / "iam.tf").read_text(), r"locals")
    untagged = _attr(locals_blocks[0], "launch_untagged_arns")
    assert ":instance/" not in untagged and ":volume/" not in untagged
    assert "var.launch_extra_resource_arns" in untagged  # whose validation refuses both
    (terminate,) = _with(stmts, "ec2:TerminateInstances")
    assert terminate.conditions == (
        ("StringEquals", "ec2:ResourceTag/${local.owner_tag}", "[var.owner]"),
    )
    (tag,) = _with(stmts, "ec2:CreateTags")
    assert tag.conditions == (("StringEquals", "ec2:CreateAction", '["RunInstances"]'),)
    assert tag.resources == "local.launch_tagged_arns"


def test_queue_key_and_role_grants_are_narrow() -> None:
    stmts = _policy("daemon")
    for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage"):
        (s,) = _with(stmts, action)
        assert s.resources == "[aws_sqs_queue.notices.arn]"
    (decrypt,) = _with(stmts, "kms:Decrypt")
    assert decrypt.resources == "[aws_kms_key.this.arn]"
    assert decrypt.conditions == (
        ("StringEquals", "kms:ViaService", '["sqs.${local.region}.amazonaws.com"]'),
    )
    (pass_role,) = _with(stmts, "iam:PassRole")
    assert pass_role.resources == "var.instance_role_arns"
    assert pass_role.for_each == "length(var.instance_role_arns) > 0 ? [1] : []"
    (prices,) = _with(stmts, "pricing:GetProducts")
    assert prices.conditions == (("StringEquals", "aws:RequestedRegion", "[local.pricing_region]"),)
    main = (MODULE / "main.tf").read_text()
    assert f'pricing_region = "{PRICING_REGION}"' in main
    assert f'owner_tag = "{OWNER_TAG}"' in main


def test_what_ecs_needs_to_start_the_task_stays_off_the_daemons_role() -> None:
    daemon, execution = _actions(_policy("daemon")), _actions(_policy("execution"))
    assert "ssm:GetParameters" in execution
    assert daemon & execution == {"kms:Decrypt"}  # each with its own kms:ViaService
    assert not [a for a in daemon if a.startswith(("ssm:", "secretsmanager:", "logs:", "ecr:"))]


# -- the module agrees with the code it deploys ---------------------------------


def test_event_rules_are_the_notices_the_daemon_reads() -> None:
    events = (MODULE / "events.tf").read_text()
    (types,) = _blocks(events, r"notice_detail_types\s*=")
    assert set(_strings(types)) == set(DETAIL_TYPES)
    assert f'source        = ["{EVENT_SOURCE}"]' in events
    queue = (MODULE / "queue.tf").read_text()
    assert f"visibility_timeout_seconds = {DEFAULT_VISIBILITY_TIMEOUT_S}" in queue


def test_rendered_configuration_uses_fields_the_daemon_knows() -> None:
    ssm = (MODULE / "ssm.tf").read_text()
    (managed,) = _blocks(ssm, r"managed_config = merge\(\s*")
    keys = set(re.findall(r"^[ ]*(\w+)[ ]*=", managed, re.M)) | {"workloads"}
    assert keys <= set(DaemonConfig.model_fields), keys - set(DaemonConfig.model_fields)
    variables = (MODULE / "variables.tf").read_text()
    (settings,) = _blocks(variables, r'variable "daemon_settings"')
    assert set(_strings(_attr(settings, "condition"))) == keys
    (provider,) = _blocks(ssm, r"provider_options =")
    assert set(re.findall(r"^[ ]{4}(\w+)[ ]*=", provider, re.M)) <= set(
        AwsProviderSettings.model_fields
    )
    (launch,) = _blocks(variables, r'variable "launch"')
    attrs = set(re.findall(r"^\s*(\w+)\s*=\s*optional\(", launch, re.M))
    assert attrs == set(RegionLaunch.model_fields)


@pytest.mark.parametrize("rel", _config_dirs())
def test_readme_lists_every_input_and_output(rel: str) -> None:
    where = TF_ROOT / rel
    text = "".join(p.read_text() for p in sorted(where.glob("*.tf")))
    readme = (where / "README.md").read_text()
    for kind in ("variable", "output"):
        names = re.findall(rf'^{kind} "(\w+)"', text, re.M)
        assert names, f"no {kind} in {rel}"
        missing = [n for n in names if f"| `{n}` |" not in readme]
        assert not missing, f"{rel}/README.md does not list {kind}s {missing}"


@pytest.mark.parametrize("rel", _config_dirs())
def test_every_variable_is_typed_and_described(rel: str) -> None:
    text = "".join(p.read_text() for p in sorted((TF_ROOT / rel).glob("*.tf")))
    for name, body in zip(
        re.findall(r'^variable "(\w+)"', text, re.M),
        _blocks(text, r'(?m)^variable "\w+"'),
        strict=True,
    ):
        assert re.search(r"^\s*type\s*=", body, re.M), f"{rel}: variable {name} has no type"
        description = _attr(body, "description")
        assert description.startswith("<<") or len(description.strip('"')) > 10, (
            f"{rel}: variable {name} has no description"
        )
