# The daemon's IAM: what the code calls and nothing else.
#
# data.aws_iam_policy_document.daemon holds exactly the AWS API calls the
# daemon makes (markets.aws.sdk.AWS_MARKET_API_CALLS and
# AWS_PROVIDER_API_CALLS), the permission EC2 checks for tags on create
# (AWS_PROVIDER_IMPLIED_PERMISSIONS: ec2:CreateTags), kms:Decrypt for
# reading the CMK-encrypted queue, and iam:PassRole for the instance roles
# named in var.instance_role_arns. tests/terraform/test_policy.py compares the
# actions below with that manifest; change both together.
#
# The task's other permissions are not calls of the code and live apart: EFS
# mount/write for the SQLite file (data.aws_iam_policy_document.state) and
# what ECS itself needs to start the task (the execution role: image pull,
# log writes, the configuration parameters, the database secret).

locals {
  arn_ec2 = "arn:${local.partition}:ec2"

  # Launch resources that can be narrowed from var.launch: the subnets and
  # security groups named there, and launch templates named by id. A region
  # whose launch settings leave one open (default VPC subnets, a template by
  # name) gets every resource of that type in this account and region.
  launch_subnet_arns = flatten([for r, l in var.launch :
    length(l.subnets) > 0
    ? [for s in values(l.subnets) : "${local.arn_ec2}:${r}:${local.account_id}:subnet/${s}"]
    : ["${local.arn_ec2}:${r}:${local.account_id}:subnet/*"]
  ])
  launch_security_group_arns = flatten([for r, l in var.launch :
    length(l.security_group_ids) > 0
    ? [for g in l.security_group_ids : "${local.arn_ec2}:${r}:${local.account_id}:security-group/${g}"]
    : ["${local.arn_ec2}:${r}:${local.account_id}:security-group/*"]
  ])
  launch_template_arns = [for r, l in var.launch :
    "${local.arn_ec2}:${r}:${local.account_id}:launch-template/${coalesce(l.launch_template_id, "*")}"
    if l.image_id == null
  ]
  launch_untagged_arns = concat(
    local.launch_subnet_arns,
    local.launch_security_group_arns,
    local.launch_template_arns,
    # Public and shared AMIs and their snapshots belong to other accounts.
    [for r in local.launch_regions : "${local.arn_ec2}:${r}::image/*"],
    [for r in local.launch_regions : "${local.arn_ec2}:${r}::snapshot/*"],
    # The primary network interface RunInstances creates, and the one-time
    # spot request a spot launch creates (neither is tagged by us).
    [for r in local.launch_regions : "${local.arn_ec2}:${r}:${local.account_id}:network-interface/*"],
    [for r in local.launch_regions : "${local.arn_ec2}:${r}:${local.account_id}:spot-instances-request/*"],
    # A held Capacity Block or ODCR an on-demand launch targets (use_reservations).
    [for r in local.launch_regions : "${local.arn_ec2}:${r}:${local.account_id}:capacity-reservation/*"],
    var.launch_extra_resource_arns,
  )
  # What RunInstances creates and tags: instances and their volumes.
  launch_tagged_arns = flatten([for r in local.launch_regions : [
    "${local.arn_ec2}:${r}:${local.account_id}:instance/*",
    "${local.arn_ec2}:${r}:${local.account_id}:volume/*",
  ]])
  instance_arns = [for r in local.launch_regions : "${local.arn_ec2}:${r}:${local.account_id}:instance/*"]
}

# -- the daemon's own policy: the calls the code makes ---------------------------

