# The daemon's state store (broker.daemon.store.store): write-ahead actions, notices
# handled, decisions, plans and the account lease. Losing it loses nothing
# the cloud does not also know (the daemon re-reads its fleet by tags), but
# it is what keeps a notice from being handled twice and a launch from being
# sent twice, so it must outlive the task.
#
# sqlite: one file on EFS (encrypted at rest with the module's key and in
# transit with TLS; mounted through an access point that pins the uid/gid and
# the directory; IAM-authorised: only the daemon's role may mount it). One
# writer at a time is what SQLite on a network file system needs: the ECS
# service runs one task and stops it before starting its replacement, and
# the daemon's lease refuses a second one.
#
# postgres: RDS PostgreSQL, encrypted, private, TLS forced, IAM database
# authentication on, and the master password generated and kept by RDS in
# Secrets Manager (no password variable anywhere).

# -- sqlite on EFS ----------------------------------------------------------------

resource "aws_efs_file_system" "state" {
  count = local.sqlite ? 1 : 0

  creation_token = "${var.name}-state"
  encrypted      = true
  kms_key_id     = aws_kms_key.this.arn
  tags           = merge(local.tags, { Name = "${var.name}-state" })
}

resource "aws_efs_backup_policy" "state" {
  count = local.sqlite ? 1 : 0

  file_system_id = aws_efs_file_system.state[0].id
  backup_policy {
    status = "ENABLED"
  }
}

resource "aws_security_group" "efs" {
  count = local.sqlite ? 1 : 0

  name        = "${var.name}-state-efs"
  description = "Spotfolio ${var.name}: NFS from the daemon's task only"
  vpc_id      = var.vpc_id
  tags        = merge(local.tags, { Name = "${var.name}-state-efs" })
}

resource "aws_vpc_security_group_ingress_rule" "efs_from_daemon" {
  count = local.sqlite ? 1 : 0

  security_group_id            = aws_security_group.efs[0].id
  description                  = "NFS from the daemon's task"
  ip_protocol                  = "tcp"
  from_port                    = 2049
  to_port                      = 2049
  referenced_security_group_id = aws_security_group.daemon.id
}

resource "aws_efs_mount_target" "state" {
  for_each = local.sqlite ? toset(var.subnet_ids) : toset([])

  file_system_id  = aws_efs_file_system.state[0].id
  subnet_id       = each.value
  security_groups = [aws_security_group.efs[0].id]
}

resource "aws_efs_access_point" "state" {
  count = local.sqlite ? 1 : 0

  file_system_id = aws_efs_file_system.state[0].id
  posix_user {
    uid = tonumber(split(":", var.container_user)[0])
    gid = tonumber(split(":", var.container_user)[1])
  }
  root_directory {
    path = "/spotfolio"
    creation_info {
      owner_uid   = tonumber(split(":", var.container_user)[0])
      owner_gid   = tonumber(split(":", var.container_user)[1])
      permissions = "0750"
    }
  }
  tags = merge(local.tags, { Name = "${var.name}-state" })
}

