# `terraform test` (Terraform >= 1.7) with a mocked AWS provider: no
# credentials, no API calls. It evaluates every expression of the module for
# both state backends and checks that bad inputs are refused by validation.
# tests/terraform/test_aws.py runs it after `terraform init -plugin-dir=...`.

mock_provider "aws" {
  mock_data "aws_caller_identity" {
    defaults = { account_id = "123456789012" }
  }
  mock_data "aws_partition" {
    defaults = { partition = "aws" }
  }
  mock_data "aws_region" {
    defaults = { name = "us-east-1" }
  }
  mock_data "aws_iam_policy_document" {
    defaults = { json = "{\"Version\":\"2012-10-17\",\"Statement\":[]}" }
  }
  mock_resource "aws_sqs_queue" {
    defaults = {
      url = "https://sqs.us-east-1.amazonaws.com/123456789012/mock-notices"
      arn = "arn:aws:sqs:us-east-1:123456789012:mock-notices"
    }
  }
  # The provider checks ARN syntax in plans: mocked ARNs must look real.
  mock_resource "aws_kms_key" {
    defaults = { arn = "arn:aws:kms:us-east-1:123456789012:key/00000000-0000-0000-0000-000000000000" }
  }
  mock_resource "aws_iam_role" {
    defaults = { arn = "arn:aws:iam::123456789012:role/mock" }
  }
  mock_resource "aws_cloudwatch_event_rule" {
    defaults = { arn = "arn:aws:events:us-east-1:123456789012:rule/mock" }
  }
  mock_resource "aws_cloudwatch_log_group" {
    defaults = { arn = "arn:aws:logs:us-east-1:123456789012:log-group:mock" }
  }
  mock_resource "aws_ssm_parameter" {
    defaults = { arn = "arn:aws:ssm:us-east-1:123456789012:parameter/mock" }
  }
  mock_resource "aws_efs_file_system" {
    defaults = { arn = "arn:aws:elasticfilesystem:us-east-1:123456789012:file-system/fs-0123456789abcdef0" }
  }
  mock_resource "aws_efs_access_point" {
    defaults = { arn = "arn:aws:elasticfilesystem:us-east-1:123456789012:access-point/fsap-0123456789abcdef0" }
  }
  mock_resource "aws_ecs_cluster" {
    defaults = { arn = "arn:aws:ecs:us-east-1:123456789012:cluster/mock" }
  }
  mock_resource "aws_ecs_task_definition" {
    defaults = { arn = "arn:aws:ecs:us-east-1:123456789012:task-definition/mock:1" }
  }
  mock_resource "aws_db_instance" {
    defaults = {
      endpoint = "spotfolio-state.abc.us-east-1.rds.amazonaws.com:5432"
      master_user_secret = [{
        secret_arn    = "arn:aws:secretsmanager:us-east-1:123456789012:secret:rds!db-mock"
        kms_key_id    = "arn:aws:kms:us-east-1:123456789012:key/mock"
        secret_status = "active"
      }]
    }
  }
}

variables {
  owner      = "team-ml-prod"
  image      = "123456789012.dkr.ecr.us-east-1.amazonaws.com/spotfolio:0.1.0"
  vpc_id     = "vpc-0123456789abcdef0"
  subnet_ids = ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]
  launch = {
    us-east-1 = {
      launch_template_name = "spotfolio-gpu"
      subnets              = { us-east-1a = "subnet-0123456789abcdef2" }
    }
  }
}

