# The Spotfolio provisioning daemon in one AWS account and region.
#
# Files: main.tf (shared names and the KMS key), iam.tf (the daemon's role
# and policy), queue.tf (notice queue and dead letters), events.tf
# (EventBridge rules), ssm.tf (configuration), logs.tf, state.tf (EFS or
# RDS), runtime.tf (ECS Fargate). README.md says why each choice.

data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}
data "aws_region" "current" {}

locals {
  account_id = data.aws_caller_identity.current.account_id
  partition  = data.aws_partition.current.partition
  region     = data.aws_region.current.id # `name`: deprecated in provider 6.x

  # markets.cloud_fleet.OWNER_TAG: the tag every instance the daemon launches
  # carries, and the one IAM conditions launches and terminations on.
  owner_tag = "spotfolio:owner"

  launch_regions = sort(keys(var.launch))
  market_regions = length(var.market_regions) > 0 ? sort(var.market_regions) : (
    length(local.launch_regions) > 0 ? local.launch_regions : [local.region]
  )
  # Every region the daemon's EC2 client talks to.
  api_regions = sort(distinct(concat(local.market_regions, local.launch_regions)))

  # The Price List Query API answers in us-east-1 whatever is priced
  # (markets.aws.sdk.PRICING_REGION).
  pricing_region = "us-east-1"

  sqlite = var.state_backend == "sqlite"

  # Paths inside the container. The entrypoint writes the configuration from
  # SSM into a task-local volume (the root file system is read-only); the
  # SQLite file lives on EFS.
  run_dir       = "/run/spotfolio"
  state_dir     = "/var/lib/spotfolio"
  config_path   = "${local.run_dir}/config.yaml"
  workload_path = "${local.run_dir}/workloads.yaml"

  log_group_name = "/spotfolio/${var.name}/daemon"
  db_log_exports = ["postgresql", "upgrade"]
  # Log groups CloudWatch Logs may encrypt with the module's key.
  log_group_names = concat(
    [local.log_group_name],
    local.sqlite ? [] : [for e in local.db_log_exports : "/aws/rds/instance/${var.name}-state/${e}"],
  )
  parameter_path = "/${var.name}/daemon"

  tags = merge(var.tags, { "spotfolio:deployment" = var.name })
}

# One customer managed key for everything the module stores: the notice
# queues, the log group, the SSM parameters, EFS or RDS and its secret.
# Services that write with it on their own behalf (EventBridge into SQS,
# CloudWatch Logs) are named in the key policy, each scoped to our resources;
# everyone else needs an IAM policy (the account statement enables those).
data "aws_iam_policy_document" "key" {
  # A key policy's "*" resource means this key and nothing else (KMS key
  # policies admit no other resource), and kms:* for the account root is the
  # statement that lets IAM policies grant use of the key at all (AWS KMS
  # Developer Guide, "Default key policy").
  #checkov:skip=CKV_AWS_111:Key policy: resource "*" is this key only; the account statement is KMS's default that delegates to IAM.
  #checkov:skip=CKV_AWS_356:Key policy: "*" is the only resource a key policy can name, and means this key.
  #checkov:skip=CKV_AWS_109:Key policy: administration by the account root is KMS's default and delegates to IAM policies.
  statement {
    sid       = "AccountAdministersTheKey"
    actions   = ["kms:*"]
    resources = ["*"]
    principals {
      type        = "AWS"
      identifiers = ["arn:${local.partition}:iam::${local.account_id}:root"]
    }
  }

  statement {
    sid       = "EventBridgeWritesNotices"
    actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
    resources = ["*"]
    principals {
      type        = "Service"
      identifiers = ["events.amazonaws.com"]
    }
    condition {
      test     = "ArnEquals"
      variable = "aws:SourceArn"
      values   = [for r in aws_cloudwatch_event_rule.notices : r.arn]
    }
  }

  statement {
    sid = "CloudWatchLogsEncryptsOurLogGroups"
    actions = [
      "kms:Decrypt",
      "kms:Describe*",
      "kms:Encrypt",
      "kms:GenerateDataKey*",
      "kms:ReEncrypt*",
    ]
    resources = ["*"]
    principals {
      type        = "Service"
      identifiers = ["logs.${local.region}.amazonaws.com"]
    }
    condition {
      test     = "ArnEquals"
      variable = "kms:EncryptionContext:aws:logs:arn"
      values = [for g in local.log_group_names :
        "arn:${local.partition}:logs:${local.region}:${local.account_id}:log-group:${g}"
      ]
    }
  }
}

resource "aws_kms_key" "this" {
  description             = "Spotfolio ${var.name}: notice queue, logs, configuration and state"
  enable_key_rotation     = true
  deletion_window_in_days = var.kms_deletion_window_days
  policy                  = data.aws_iam_policy_document.key.json
  tags                    = local.tags
}

resource "aws_kms_alias" "this" {
  name          = "alias/${var.name}"
  target_key_id = aws_kms_key.this.key_id
}
