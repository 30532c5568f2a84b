# The daemon's state store.
#
# sqlite: a zonal persistent disk attached to the VM, formatted on first
# boot and mounted at /var/lib/spotfolio (cloud-init), with a daily snapshot
# schedule. One VM, one writer: SQLite's requirement.
#
# postgres: Cloud SQL PostgreSQL with a private IP only, IAM database
# authentication (the daemon's service account is its user; no password
# exists), reached through the Cloud SQL Auth Proxy on the VM.

resource "google_compute_disk" "state" {
  count = local.sqlite ? 1 : 0

  project = var.project
  zone    = var.zone
  name    = "${var.name}-state"
  type    = "pd-balanced"
  size    = var.state_disk_gb
  labels  = local.labels

  dynamic "disk_encryption_key" {
    for_each = var.kms_key_name == null ? [] : [1]
    content {
      kms_key_self_link = var.kms_key_name
    }
  }
}

resource "google_compute_resource_policy" "state_snapshots" {
  count = local.sqlite ? 1 : 0

  project = var.project
  region  = local.region
  name    = "${var.name}-state-daily"

  snapshot_schedule_policy {
    schedule {
      daily_schedule {
        days_in_cycle = 1
        start_time    = "03:00"
      }
    }
    retention_policy {
      max_retention_days    = 14
      on_source_disk_delete = "KEEP_AUTO_SNAPSHOTS"
    }
    snapshot_properties {
      labels = local.labels
    }
  }
}

resource "google_compute_disk_resource_policy_attachment" "state_snapshots" {
  count = local.sqlite ? 1 : 0

  project = var.project
  zone    = var.zone
  name    = google_compute_resource_policy.state_snapshots[0].name
  disk    = google_compute_disk.state[0].name
}

resource "google_sql_database_instance" "state" {
  count = local.sqlite ? 0 : 1

  #checkov:skip=CKV_GCP_79:The major version is var.db_version (validated POSTGRES_14-17); upgrading is the operator's choice, not a default of this module.
  #checkov:skip=CKV_GCP_6:TLS is required by ssl_mode = ENCRYPTED_ONLY; this check reads only the deprecated require_ssl.
  project             = var.project
  region              = local.region
  name                = "${var.name}-state"
  database_version    = var.db_version
  deletion_protection = var.deletion_protection

  settings {
    tier              = var.db_tier
    availability_type = var.db_high_availability ? "REGIONAL" : "ZONAL"
    user_labels       = local.labels

    ip_configuration {
      ipv4_enabled    = false
      private_network = var.db_private_network
      # TLS required (require_ssl is deprecated in 5.x, gone in 6.x).
      ssl_mode = "ENCRYPTED_ONLY"
    }

    backup_configuration {
      enabled                        = true
      point_in_time_recovery_enabled = true
    }

    # IAM database authentication, and the logging checkov asks for.
    database_flags {
      name  = "cloudsql.iam_authentication"
      value = "on"
    }
    database_flags {
      name  = "log_checkpoints"
      value = "on"
    }
    database_flags {
      name  = "log_connections"
      value = "on"
    }
    database_flags {
      name  = "log_disconnections"
      value = "on"
    }
    database_flags {
      name  = "log_lock_waits"
      value = "on"
    }
    database_flags {
      name  = "log_min_messages"
      value = "error"
    }
    database_flags {
      name  = "log_temp_files"
      value = "0"
    }
    database_flags {
      name  = "log_min_duration_statement"
      value = "-1"
    }
    database_flags {
      name  = "log_min_error_statement"
      value = "error"
    }
    database_flags {
      name  = "log_hostname"
      value = "on"
    }
    database_flags {
      name  = "log_duration"
      value = "on"
    }
    database_flags {
      name  = "log_statement"
      value = "ddl"
    }
    database_flags {
      name  = "cloudsql.enable_pgaudit"
      value = "on"
    }
  }

  lifecycle {
    precondition {
      condition     = var.db_private_network != null
      error_message = "state_backend = postgres needs db_private_network (Cloud SQL gets a private IP only)."
    }
  }
}

resource "google_sql_database" "state" {
  count = local.sqlite ? 0 : 1

  project  = var.project
  instance = google_sql_database_instance.state[0].name
  name     = "spotfolio"
}

resource "google_sql_user" "daemon" {
  count = local.sqlite ? 0 : 1

  project  = var.project
  instance = google_sql_database_instance.state[0].name
  name     = local.db_user
  type     = "CLOUD_IAM_SERVICE_ACCOUNT"
}
