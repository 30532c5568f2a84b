output "queue_url" {
  description = "Notice queue the daemon reads."
  value       = module.spotfolio.queue_url
}

output "config_parameter_name" {
  description = "SSM parameter with the daemon's configuration."
  value       = module.spotfolio.config_parameter_name
}

output "log_group_name" {
  description = "CloudWatch log group of the daemon."
  value       = module.spotfolio.log_group_name
}

output "cluster_name" {
  description = "ECS cluster of the daemon."
  value       = module.spotfolio.cluster_name
}

output "service_name" {
  description = "ECS service of the daemon."
  value       = module.spotfolio.service_name
}

output "task_role_arn" {
  description = "The daemon's least-privilege role."
  value       = module.spotfolio.task_role_arn
}

output "daemon_config_yaml" {
  description = "The configuration the daemon runs with (sensitive: it may hold a hook secret)."
  value       = module.spotfolio.daemon_config_yaml
  sensitive   = true
}