run "sqlite_on_efs" {
  variables {
    instance_types = ["g5.xlarge", "g6.xlarge"]
    daemon_settings = {
      planner       = "fast"
      horizon_hours = 48
      committed     = { "aws/us-east-1/g5.xlarge" = 2 }
      intervals     = { poll_notices_s = 5, reconcile_s = 60 }
    }
  }
  assert {
    condition     = length(aws_efs_file_system.state) == 1 && length(aws_db_instance.state) == 0
    error_message = "sqlite: one EFS file system and no RDS instance"
  }
  assert {
    condition     = yamldecode(output.daemon_config_yaml).store_url == "sqlite:////var/lib/spotfolio/state.db"
    error_message = "sqlite: the store is an absolute path on the EFS mount"
  }
  assert {
    condition     = yamldecode(output.daemon_config_yaml).provider_options.queue_url == aws_sqs_queue.notices.url
    error_message = "the daemon's configuration names the module's queue"
  }
  assert {
    condition = (
      yamldecode(output.daemon_config_yaml).owner == "team-ml-prod"
      && yamldecode(output.daemon_config_yaml).provider == "aws"
      && yamldecode(output.daemon_config_yaml).market_options.regions == "us-east-1"
      && yamldecode(output.daemon_config_yaml).provider_options.launch["us-east-1"].launch_template_name == "spotfolio-gpu"
    )
    error_message = "owner, provider, market regions and launch settings reach the configuration"
  }
  assert {
    condition     = !can(yamldecode(output.daemon_config_yaml).provider_options.launch["us-east-1"].image_id)
    error_message = "unset launch settings are left out, not written as null"
  }
  assert {
    condition     = length(aws_cloudwatch_event_rule.notices) == 4 && length(aws_cloudwatch_event_target.notices) == 4
    error_message = "four EventBridge rules (three EC2 events, AWS Health scheduled changes), each with the queue as target"
  }
  assert {
    condition = (
      jsondecode(aws_cloudwatch_event_rule.notices["scheduled_change"].event_pattern).source == ["aws.health"]
      && jsondecode(aws_cloudwatch_event_rule.notices["scheduled_change"].event_pattern).detail.service == ["EC2"]
      && jsondecode(aws_cloudwatch_event_rule.notices["scheduled_change"].event_pattern).detail.eventTypeCategory == ["scheduledChange"]
      && aws_cloudwatch_event_target.notices["scheduled_change"].arn == aws_sqs_queue.notices.arn
    )
    error_message = "AWS Health EC2 scheduled changes are routed to the notice queue"
  }
  assert {
    condition     = aws_ecs_service.daemon.desired_count == 1 && aws_ecs_service.daemon.deployment_maximum_percent == 100
    error_message = "one daemon task, never two during a deployment"
  }
  assert {
    condition = (
      jsondecode(aws_ecs_task_definition.daemon.container_definitions)[0].readonlyRootFilesystem
      && [for s in jsondecode(aws_ecs_task_definition.daemon.container_definitions)[0].secrets : s.name] == ["SPOTFOLIO_CONFIG_YAML"]
    )
    error_message = "read-only root file system; only the configuration is injected"
  }
  assert {
    condition     = aws_ssm_parameter.config.type == "SecureString" && length(aws_ssm_parameter.workloads) == 0
    error_message = "configuration as a SecureString; no workloads parameter unless given"
  }
}

run "postgres_on_rds" {
  variables {
    state_backend  = "postgres"
    workloads_yaml = "workloads: []\n"
  }
  assert {
    condition     = length(aws_efs_file_system.state) == 0 && length(aws_db_instance.state) == 1
    error_message = "postgres: an RDS instance and no EFS"
  }
  assert {
    condition = (
      aws_db_instance.state[0].storage_encrypted
      && !aws_db_instance.state[0].publicly_accessible
      && aws_db_instance.state[0].manage_master_user_password
      && aws_db_instance.state[0].iam_database_authentication_enabled
    )
    error_message = "RDS encrypted, private, password managed by RDS, IAM auth on"
  }
  assert {
    condition     = startswith(yamldecode(output.daemon_config_yaml).store_url, "postgresql+psycopg://spotfolio@spotfolio-state.abc.us-east-1.rds.amazonaws.com:5432/spotfolio")
    error_message = "postgres: the store URL names the user and endpoint, and no password"
  }
  assert {
    condition = (
      contains([for s in jsondecode(aws_ecs_task_definition.daemon.container_definitions)[0].secrets : s.name], "PGPASSWORD")
      && contains([for s in jsondecode(aws_ecs_task_definition.daemon.container_definitions)[0].secrets : s.name], "SPOTFOLIO_WORKLOADS_YAML")
      && yamldecode(output.daemon_config_yaml).workloads == "/run/spotfolio/workloads.yaml"
    )
    error_message = "postgres: the password and the workloads file reach the task as secrets"
  }
  assert {
    condition     = length(aws_cloudwatch_log_group.db) == 2
    error_message = "postgres: the exported RDS logs get log groups with retention and the key"
  }
}

run "refuses_two_launch_sources" {
  command = plan
  variables {
    launch = { us-east-1 = { launch_template_name = "a-template", image_id = "ami-0123456789abcdef0" } }
  }
  expect_failures = [var.launch]
}

run "refuses_module_owned_settings" {
  command = plan
  variables {
    daemon_settings = { owner = "someone-else" }
  }
  expect_failures = [var.daemon_settings]
}

run "refuses_latest_image" {
  command = plan
  variables {
    image = "spotfolio:latest"
  }
  expect_failures = [var.image]
}

run "refuses_unknown_backend" {
  command = plan
  variables {
    state_backend = "mysql"
  }
  expect_failures = [var.state_backend]
}

run "refuses_world_scrapes" {
  command = plan
  variables {
    metrics_ingress_cidrs = ["0.0.0.0/0"]
  }
  expect_failures = [var.metrics_ingress_cidrs]
}
