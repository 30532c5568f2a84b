# The daemon's runtime: one ECS Fargate task (README.md says why Fargate and
# not an EC2 instance with systemd).
#
# One daemon per account: the service runs one task and, on a deployment,
# stops the old task before it starts the new one (minimum 0 %, maximum
# 100 %); the daemon's lease in the state store refuses a second one anyway
# (a task still draining, an operator's `spotfolio daemon` elsewhere).

locals {
  container_name = "daemon"

  # The entrypoint writes the configuration ECS injected from SSM into the
  # task-local volume, drops it from the environment and runs the daemon as
  # PID 1 (exec), so ECS's SIGTERM reaches it and it releases its lease.
  entrypoint_script = <<-EOT
    set -eu
    umask 077
    printf '%s\n' "$SPOTFOLIO_CONFIG_YAML" > ${local.config_path}
    if [ -n "$${SPOTFOLIO_WORKLOADS_YAML:-}" ]; then
      printf '%s\n' "$SPOTFOLIO_WORKLOADS_YAML" > ${local.workload_path}
    fi
    unset SPOTFOLIO_CONFIG_YAML SPOTFOLIO_WORKLOADS_YAML
    exec "$@"
  EOT

  container_secrets = concat(
    [{ name = "SPOTFOLIO_CONFIG_YAML", valueFrom = aws_ssm_parameter.config.arn }],
    [for p in aws_ssm_parameter.workloads : { name = "SPOTFOLIO_WORKLOADS_YAML", valueFrom = p.arn }],
    # libpq reads PGPASSWORD: the password never appears in the store URL.
    local.sqlite ? [] : [{
      name      = "PGPASSWORD"
      valueFrom = "${aws_db_instance.state[0].master_user_secret[0].secret_arn}:password::"
    }],
  )

  container_environment = concat(
    [
      # The root file system is read-only: home, temporary files (the CBC
      # solver writes its model and solution files there) and caches go to
      # the task-local volume.
      { name = "HOME", value = local.run_dir },
      { name = "TMPDIR", value = local.run_dir },
      { name = "MPLCONFIGDIR", value = local.run_dir },
      { name = "PYTHONDONTWRITEBYTECODE", value = "1" },
      { name = "PYTHONUNBUFFERED", value = "1" },
      # A change of configuration changes the task definition, so `terraform
      # apply` rolls out a task that reads the new parameter versions.
      { name = "SPOTFOLIO_CONFIG_SHA256", value = sha256(join("\n", [local.daemon_config_yaml, var.workloads_yaml == null ? "" : var.workloads_yaml])) },
    ],
    local.sqlite ? [] : [{ name = "PGSSLMODE", value = "require" }],
  )

  container_mounts = concat(
    [{ sourceVolume = "run", containerPath = local.run_dir, readOnly = false }],
    local.sqlite ? [{ sourceVolume = "state", containerPath = local.state_dir, readOnly = false }] : [],
  )

  # The daemon's readiness (lease held, market fresh, notice queue read): a
  # 503 from /readyz fails the check, and ECS replaces an unhealthy task.
  health_check = var.metrics_port == 0 ? null : {
    command = [
      "CMD", "python3", "-c",
      "import urllib.request; urllib.request.urlopen('http://127.0.0.1:${var.metrics_port}/readyz', timeout=3)",
    ]
    interval    = 30
    timeout     = 5
    retries     = 3
    startPeriod = 120
  }

  container_definition = merge(
    {
      name                   = local.container_name
      image                  = var.image
      essential              = true
      user                   = var.container_user
      readonlyRootFilesystem = true
      privileged             = false
      entryPoint             = ["/bin/sh", "-c", local.entrypoint_script, "spotfolio-entrypoint"]
      command                = var.daemon_command
      environment            = local.container_environment
      secrets                = local.container_secrets
      mountPoints            = local.container_mounts
      portMappings = var.metrics_port == 0 ? [] : [
        { containerPort = var.metrics_port, protocol = "tcp", name = "metrics" },
      ]
      linuxParameters = { initProcessEnabled = true, capabilities = { drop = ["ALL"] } }
      # Time to finish a handling in flight and release the lease.
      stopTimeout = 60
      logConfiguration = {
        logDriver = "awslogs"
        options = {
          "awslogs-group"         = aws_cloudwatch_log_group.daemon.name
          "awslogs-region"        = local.region
          "awslogs-stream-prefix" = "daemon"
        }
      }
    },
    local.health_check == null ? {} : { healthCheck = local.health_check },
  )
}

