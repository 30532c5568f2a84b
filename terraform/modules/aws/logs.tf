# The daemon's log group: what the container writes to stdout/stderr (the
# daemon logs one key=value line per action, decision and error), encrypted
# with the module's key (the key policy lets CloudWatch Logs use it for this
# log group only).

resource "aws_cloudwatch_log_group" "daemon" {
  name              = local.log_group_name
  retention_in_days = var.log_retention_days
  kms_key_id        = aws_kms_key.this.arn
  tags              = local.tags
}

# RDS writes the exports it is told to (state.tf) into these groups; made
# here first so they get the retention and the key too (postgres backend).
resource "aws_cloudwatch_log_group" "db" {
  for_each = local.sqlite ? toset([]) : toset(local.db_log_exports)

  name              = "/aws/rds/instance/${var.name}-state/${each.value}"
  retention_in_days = var.log_retention_days
  kms_key_id        = aws_kms_key.this.arn
  tags              = local.tags
}
