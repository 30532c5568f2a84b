# Example: the Spotfolio daemon in one GCP project, launching Spot GPU VMs
# from an instance template in two zones, state on SQLite (a persistent disk).
#
#   terraform init
#   terraform apply -var-file=spotfolio.tfvars
#
# (README.md beside this file shows a spotfolio.tfvars.)

terraform {
  required_version = ">= 1.5"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 5.0, < 7.0"
    }
  }
}

provider "google" {
  project = var.project
  region  = join("-", slice(split("-", var.zone), 0, 2))

  default_labels = {
    "app"        = "spotfolio"
    "managed-by" = "terraform"
  }
}

module "spotfolio" {
  source = "../../modules/gcp"

  name       = var.name
  project    = var.project
  owner      = var.owner
  image      = var.image
  zone       = var.zone
  subnetwork = var.subnetwork

  zones = var.launch_zones
  launch = {
    instance_template = var.instance_template
    service_account   = var.vm_service_account
  }
  market_options = { instance_types = join(",", var.instance_types) }

  daemon_settings = {
    planner       = "fast"
    horizon_hours = 24
  }
  metrics_source_ranges = var.metrics_source_ranges
}
