# The daemon's configuration in Secret Manager.
#
# How the daemon finds it: the VM's unit (runtime.tf) starts the container
# with the entrypoint fetch_config.py, which reads the latest version of this
# secret with the VM's service account (metadata server token, Secret
# Manager REST), writes it to /run/spotfolio/config.yaml (a tmpfs, mode
# 0600) and execs `spotfolio daemon --config /run/spotfolio/config.yaml`.
# The daemon itself makes no Secret Manager call. The YAML holds no password
# (postgres uses IAM database authentication) but maps the project's zones,
# templates and service accounts, so it is kept out of instance metadata.

locals {
  # markets.gcp.settings.GcpProviderSettings without owner (the
  # composition root passes the daemon's owner beside these).
  provider_options = merge(
    { project = var.project, zones = sort(var.zones) },
    { for k, v in var.launch : k => v if v != null },
  )

  market_options = merge(
    { regions = join(",", sort(distinct([for z in var.zones : join("-", slice(split("-", z), 0, 2))]))) },
    var.market_options,
    { project = var.project },
  )

  # The IAM database user of a service account is its email without
  # ".gserviceaccount.com"; the proxy on 127.0.0.1 logs it in (no password).
  db_user   = trimsuffix(google_service_account.daemon.email, ".gserviceaccount.com")
  store_url = local.sqlite ? "sqlite:///${local.state_dir}/state.db" : "postgresql+psycopg://${urlencode(local.db_user)}@127.0.0.1:5432/spotfolio?sslmode=disable"

  # broker.daemon.config.DaemonConfig fields the module owns (the rest come
  # from var.daemon_settings, whose validation keeps these out of it).
  managed_config = merge(
    {
      owner            = var.owner
      account          = var.project
      store_url        = local.store_url
      market           = "gcp"
      market_options   = local.market_options
      provider         = "gcp"
      provider_options = local.provider_options
      metrics_port     = var.metrics_port
      metrics_addr     = var.metrics_addr
    },
  )
  daemon_config_yaml = yamlencode(merge(var.daemon_settings, local.managed_config))
}

resource "google_secret_manager_secret" "config" {
  project   = var.project
  secret_id = "${var.name}-daemon-config"
  labels    = local.labels

  replication {
    auto {}
  }
}

resource "google_secret_manager_secret_version" "config" {
  secret      = google_secret_manager_secret.config.id
  secret_data = local.daemon_config_yaml
}