# -- network --------------------------------------------------------------------

resource "aws_security_group" "daemon" {
  name        = "${var.name}-daemon"
  description = "Spotfolio ${var.name}: the daemon's task (HTTPS to AWS APIs, its state store, metrics scrapes)"
  vpc_id      = var.vpc_id
  tags        = merge(local.tags, { Name = "${var.name}-daemon" })
}

resource "aws_vpc_security_group_egress_rule" "daemon_https" {
  security_group_id = aws_security_group.daemon.id
  description       = "HTTPS to the AWS APIs (EC2, Pricing, SQS) and the image registry"
  ip_protocol       = "tcp"
  from_port         = 443
  to_port           = 443
  cidr_ipv4         = "0.0.0.0/0"
}

resource "aws_vpc_security_group_egress_rule" "daemon_efs" {
  count = local.sqlite ? 1 : 0

  security_group_id            = aws_security_group.daemon.id
  description                  = "NFS to the state file system"
  ip_protocol                  = "tcp"
  from_port                    = 2049
  to_port                      = 2049
  referenced_security_group_id = aws_security_group.efs[0].id
}

resource "aws_vpc_security_group_egress_rule" "daemon_db" {
  count = local.sqlite ? 0 : 1

  security_group_id            = aws_security_group.daemon.id
  description                  = "PostgreSQL to the state database"
  ip_protocol                  = "tcp"
  from_port                    = 5432
  to_port                      = 5432
  referenced_security_group_id = aws_security_group.db[0].id
}

resource "aws_vpc_security_group_ingress_rule" "daemon_metrics" {
  for_each = var.metrics_port == 0 ? toset([]) : toset(var.metrics_ingress_cidrs)

  security_group_id = aws_security_group.daemon.id
  description       = "Prometheus scrapes of the daemon's metrics"
  ip_protocol       = "tcp"
  from_port         = var.metrics_port
  to_port           = var.metrics_port
  cidr_ipv4         = each.value
}

# -- ECS ----------------------------------------------------------------------------

resource "aws_ecs_cluster" "this" {
  name = var.name

  setting {
    name  = "containerInsights"
    value = "enabled"
  }
  tags = local.tags
}

resource "aws_ecs_task_definition" "daemon" {
  family                   = "${var.name}-daemon"
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = var.cpu
  memory                   = var.memory
  task_role_arn            = aws_iam_role.daemon.arn
  execution_role_arn       = aws_iam_role.execution.arn
  container_definitions    = jsonencode([local.container_definition])

  runtime_platform {
    operating_system_family = "LINUX"
    cpu_architecture        = var.cpu_architecture
  }

  # Task-local scratch space: the configuration files, HOME, TMPDIR.
  volume {
    name = "run"
  }

  dynamic "volume" {
    for_each = local.sqlite ? [1] : []
    content {
      name = "state"
      efs_volume_configuration {
        file_system_id     = aws_efs_file_system.state[0].id
        transit_encryption = "ENABLED"
        authorization_config {
          access_point_id = aws_efs_access_point.state[0].id
          iam             = "ENABLED"
        }
      }
    }
  }

  tags = local.tags
}

resource "aws_ecs_service" "daemon" {
  name             = "${var.name}-daemon"
  cluster          = aws_ecs_cluster.this.id
  task_definition  = aws_ecs_task_definition.daemon.arn
  launch_type      = "FARGATE"
  platform_version = "LATEST"
  desired_count    = 1

  # Never two tasks at once: stop the old one, then start the new one.
  deployment_minimum_healthy_percent = 0
  deployment_maximum_percent         = 100
  deployment_circuit_breaker {
    enable   = true
    rollback = true
  }

  enable_execute_command = false
  propagate_tags         = "SERVICE"

  network_configuration {
    subnets          = var.subnet_ids
    security_groups  = [aws_security_group.daemon.id]
    assign_public_ip = var.assign_public_ip
  }

  # The task mounts EFS at start: the mount targets and the file system
  # policy must exist first.
  depends_on = [
    aws_efs_mount_target.state,
    aws_efs_file_system_policy.state,
    aws_iam_role_policy.daemon,
    aws_iam_role_policy.state,
    aws_iam_role_policy.execution,
  ]

  tags = local.tags
}