data "aws_iam_policy_document" "daemon" {
  # markets.aws market: read-only, and EC2 describes cannot be narrowed to
  # resources; they are narrowed to the regions the daemon works in.
  statement {
    sid = "ReadMarket"
    actions = [
      "ec2:DescribeAvailabilityZones",
      "ec2:DescribeInstanceTypeOfferings",
      "ec2:DescribeInstanceTypes",
      "ec2:DescribeReservedInstancesOfferings",
      "ec2:DescribeSpotPriceHistory",
      "ec2:GetSpotPlacementScores",
    ]
    resources = ["*"]
    condition {
      test     = "StringEquals"
      variable = "aws:RequestedRegion"
      values   = local.api_regions
    }
  }

  statement {
    sid       = "ReadPrices"
    actions   = ["pricing:GetProducts"]
    resources = ["*"]
    condition {
      test     = "StringEquals"
      variable = "aws:RequestedRegion"
      values   = [local.pricing_region]
    }
  }

  # markets.aws quotas: the EC2 vCPU limits a plan keeps to (read-only;
  # Service Quotas has no resource-level permission for a quota read
  # narrower than its ARN, which names the region: narrowed by region).
  statement {
    sid       = "ReadQuotas"
    actions   = ["servicequotas:GetServiceQuota"]
    resources = ["*"]
    condition {
      test     = "StringEquals"
      variable = "aws:RequestedRegion"
      values   = local.api_regions
    }
  }

  # markets.aws.provider with use_reservations: the held Capacity Blocks and
  # ODCRs to launch into (read-only; describes take no resource-level
  # permission: narrowed to the launch regions).
  statement {
    sid       = "ReadReservations"
    actions   = ["ec2:DescribeCapacityReservations"]
    resources = ["*"]
    condition {
      test     = "StringEquals"
      variable = "aws:RequestedRegion"
      values   = local.launch_regions
    }
  }

  # markets.aws commitments: what the account already owns (read-only).
  # DescribeReservedInstances has no resource-level permissions; it is granted
  # only in the regions the daemon works in.
  statement {
    sid       = "ReadReservedInstances"
    actions   = ["ec2:DescribeReservedInstances"]
    resources = ["*"]
    condition {
      test     = "StringEquals"
      variable = "aws:RequestedRegion"
      values   = local.api_regions
    }
  }

  # The Savings Plans API is global (no region to narrow it to), but both
  # reads take the savingsplan resource type (Service Authorization
  # Reference, "Actions defined by AWS Savings Plans"): this account's plans.
  statement {
    sid = "ReadSavingsPlans"
    actions = [
      "savingsplans:DescribeSavingsPlans",
      "savingsplans:DescribeSavingsPlanRates",
    ]
    resources = ["arn:${local.partition}:savingsplans::${local.account_id}:savingsplan/*"]
  }

  # markets.signals.cloudwatch: a serving workload's live demand
  # (demand_metric, source: cloudwatch). GetMetricData has no resource-level
  # permissions; it is granted only in the regions named.
  dynamic "statement" {
    for_each = length(var.demand_metric_regions) > 0 ? [1] : []
    content {
      sid       = "ReadDemandMetrics"
      actions   = ["cloudwatch:GetMetricData"]
      resources = ["*"]
      condition {
        test     = "StringEquals"
        variable = "aws:RequestedRegion"
        values   = var.demand_metric_regions
      }
    }
  }

  # markets.aws provider: list the fleet by tag, look up launch keys, check
  # ownership before terminating.
  statement {
    sid       = "ReadFleet"
    actions   = ["ec2:DescribeInstances"]
    resources = ["*"]
    condition {
      test     = "StringEquals"
      variable = "aws:RequestedRegion"
      values   = local.launch_regions
    }
  }

  # Launch only instances (and volumes) that carry our owner tag from the
  # moment they exist: RunInstances without it is denied.
  statement {
    sid       = "LaunchOnlyOwnerTagged"
    actions   = ["ec2:RunInstances"]
    resources = local.launch_tagged_arns
    condition {
      test     = "StringEquals"
      variable = "aws:RequestTag/${local.owner_tag}"
      values   = [var.owner]
    }
  }

  # The other resources a launch uses or creates without our tags.
  statement {
    sid       = "LaunchWithResources"
    actions   = ["ec2:RunInstances"]
    resources = local.launch_untagged_arns
  }

  # TagSpecifications of RunInstances are authorised as CreateTags; tagging
  # anything outside a launch is not allowed.
  statement {
    sid       = "TagOnLaunchOnly"
    actions   = ["ec2:CreateTags"]
    resources = local.launch_tagged_arns
    condition {
      test     = "StringEquals"
      variable = "ec2:CreateAction"
      values   = ["RunInstances"]
    }
  }

  statement {
    sid       = "TerminateOnlyOwned"
    actions   = ["ec2:TerminateInstances"]
    resources = local.instance_arns
    condition {
      test     = "StringEquals"
      variable = "ec2:ResourceTag/${local.owner_tag}"
      values   = [var.owner]
    }
  }

  # markets.aws.notices: receive and delete on this queue only.
  statement {
    sid       = "ReadNotices"
    actions   = ["sqs:DeleteMessage", "sqs:ReceiveMessage"]
    resources = [aws_sqs_queue.notices.arn]
  }

  # The queue is encrypted with the module's key: SQS decrypts for the
  # reader on receive.
  statement {
    sid       = "DecryptNotices"
    actions   = ["kms:Decrypt"]
    resources = [aws_kms_key.this.arn]
    condition {
      test     = "StringEquals"
      variable = "kms:ViaService"
      values   = ["sqs.${local.region}.amazonaws.com"]
    }
  }

  # Secret references in hook settings ({ssm: ...}, {secretsmanager: ...}):
  # read at hook time, only the parameters and secrets named here.
  dynamic "statement" {
    for_each = length(local.secret_parameter_arns) > 0 ? [1] : []
    content {
      sid       = "ReadHookParameters"
      actions   = ["ssm:GetParameter"]
      resources = local.secret_parameter_arns
    }
  }

  dynamic "statement" {
    for_each = length(local.secret_manager_arns) > 0 ? [1] : []
    content {
      sid       = "ReadHookSecrets"
      actions   = ["secretsmanager:GetSecretValue"]
      resources = local.secret_manager_arns
    }
  }

  # An instance profile in the launch settings (or the launch template)
  # passes its role to EC2.
  dynamic "statement" {
    for_each = length(var.instance_role_arns) > 0 ? [1] : []
    content {
      sid       = "PassInstanceRoles"
      actions   = ["iam:PassRole"]
      resources = var.instance_role_arns
      condition {
        test     = "StringEquals"
        variable = "iam:PassedToService"
        values   = ["ec2.amazonaws.com"]
      }
    }
  }
}

