"""The Terraform module read as text, against the code it deploys: the
daemon's IAM policy grants exactly the AWS calls the code makes
(``markets.aws.sdk``'s manifest, which tests/unit/markets/aws/test_market.py and
tests/unit/markets/aws/test_provider.py keep equal to the code) plus the permissions those
calls imply, each narrowed as the README says; the event rules, queue and
rendered configuration match the daemon's own constants and models; every
variable is typed, described and listed in its README. Needs nothing
installed (tests/terraform/test_aws.py runs terraform and checkov).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from broker.daemon.config import DaemonConfig
from markets.aws.health import HEALTH_EVENT_PATTERN
from markets.aws.launch import RegionLaunch
from markets.aws.notices import DEFAULT_VISIBILITY_TIMEOUT_S, DETAIL_TYPES, EVENT_SOURCE
from markets.aws.sdk import (
    AWS_API_CALLS,
    AWS_MARKET_API_CALLS,
    AWS_PROVIDER_IMPLIED_PERMISSIONS,
    PRICING_REGION,
)
from markets.aws.settings import AwsProviderSettings
from markets.cloud_fleet import OWNER_TAG
from tests.terraform.hcl import (
    MODULE,
    TF_ROOT,
    actions,
    attr,
    blocks,
    config_dirs,
    policy,
    strings,
    with_action,
)

# Permissions in the daemon's policy that no SDK call is named after, each
# with why: SQS decrypts a CMK-encrypted message for its reader with the
# reader's kms:Decrypt; a launch with an instance profile passes its role.
DEPLOYMENT_PERMISSIONS = {"kms:Decrypt", "iam:PassRole"}


# -- the daemon's policy is the code's calls ------------------------------------


def test_daemon_policy_grants_exactly_the_calls_the_code_makes() -> None:
    stmts = policy("daemon")
    granted = actions(stmts)
    expected = AWS_API_CALLS | AWS_PROVIDER_IMPLIED_PERMISSIONS | DEPLOYMENT_PERMISSIONS
    assert granted == expected, (
        f"missing: {sorted(expected - granted)}, not called: {sorted(granted - expected)}"
    )
    assert not [a for a in granted if "*" in a], "no wildcard actions"
    market = actions([s for s in stmts if s.sid in ("ReadMarket", "ReadPrices")])
    assert market == AWS_MARKET_API_CALLS


def test_launches_need_the_owner_tag_and_terminations_our_tag() -> None:
    stmts = policy("daemon")
    launches = with_action(stmts, "ec2:RunInstances")
    # Instances and volumes: only with our owner tag in the request.
    (tagged,) = [s for s in launches if s.resources == "local.launch_tagged_arns"]
    assert tagged.conditions == (
        ("StringEquals", "aws:RequestTag/${local.owner_tag}", "[var.owner]"),
    )
    # Everything else a launch touches: never an instance or a volume.
    assert [s.resources for s in launches if s is not tagged] == ["local.launch_untagged_arns"]
    locals_blocks = blocks((MODULE / "iam.tf").read_text(), r"locals")
    untagged = attr(locals_blocks[0], "launch_untagged_arns")
    assert ":instance/" not in untagged and ":volume/" not in untagged
    assert "var.launch_extra_resource_arns" in untagged  # whose validation refuses both
    (terminate,) = with_action(stmts, "ec2:TerminateInstances")
    assert terminate.conditions == (
        ("StringEquals", "ec2:ResourceTag/${local.owner_tag}", "[var.owner]"),
    )
    (tag,) = with_action(stmts, "ec2:CreateTags")
    assert tag.conditions == (("StringEquals", "ec2:CreateAction", '["RunInstances"]'),)
    assert tag.resources == "local.launch_tagged_arns"


def test_queue_key_and_role_grants_are_narrow() -> None:
    stmts = policy("daemon")
    for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage"):
        (s,) = with_action(stmts, action)
        assert s.resources == "[aws_sqs_queue.notices.arn]"
    (decrypt,) = with_action(stmts, "kms:Decrypt")
    assert decrypt.resources == "[aws_kms_key.this.arn]"
    assert decrypt.conditions == (
        ("StringEquals", "kms:ViaService", '["sqs.${local.region}.amazonaws.com"]'),
    )
    (pass_role,) = with_action(stmts, "iam:PassRole")
    assert pass_role.resources == "var.instance_role_arns"
    assert pass_role.for_each == "length(var.instance_role_arns) > 0 ? [1] : []"
    (prices,) = with_action(stmts, "pricing:GetProducts")
    assert prices.conditions == (("StringEquals", "aws:RequestedRegion", "[local.pricing_region]"),)
    main = (MODULE / "main.tf").read_text()
    assert f'pricing_region = "{PRICING_REGION}"' in main
    assert f'owner_tag = "{OWNER_TAG}"' in main


def test_what_ecs_needs_to_start_the_task_stays_off_the_daemons_role() -> None:
    stmts = policy("daemon")
    hooks = [s for s in stmts if s.sid in ("ReadHookParameters", "ReadHookSecrets")]
    daemon = actions([s for s in stmts if s not in hooks])
    execution = actions(policy("execution"))
    assert "ssm:GetParameters" in execution
    assert daemon & execution == {"kms:Decrypt"}  # each with its own kms:ViaService
    assert not [a for a in daemon if a.startswith(("ssm:", "secretsmanager:", "logs:", "ecr:"))]
    # the hook secrets' reads are the daemon's own, on secret_arns only
    assert all("secret_arns" not in s.resources and "local.secret_" in s.resources for s in hooks)


# -- the module agrees with the code it deploys ---------------------------------


def test_event_rules_are_the_notices_the_daemon_reads() -> None:
    events = (MODULE / "events.tf").read_text()
    (types,) = blocks(events, r"notice_detail_types\s*=")
    assert set(strings(types)) == set(DETAIL_TYPES)
    assert f'source = ["{EVENT_SOURCE}"]' in events
    queue = (MODULE / "queue.tf").read_text()
    assert f"visibility_timeout_seconds = {DEFAULT_VISIBILITY_TIMEOUT_S}" in queue


def test_health_rule_sends_the_scheduled_changes_the_daemon_reads_to_the_queue() -> None:
    events = (MODULE / "events.tf").read_text()
    (pattern,) = blocks(events, r"health_event_pattern\s*=")
    (detail,) = blocks(pattern, r"detail\s*=")
    want = HEALTH_EVENT_PATTERN
    assert strings(attr(pattern, "source")) == want["source"]
    assert strings(attr(pattern, '"detail-type"')) == want["detail-type"]
    assert isinstance(want["detail"], dict)
    assert {k: strings(attr(detail, k)) for k in want["detail"]} == want["detail"]
    # One of the notice rules (for_each over notice_patterns), so it shares
    # the target (the notice queue) and the queue's and key's SourceArn grants.
    assert "{ scheduled_change = local.health_event_pattern }" in events
    (rule,) = blocks(events, r'resource "aws_cloudwatch_event_rule" "notices"')
    assert attr(rule, "for_each").strip() == "local.notice_patterns"
    (target,) = blocks(events, r'resource "aws_cloudwatch_event_target" "notices"')
    assert attr(target, "for_each").strip() == "aws_cloudwatch_event_rule.notices"
    assert attr(target, "arn").strip() == "aws_sqs_queue.notices.arn"
    every_rule = "[for r in aws_cloudwatch_event_rule.notices : r.arn]"
    for grant in ("queue.tf", "main.tf"):
        assert every_rule in (MODULE / grant).read_text()


def test_rendered_configuration_uses_fields_the_daemon_knows() -> None:
    ssm = (MODULE / "ssm.tf").read_text()
    (managed,) = blocks(ssm, r"managed_config = merge\(\s*")
    keys = set(re.findall(r"^[ ]*(\w+)[ ]*=", managed, re.M)) | {"workloads"}
    assert keys <= set(DaemonConfig.model_fields), keys - set(DaemonConfig.model_fields)
    variables = (MODULE / "variables.tf").read_text()
    (settings,) = blocks(variables, r'variable "daemon_settings"')
    assert set(strings(attr(settings, "condition"))) == keys
    (provider,) = blocks(ssm, r"provider_options =")
    assert set(re.findall(r"^[ ]{4}(\w+)[ ]*=", provider, re.M)) <= set(
        AwsProviderSettings.model_fields
    )
    (launch,) = blocks(variables, r'variable "launch"')
    attrs = set(re.findall(r"^\s*(\w+)\s*=\s*optional\(", launch, re.M))
    assert attrs == set(RegionLaunch.model_fields)


@pytest.mark.parametrize("rel", config_dirs())
def test_readme_lists_every_input_and_output(rel: str) -> None:
    where = TF_ROOT / rel
    text = "".join(p.read_text() for p in sorted(where.glob("*.tf")))
    readme = (where / "README.md").read_text()
    for kind in ("variable", "output"):
        names = re.findall(rf'^{kind} "(\w+)"', text, re.M)
        assert names, f"no {kind} in {rel}"
        missing = [n for n in names if f"| `{n}` |" not in readme]
        assert not missing, f"{rel}/README.md does not list {kind}s {missing}"


@pytest.mark.parametrize("rel", config_dirs())
def test_every_variable_is_typed_and_described(rel: str) -> None:
    text = "".join(p.read_text() for p in sorted((TF_ROOT / rel).glob("*.tf")))
    for name, body in zip(
        re.findall(r'^variable "(\w+)"', text, re.M),
        blocks(text, r'(?m)^variable "\w+"'),
        strict=True,
    ):
        assert re.search(r"^\s*type\s*=", body, re.M), f"{rel}: variable {name} has no type"
        description = attr(body, "description")
        assert description.startswith("<<") or len(description.strip('"')) > 10, (
            f"{rel}: variable {name} has no description"
        )


@pytest.mark.parametrize(
    "outputs",
    sorted(TF_ROOT.glob("*/*/outputs.tf")),
    ids=lambda p: p.parent.name + "/" + p.parent.parent.name,
)
def test_an_output_rendering_the_daemon_config_is_sensitive(outputs: Path) -> None:
    """daemon_settings can carry a literal hook header or signing
    key, so an output of the rendered configuration is marked sensitive."""
    text = outputs.read_text()
    for name, body in zip(
        re.findall(r'^output "(\w+)"', text, re.M),
        blocks(text, r'(?m)^output "\w+"'),
        strict=True,
    ):
        if "daemon_config_yaml" in attr(body, "value"):
            assert attr(body, "sensitive") == "true", f"{outputs}: output {name}"
            assert "no secret" not in attr(body, "description"), f"{outputs}: output {name}"


def test_secret_reads_are_granted_only_on_the_named_arns() -> None:
    stmts = {s.sid: s for s in policy("daemon")}
    for sid, action, kind in (
        ("ReadHookParameters", "ssm:GetParameter", "secret_parameter_arns"),
        ("ReadHookSecrets", "secretsmanager:GetSecretValue", "secret_manager_arns"),
    ):
        s = stmts[sid]
        assert actions([s]) == {action}
        assert s.for_each is not None and kind in s.for_each  # absent when none is named
        assert s.resources.strip() == f"local.{kind}"
    iam = (MODULE / "iam.tf").read_text()
    assert re.search(r"secret_parameter_arns\s*=\s*\[for a in var\.secret_arns", iam)
