# The Spotfolio provisioning daemon in one GCP project.
#
# Files: main.tf (shared names), iam.tf (the daemon's service account and
# custom roles), config.tf (the configuration in Secret Manager), runtime.tf
# (a Container-Optimized OS VM running the daemon's container), state.tf (a
# persistent disk for SQLite, or Cloud SQL PostgreSQL). README.md says why
# each choice.
#
# No preemption feed is created: the daemon polls the zones' operations for
# compute.instances.preempted itself (markets.gcp.preemption, permissions
# compute.zoneOperations.list/get), so no log sink or Pub/Sub topic is needed.

locals {
  # markets.gcp.labels.owner_prefix(owner): every VM the daemon launches is
  # named "sf-<first 8 hex of sha256("owner" 0x1f owner)>-...". IAM cannot
  # test labels, so deletion is conditioned on this name prefix (iam.tf).
  owner_prefix = "sf-${substr(sha256("owner\u001f${var.owner}"), 0, 8)}-"

  # The region of the daemon's own VM (and Cloud SQL): its zone minus "-x".
  region = join("-", slice(split("-", var.zone), 0, 2))

  sqlite = var.state_backend == "sqlite"

  # Paths on the VM and in the container. The container's root file system
  # is read-only; the configuration is written to a tmpfs.
  run_dir     = "/run/spotfolio"
  state_dir   = "/var/lib/spotfolio"
  config_path = "${local.run_dir}/config.yaml"

  labels = merge(var.labels, { "spotfolio-deployment" = var.name })
}