data "aws_iam_policy_document" "efs" {
  count = local.sqlite ? 1 : 0

  statement {
    sid       = "DaemonMountsThroughItsAccessPoint"
    actions   = ["elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"]
    resources = [aws_efs_file_system.state[0].arn]
    principals {
      type        = "AWS"
      identifiers = [aws_iam_role.daemon.arn]
    }
    condition {
      test     = "StringEquals"
      variable = "elasticfilesystem:AccessPointArn"
      values   = [aws_efs_access_point.state[0].arn]
    }
  }

  statement {
    sid       = "DenyWithoutTls"
    effect    = "Deny"
    actions   = ["*"]
    resources = [aws_efs_file_system.state[0].arn]
    principals {
      type        = "*"
      identifiers = ["*"]
    }
    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
}

resource "aws_efs_file_system_policy" "state" {
  count = local.sqlite ? 1 : 0

  file_system_id = aws_efs_file_system.state[0].id
  policy         = data.aws_iam_policy_document.efs[0].json
}

# -- postgres on RDS --------------------------------------------------------------

resource "aws_security_group" "db" {
  count = local.sqlite ? 0 : 1

  name        = "${var.name}-state-db"
  description = "Spotfolio ${var.name}: PostgreSQL from the daemon's task only"
  vpc_id      = var.vpc_id
  tags        = merge(local.tags, { Name = "${var.name}-state-db" })
}

resource "aws_vpc_security_group_ingress_rule" "db_from_daemon" {
  count = local.sqlite ? 0 : 1

  security_group_id            = aws_security_group.db[0].id
  description                  = "PostgreSQL from the daemon's task"
  ip_protocol                  = "tcp"
  from_port                    = 5432
  to_port                      = 5432
  referenced_security_group_id = aws_security_group.daemon.id
}

resource "aws_db_subnet_group" "state" {
  count = local.sqlite ? 0 : 1

  name        = "${var.name}-state"
  description = "Spotfolio ${var.name}: state store subnets"
  subnet_ids  = var.subnet_ids
  tags        = local.tags
}

resource "aws_db_parameter_group" "state" {
  count = local.sqlite ? 0 : 1

  # A prefix: a new engine version creates the new group before the old one goes.
  name_prefix = "${var.name}-state-pg${var.db_engine_version}-"
  family      = "postgres${var.db_engine_version}"
  description = "Spotfolio ${var.name}: TLS only, slow statements logged"

  parameter {
    name  = "rds.force_ssl"
    value = "1"
  }
  parameter {
    name  = "log_min_duration_statement"
    value = "1000"
  }
  parameter {
    name  = "log_connections"
    value = "1"
  }
  parameter {
    name  = "log_disconnections"
    value = "1"
  }
  # checkov CKV2_AWS_30 (query logging); "ddl" logs schema changes, not the
  # daemon's every insert.
  parameter {
    name  = "log_statement"
    value = "ddl"
  }

  lifecycle {
    create_before_destroy = true
  }
  tags = local.tags
}

resource "aws_db_instance" "state" {
  count = local.sqlite ? 0 : 1

  #checkov:skip=CKV_AWS_118:Enhanced monitoring needs a further IAM role with a managed policy; a one-writer state store is watched well enough by CloudWatch's basic RDS metrics and Performance Insights.
  identifier     = "${var.name}-state"
  engine         = "postgres"
  engine_version = var.db_engine_version
  instance_class = var.db_instance_class
  db_name        = "spotfolio"
  username       = var.db_username

  manage_master_user_password         = true
  master_user_secret_kms_key_id       = aws_kms_key.this.arn
  iam_database_authentication_enabled = true

  allocated_storage     = var.db_allocated_storage_gb
  max_allocated_storage = var.db_allocated_storage_gb * 4
  storage_type          = "gp3"
  storage_encrypted     = true
  kms_key_id            = aws_kms_key.this.arn

  db_subnet_group_name   = aws_db_subnet_group.state[0].name
  vpc_security_group_ids = [aws_security_group.db[0].id]
  parameter_group_name   = aws_db_parameter_group.state[0].name
  publicly_accessible    = false
  multi_az               = var.db_multi_az

  backup_retention_period               = var.db_backup_retention_days
  copy_tags_to_snapshot                 = true
  deletion_protection                   = var.deletion_protection
  skip_final_snapshot                   = false
  final_snapshot_identifier             = "${var.name}-state-final"
  auto_minor_version_upgrade            = true
  enabled_cloudwatch_logs_exports       = local.db_log_exports
  performance_insights_enabled          = true
  performance_insights_kms_key_id       = aws_kms_key.this.arn
  performance_insights_retention_period = 7

  # The exports' log groups exist (with retention and the key) before RDS
  # would create them without.
  depends_on = [aws_cloudwatch_log_group.db]
  tags       = local.tags
}
