output "service_account_email" {
  description = "The daemon's service account."
  value       = module.spotfolio.service_account_email
}

output "config_secret_id" {
  description = "Secret Manager secret with the daemon's configuration."
  value       = module.spotfolio.config_secret_id
}

output "instance_name" {
  description = "The daemon's VM."
  value       = module.spotfolio.instance_name
}

output "delete_condition" {
  description = "IAM condition limiting the daemon's deletions, label and metadata changes to its own VMs."
  value       = module.spotfolio.delete_condition
}
