output "queue_url" {
  description = "URL of the notice queue (also in the daemon's configuration as provider_options.queue_url)."
  value       = aws_sqs_queue.notices.url
}

output "queue_arn" {
  description = "ARN of the notice queue."
  value       = aws_sqs_queue.notices.arn
}

output "dead_letter_queue_url" {
  description = "URL of the dead-letter queue (notices the daemon could not read, or EventBridge could not deliver)."
  value       = aws_sqs_queue.dead_letters.url
}

output "event_rule_arns" {
  description = "EventBridge rule ARN per notice kind (interruption, rebalance, state_change)."
  value       = { for k, r in aws_cloudwatch_event_rule.notices : k => r.arn }
}

output "kms_key_arn" {
  description = "ARN of the module's customer managed key (queues, logs, parameters, state)."
  value       = aws_kms_key.this.arn
}

output "task_role_arn" {
  description = "ARN of the daemon's task role (the least-privilege policy)."
  value       = aws_iam_role.daemon.arn
}

output "task_role_name" {
  description = "Name of the daemon's task role."
  value       = aws_iam_role.daemon.name
}

output "daemon_policy_json" {
  description = "The daemon's IAM policy document, as attached to its role (for review)."
  value       = data.aws_iam_policy_document.daemon.json
}

output "execution_role_arn" {
  description = "ARN of the ECS task execution role (image pull, log writes, configuration)."
  value       = aws_iam_role.execution.arn
}

output "cluster_name" {
  description = "Name of the ECS cluster."
  value       = aws_ecs_cluster.this.name
}

output "service_name" {
  description = "Name of the ECS service running the daemon."
  value       = aws_ecs_service.daemon.name
}

output "security_group_id" {
  description = "Security group of the daemon's task (allow it in VPC endpoint policies, or a Prometheus' egress)."
  value       = aws_security_group.daemon.id
}

output "log_group_name" {
  description = "CloudWatch log group of the daemon."
  value       = aws_cloudwatch_log_group.daemon.name
}

output "config_parameter_name" {
  description = "SSM parameter holding the daemon's configuration (SecureString, YAML)."
  value       = aws_ssm_parameter.config.name
}

output "workloads_parameter_name" {
  description = "SSM parameter holding the workloads file, or null when var.workloads_yaml is null."
  value       = one(aws_ssm_parameter.workloads[*].name)
}

output "daemon_config_yaml" {
  # daemon_settings can carry a literal hook header or signing key; shown by
  # `terraform output -raw daemon_config_yaml`, not in plans or logs.
  description = "The configuration the daemon runs with, as rendered into SSM (sensitive: daemon_settings may hold a literal secret; use {env|ssm|secretsmanager} references)."
  value       = local.daemon_config_yaml
  sensitive   = true
}

output "state_backend" {
  description = "Where the state lives: sqlite (EFS) or postgres (RDS)."
  value       = var.state_backend
}

output "state_file_system_id" {
  description = "EFS file system of the SQLite state (sqlite backend), else null."
  value       = one(aws_efs_file_system.state[*].id)
}

output "db_endpoint" {
  description = "host:port of the RDS instance (postgres backend), else null."
  value       = one(aws_db_instance.state[*].endpoint)
}

output "db_master_user_secret_arn" {
  description = "Secrets Manager secret RDS keeps the database password in (postgres backend), else null."
  value       = try(aws_db_instance.state[0].master_user_secret[0].secret_arn, null)
}
