# The daemon's configuration in SSM Parameter Store.
#
# How the daemon finds it: the ECS task definition names these parameters as
# container secrets, so ECS (with the execution role, not the daemon's role)
# reads and decrypts them at task start and hands their values to the
# container as SPOTFOLIO_CONFIG_YAML / SPOTFOLIO_WORKLOADS_YAML; the
# entrypoint (runtime.tf) writes them to /run/spotfolio and runs
# `spotfolio daemon --config /run/spotfolio/config.yaml`. The daemon
# itself makes no SSM call and has no SSM permission.
#
# SecureString with the module's key: the configuration holds no password
# (the postgres password reaches the task as PGPASSWORD from Secrets
# Manager), but it maps the account's queue, subnets and launch templates.

locals {
  # Provider settings (markets.aws.settings.AwsProviderSettings): the
  # queue this module made, and per-region launch settings without nulls.
  provider_options = {
    queue_url = aws_sqs_queue.notices.url
    launch = {
      for region, l in var.launch : region => { for k, v in l : k => v if v != null }
    }
  }

  market_options = merge(
    var.market_options,
    { regions = join(",", local.market_regions) },
    length(var.instance_types) > 0 ? { instance_types = join(",", sort(var.instance_types)) } : {},
  )

  # postgresql+psycopg with no password in the URL: libpq reads PGPASSWORD.
  store_url = local.sqlite ? "sqlite:///${local.state_dir}/state.db" : (
    "postgresql+psycopg://${var.db_username}@${aws_db_instance.state[0].endpoint}/spotfolio?sslmode=require"
  )

  # broker.daemon.config.DaemonConfig fields the module owns (the rest come
  # from var.daemon_settings, whose validation keeps these out of it).
  managed_config = merge(
    {
      owner            = var.owner
      account          = local.account_id
      store_url        = local.store_url
      market           = "aws"
      market_options   = local.market_options
      provider         = "aws"
      provider_options = local.provider_options
      metrics_port     = var.metrics_port
      metrics_addr     = var.metrics_addr
    },
    var.workloads_yaml == null ? {} : { workloads = local.workload_path },
  )
  daemon_config_yaml = yamlencode(merge(var.daemon_settings, local.managed_config))
}

resource "aws_ssm_parameter" "config" {
  name        = "${local.parameter_path}/config.yaml"
  description = "Spotfolio ${var.name}: the daemon's configuration (DaemonConfig YAML)"
  type        = "SecureString"
  key_id      = aws_kms_key.this.arn
  value       = local.daemon_config_yaml
  # Standard parameters hold 4 KB; Advanced 8 KB.
  tier = length(local.daemon_config_yaml) > 4096 ? "Advanced" : "Standard"
  tags = local.tags

  lifecycle {
    precondition {
      condition     = length(local.daemon_config_yaml) <= 8192
      error_message = "The daemon's configuration exceeds 8 KB, the limit of an SSM parameter: move large settings (committed, lifecycle) out of daemon_settings."
    }
  }
}

resource "aws_ssm_parameter" "workloads" {
  count = var.workloads_yaml == null ? 0 : 1

  name        = "${local.parameter_path}/workloads.yaml"
  description = "Spotfolio ${var.name}: the workloads the daemon plans for"
  type        = "SecureString"
  key_id      = aws_kms_key.this.arn
  value       = var.workloads_yaml
  tier        = length(coalesce(var.workloads_yaml, "-")) > 4096 ? "Advanced" : "Standard"
  tags        = local.tags
}
