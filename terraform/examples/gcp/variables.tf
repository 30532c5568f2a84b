variable "project" {
  description = "Project to deploy the daemon in (and launch VMs in)."
  type        = string
}

variable "name" {
  description = "Prefix of every resource name."
  type        = string
  default     = "spotfolio"
}

variable "owner" {
  description = "Value of the spotfolio-owner label on the daemon's VMs."
  type        = string
}

variable "image" {
  description = "Container image of the daemon (the repository's Dockerfile), pinned by digest (e.g. us-central1-docker.pkg.dev/my-project/spotfolio/spotfolio@sha256:...; README.md says how to build it)."
  type        = string
}

variable "zone" {
  description = "Zone of the daemon's own VM."
  type        = string
  default     = "us-central1-a"
}

variable "subnetwork" {
  description = "Subnetwork of the daemon's VM (Private Google Access on)."
  type        = string
}

variable "launch_zones" {
  description = "Zones the daemon launches GPU VMs in."
  type        = list(string)
  default     = ["us-central1-a", "us-central1-c"]
}

variable "instance_template" {
  description = "Instance template of the GPU VMs (global/instanceTemplates/NAME); its startup script installs the preemption watcher."
  type        = string
}

variable "vm_service_account" {
  description = "Service account the GPU VMs run as (the daemon may act as this one only), or null."
  type        = string
  default     = null
}

variable "instance_types" {
  description = "Machine types of the market snapshot."
  type        = list(string)
  default     = ["g2-standard-4", "a2-highgpu-1g"]
}

variable "metrics_source_ranges" {
  description = "CIDR blocks of the Prometheus scrapers; empty: no ingress."
  type        = list(string)
  default     = []
}
