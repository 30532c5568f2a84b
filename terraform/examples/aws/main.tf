# Example: the Spotfolio daemon in one region, launching GPU instances from a
# launch template into two private subnets, state on SQLite (EFS).
#
#   terraform init
#   terraform apply -var-file=spotfolio.tfvars
#
# (README.md beside this file shows a spotfolio.tfvars.)

terraform {
  required_version = ">= 1.5"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.100, < 7.0" # the module's constraint (its versions.tf says why)
    }
  }
}

provider "aws" {
  region = var.region

  default_tags {
    tags = {
      "app"        = "spotfolio"
      "managed-by" = "terraform"
    }
  }
}

module "spotfolio" {
  source = "../../modules/aws"

  name       = var.name
  owner      = var.owner
  image      = var.image
  vpc_id     = var.vpc_id
  subnet_ids = var.subnet_ids

  instance_types = var.instance_types
  launch = {
    (var.region) = {
      launch_template_name = var.launch_template_name
      subnets              = var.launch_subnets
    }
  }
  instance_role_arns = var.instance_role_arns

  workloads_yaml = var.workloads_file == null ? null : file(var.workloads_file)
  daemon_settings = {
    planner       = "milp"
    horizon_hours = 24
    committed     = var.committed
  }

  state_backend         = var.state_backend
  metrics_ingress_cidrs = var.metrics_ingress_cidrs
  alarm_actions         = var.alarm_actions
}
