# The daemon's identity: a service account of its own (never the default
# compute one) holding what the code calls and nothing else.
#
# The two custom roles together hold exactly markets.gcp.sdk.
# GCP_IAM_PERMISSIONS; tests/terraform/test_gcp.py compares them, so change
# both together. They are split because IAM conditions on a project binding
# apply to every permission of the role: list permissions are checked on the
# project, so a name condition would deny them.
#
# Our own VMs: deletion and the two permissions that rewrite a VM
# (setMetadata: its startup script and ssh keys; setLabels: the owner label
# the code trusts) are in one role bound with a condition on the instance
# name. IAM conditions cannot test labels (only resource name, type, service
# and Resource Manager tags), so the condition is our zones and our owner's
# name prefix (local.owner_prefix). Creating a VM checks setMetadata and
# setLabels on the new instance, whose name carries the prefix, so launches
# pass and no other VM of the project can be rewritten. The code's own check
# (markets.gcp.provider reads the spotfolio-owner label before each delete)
# does the rest.

resource "google_service_account" "daemon" {
  project      = var.project
  account_id   = "${var.name}-daemon"
  display_name = "Spotfolio ${var.name} daemon"
  description  = "Spotfolio provisioning daemon: reads Compute Engine offerings, creates and deletes its own Spot/standard VMs."
}

locals {
  daemon_member = "serviceAccount:${google_service_account.daemon.email}"

  # markets.gcp.sdk.GCP_IAM_PERMISSIONS, minus what acts on one VM (below).
  daemon_permissions = [
    "compute.acceleratorTypes.list",
    "compute.commitments.list",
    "compute.disks.create",
    "compute.images.useReadOnly",
    "compute.instanceTemplates.useReadOnly",
    "compute.instances.create",
    "compute.instances.get",
    "compute.instances.list",
    "compute.machineTypes.list",
    "compute.projects.get",
    "compute.regions.get",
    "compute.subnetworks.use",
    "compute.zoneOperations.get",
    "compute.zoneOperations.list",
    "compute.zones.list",
  ]
  own_vm_permissions = [
    "compute.instances.delete",
    "compute.instances.setLabels",
    "compute.instances.setMetadata",
  ]

  # projects/P/zones/Z/instances/sf-xxxxxxxx-... in one of our zones.
  own_vm_condition = join(" || ", [for z in sort(var.zones) :
    "resource.name.startsWith(\"projects/${var.project}/zones/${z}/instances/${local.owner_prefix}\")"
  ])
}

resource "google_project_iam_custom_role" "daemon" {
  project     = var.project
  role_id     = "${replace(var.name, "-", "_")}_daemon"
  title       = "Spotfolio ${var.name} daemon"
  description = "Market reads, VM launches and the zone operations of preemptions (markets.gcp.sdk.GCP_IAM_PERMISSIONS without delete, setLabels, setMetadata)."
  permissions = local.daemon_permissions
}

# The role_id keeps its name from when the role held delete only: a new id
# would replace the role (and GCP keeps a deleted role's id for weeks).
resource "google_project_iam_custom_role" "own_vms" {
  project     = var.project
  role_id     = "${replace(var.name, "-", "_")}_daemon_delete"
  title       = "Spotfolio ${var.name} daemon: its own VMs"
  description = "compute.instances.delete, setLabels and setMetadata, bound with a condition on the owner's VM name prefix."
  permissions = local.own_vm_permissions
}

moved {
  from = google_project_iam_custom_role.delete
  to   = google_project_iam_custom_role.own_vms
}

resource "google_project_iam_member" "daemon" {
  project = var.project
  role    = google_project_iam_custom_role.daemon.id
  member  = local.daemon_member
}

resource "google_project_iam_member" "own_vms" {
  project = var.project
  role    = google_project_iam_custom_role.own_vms.id
  member  = local.daemon_member

  condition {
    title       = "spotfolio-${var.name}-own-vms"
    description = "Only VMs named with owner ${var.owner}'s prefix ${local.owner_prefix} in the daemon's zones."
    expression  = local.own_vm_condition
  }
}

moved {
  from = google_project_iam_member.delete
  to   = google_project_iam_member.own_vms
}

# -- what the runtime needs (not calls of the code) ---------------------------------

# A VM launched with launch.service_account attaches that account: creating
# it checks iam.serviceAccounts.actAs on that account only (roles/iam.
# serviceAccountUser), bound on the account, not the project.
resource "google_service_account_iam_member" "act_as_vm_account" {
  count = var.launch.service_account == null ? 0 : 1

  service_account_id = "projects/${var.project}/serviceAccounts/${var.launch.service_account}"
  role               = "roles/iam.serviceAccountUser"
  member             = local.daemon_member
}

# The VM's logging agent writes the container's lines to Cloud Logging as
# this account (google-logging-enabled, runtime.tf). Project-level: log
# writes cannot be granted on a narrower resource.
resource "google_project_iam_member" "log_writer" {
  project = var.project
  role    = "roles/logging.logWriter"
  member  = local.daemon_member
}

# The container's entrypoint reads the configuration secret (config.tf).
resource "google_secret_manager_secret_iam_member" "config" {
  project   = var.project
  secret_id = google_secret_manager_secret.config.secret_id
  role      = "roles/secretmanager.secretAccessor"
  member    = local.daemon_member
}

# An image in Artifact Registry: read access on its repository only.
locals {
  artifact_image = try(regex("^([a-z0-9-]+)-docker\\.pkg\\.dev/([^/]+)/([^/]+)/", var.image), null)
}

resource "google_artifact_registry_repository_iam_member" "image" {
  count = local.artifact_image == null ? 0 : 1

  project    = local.artifact_image[1]
  location   = local.artifact_image[0]
  repository = local.artifact_image[2]
  role       = "roles/artifactregistry.reader"
  member     = local.daemon_member
}

# postgres: the Cloud SQL Auth Proxy on the VM connects to this instance
# (cloudsql.instances.connect/get) and logs in as the service account's
# IAM database user (cloudsql.instances.login), both conditioned on the
# instance's name.
resource "google_project_iam_member" "sql" {
  for_each = local.sqlite ? toset([]) : toset(["roles/cloudsql.client", "roles/cloudsql.instanceUser"])

  project = var.project
  role    = each.value
  member  = local.daemon_member

  condition {
    title       = "spotfolio-${var.name}-state-db"
    description = "Only the daemon's own Cloud SQL instance."
    expression  = "resource.name == \"projects/${var.project}/instances/${var.name}-state\""
  }
}
