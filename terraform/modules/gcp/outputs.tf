output "service_account_email" {
  description = "The daemon's service account."
  value       = google_service_account.daemon.email
}

output "daemon_role_id" {
  description = "Custom role of the daemon's calls (all but those on one VM: delete, setLabels, setMetadata)."
  value       = google_project_iam_custom_role.daemon.id
}

output "delete_role_id" {
  description = "Custom role holding compute.instances.delete, setLabels and setMetadata, bound with the name-prefix condition."
  value       = google_project_iam_custom_role.own_vms.id
}

output "delete_condition" {
  description = "The IAM condition of the own-VM binding (delete, setLabels, setMetadata), for review."
  value       = local.own_vm_condition
}

output "owner_name_prefix" {
  description = "Name prefix of every VM the daemon launches (markets.gcp.labels.owner_prefix)."
  value       = local.owner_prefix
}

output "instance_name" {
  description = "The daemon's VM."
  value       = google_compute_instance.daemon.name
}

output "instance_zone" {
  description = "Zone of the daemon's VM."
  value       = google_compute_instance.daemon.zone
}

output "config_secret_id" {
  description = "Secret Manager secret holding the configuration."
  value       = google_secret_manager_secret.config.id
}

output "daemon_config_yaml" {
  # daemon_settings can carry a literal hook header or signing key; shown by
  # `terraform output -raw daemon_config_yaml`, not in plans or logs.
  description = "The configuration as rendered (sensitive: daemon_settings may hold a literal secret; use {env|ssm|secretsmanager} references)."
  value       = local.daemon_config_yaml
  sensitive   = true
}

output "state_backend" {
  description = "sqlite or postgres."
  value       = var.state_backend
}

output "state_disk_name" {
  description = "Persistent disk holding the SQLite file (sqlite), or null."
  value       = local.sqlite ? google_compute_disk.state[0].name : null
}

output "db_connection_name" {
  description = "Cloud SQL connection name (postgres), or null."
  value       = local.sqlite ? null : google_sql_database_instance.state[0].connection_name
}

output "db_user" {
  description = "The daemon's IAM database user (postgres), or null."
  value       = local.sqlite ? null : google_sql_user.daemon[0].name
}