data "aws_iam_policy_document" "task_trust" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["ecs-tasks.amazonaws.com"]
    }
    # Only tasks of this account's ECS (confused-deputy guard).
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }
    condition {
      test     = "ArnLike"
      variable = "aws:SourceArn"
      values   = ["arn:${local.partition}:ecs:${local.region}:${local.account_id}:*"]
    }
  }
}

resource "aws_iam_role" "daemon" {
  name                 = "${var.name}-daemon"
  description          = "Spotfolio ${var.name}: the daemon's task role (market reads, tagged launches, owned terminations, its notice queue)"
  assume_role_policy   = data.aws_iam_policy_document.task_trust.json
  max_session_duration = 3600
  tags                 = local.tags
}

resource "aws_iam_role_policy" "daemon" {
  name   = "calls"
  role   = aws_iam_role.daemon.id
  policy = data.aws_iam_policy_document.daemon.json
}

# -- the SQLite file on EFS (not a call of the code: the mount) ------------------

data "aws_iam_policy_document" "state" {
  count = local.sqlite ? 1 : 0

  statement {
    sid       = "MountStateThroughAccessPoint"
    actions   = ["elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"]
    resources = [aws_efs_file_system.state[0].arn]
    condition {
      test     = "StringEquals"
      variable = "elasticfilesystem:AccessPointArn"
      values   = [aws_efs_access_point.state[0].arn]
    }
  }
}

resource "aws_iam_role_policy" "state" {
  count = local.sqlite ? 1 : 0

  name   = "state-efs"
  role   = aws_iam_role.daemon.id
  policy = data.aws_iam_policy_document.state[0].json
}

# -- the execution role: what ECS does to start the task -------------------------

locals {
  secret_parameter_arns = [for a in var.secret_arns : a if can(regex("^arn:aws[a-z-]*:ssm:", a))]
  secret_manager_arns   = [for a in var.secret_arns : a if can(regex("^arn:aws[a-z-]*:secretsmanager:", a))]
  # An image in ECR (any account's) gets pull rights on its repository only.
  ecr_image = try(regex("^([0-9]{12})\\.dkr\\.ecr\\.([a-z0-9-]+)\\.amazonaws\\.com(?:\\.cn)?/([^:@]+)", var.image), null)
  ecr_repository_arn = local.ecr_image == null ? null : (
    "arn:${local.partition}:ecr:${local.ecr_image[1]}:${local.ecr_image[0]}:repository/${local.ecr_image[2]}"
  )
  config_parameter_arns = concat(
    [aws_ssm_parameter.config.arn],
    [for p in aws_ssm_parameter.workloads : p.arn],
  )
}

data "aws_iam_policy_document" "execution" {
  statement {
    sid       = "WriteDaemonLog"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.daemon.arn}:*"]
  }

  statement {
    sid       = "ReadConfiguration"
    actions   = ["ssm:GetParameters"]
    resources = local.config_parameter_arns
  }

  statement {
    sid       = "DecryptConfiguration"
    actions   = ["kms:Decrypt"]
    resources = [aws_kms_key.this.arn]
    condition {
      test     = "StringEquals"
      variable = "kms:ViaService"
      values = [
        "ssm.${local.region}.amazonaws.com",
        "secretsmanager.${local.region}.amazonaws.com",
      ]
    }
  }

  dynamic "statement" {
    for_each = local.sqlite ? [] : [1]
    content {
      sid       = "ReadDatabasePassword"
      actions   = ["secretsmanager:GetSecretValue"]
      resources = [aws_db_instance.state[0].master_user_secret[0].secret_arn]
    }
  }

  dynamic "statement" {
    for_each = local.ecr_repository_arn == null ? [] : [1]
    content {
      sid       = "PullImage"
      actions   = ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"]
      resources = [local.ecr_repository_arn]
    }
  }

  dynamic "statement" {
    for_each = local.ecr_repository_arn == null ? [] : [1]
    content {
      # Not resource-scoped by AWS: it returns a registry login token.
      sid       = "LogInToEcr"
      actions   = ["ecr:GetAuthorizationToken"]
      resources = ["*"]
    }
  }
}

resource "aws_iam_role" "execution" {
  name                 = "${var.name}-daemon-exec"
  description          = "Spotfolio ${var.name}: ECS task execution (image pull, logs, configuration)"
  assume_role_policy   = data.aws_iam_policy_document.task_trust.json
  max_session_duration = 3600
  tags                 = local.tags
}

resource "aws_iam_role_policy" "execution" {
  name   = "start-task"
  role   = aws_iam_role.execution.id
  policy = data.aws_iam_policy_document.execution.json
}
