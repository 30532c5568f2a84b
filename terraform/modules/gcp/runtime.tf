# The daemon's runtime: one small Container-Optimized OS VM whose systemd
# unit runs the daemon's container (README: why a VM and not Cloud Run).
# Logs: COS's logging agent (google-logging-enabled) sends the container's
# stdout/stderr and the journal to Cloud Logging as the VM's service account.

locals {
  config_secret = "${google_secret_manager_secret.config.id}/versions/latest"

  cloud_init = templatefile("${path.module}/cloud-init.yaml.tftpl", {
    image          = var.image
    registry_host  = local.artifact_image == null ? "" : "${local.artifact_image[0]}-docker.pkg.dev"
    container_user = var.container_user
    daemon_command = join(" ", [for a in var.daemon_command : format("'%s'", replace(a, "'", "'\\''"))])
    config_secret  = local.config_secret
    config_path    = local.config_path
    config_sha256  = sha256(local.daemon_config_yaml)
    run_dir        = local.run_dir
    state_dir      = local.state_dir
    sqlite         = local.sqlite
    state_device   = "/dev/disk/by-id/google-state"
    sql_connection = local.sqlite ? "" : google_sql_database_instance.state[0].connection_name
    fetch_config   = file("${path.module}/fetch_config.py")
    # the image's HEALTHCHECK asks the daemon's /readyz on this port, and
    # spotfolio-heal.timer restarts the daemon when it reports unhealthy
    metrics_port = var.metrics_port
    heal_sh      = file("${path.module}/heal.sh")
  })
}

resource "google_compute_instance" "daemon" {
  project      = var.project
  zone         = var.zone
  name         = "${var.name}-daemon"
  machine_type = var.machine_type
  labels       = local.labels
  tags         = ["${var.name}-daemon"]

  # A new configuration or image replaces the VM: cloud-init runs once.
  metadata = {
    user-data                 = local.cloud_init
    google-logging-enabled    = "true"
    google-monitoring-enabled = "true"
    block-project-ssh-keys    = "true"
    enable-oslogin            = "TRUE"
    serial-port-enable        = "FALSE"
    spotfolio-config-sha256   = sha256(local.daemon_config_yaml)
  }

  boot_disk {
    auto_delete       = true
    kms_key_self_link = var.kms_key_name
    initialize_params {
      image = "projects/cos-cloud/global/images/family/cos-stable"
      size  = 20
      type  = "pd-balanced"
    }
  }

  dynamic "attached_disk" {
    for_each = local.sqlite ? [1] : []
    content {
      source      = google_compute_disk.state[0].id
      device_name = "state"
      mode        = "READ_WRITE"
    }
  }

  network_interface {
    # No access_config: no external IP. The subnetwork reaches Google APIs
    # through Private Google Access (or Cloud NAT).
    subnetwork = var.subnetwork
  }

  service_account {
    email  = google_service_account.daemon.email
    scopes = ["cloud-platform"]
  }

  shielded_instance_config {
    enable_secure_boot          = true
    enable_vtpm                 = true
    enable_integrity_monitoring = true
  }

  scheduling {
    # The daemon must run continuously: a standard VM that live-migrates and
    # restarts, never a Spot one.
    provisioning_model  = "STANDARD"
    preemptible         = false
    automatic_restart   = true
    on_host_maintenance = "MIGRATE"
  }

  can_ip_forward            = false
  deletion_protection       = false
  allow_stopping_for_update = true

  depends_on = [
    google_project_iam_member.log_writer,
    google_secret_manager_secret_iam_member.config,
    google_secret_manager_secret_version.config,
  ]
}

# Prometheus scrapes the metrics port from the given ranges only; no rule
# at all without them (the VM has no other ingress).
resource "google_compute_firewall" "metrics" {
  count = var.metrics_port > 0 && length(var.metrics_source_ranges) > 0 ? 1 : 0

  project       = var.project
  name          = "${var.name}-daemon-metrics"
  network       = data.google_compute_subnetwork.daemon.network
  direction     = "INGRESS"
  source_ranges = var.metrics_source_ranges
  target_tags   = ["${var.name}-daemon"]

  allow {
    protocol = "tcp"
    ports    = [tostring(var.metrics_port)]
  }
}

data "google_compute_subnetwork" "daemon" {
  self_link = var.subnetwork
}
