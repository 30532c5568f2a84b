variable "region" {
  description = "Region to deploy the daemon in (and launch instances in)."
  type        = string
  default     = "us-east-1"

  validation {
    condition     = can(regex("^[a-z]{2}(-[a-z]+)+-[0-9]+$", var.region))
    error_message = "region: a name like us-east-1."
  }
}

variable "name" {
  description = "Prefix of every resource name."
  type        = string
  default     = "spotfolio"
}

variable "owner" {
  description = "Value of the spotfolio:owner tag on the daemon's instances."
  type        = string
}

variable "image" {
  description = "Container image of the daemon (the repository's Dockerfile), pinned by digest (e.g. 123456789012.dkr.ecr.us-east-1.amazonaws.com/spotfolio@sha256:...; README.md says how to build it)."
  type        = string
}

variable "vpc_id" {
  description = "VPC of the daemon."
  type        = string
}

variable "subnet_ids" {
  description = "Private subnets of the daemon's task, one per zone."
  type        = list(string)
}

variable "instance_types" {
  description = "Instance types the daemon plans with (empty: its default GPU types)."
  type        = list(string)
  default     = ["g5.xlarge", "g6.xlarge"]
}

variable "launch_template_name" {
  description = "Launch template the daemon's instances are built from."
  type        = string
}

variable "launch_subnets" {
  description = "Zone -> subnet the daemon launches instances into (empty: the default VPC's subnets)."
  type        = map(string)
  default     = {}
}

variable "instance_role_arns" {
  description = "Roles of the instance profile in the launch template (the daemon may pass these only)."
  type        = list(string)
  default     = []
}

variable "workloads_file" {
  description = "Path of the workloads YAML the daemon plans for (null: the shipped example fleet)."
  type        = string
  default     = null
}

variable "committed" {
  description = "Reservations the account holds: pool key -> instances (e.g. {\"aws/us-east-1/g5.xlarge\" = 4})."
  type        = map(number)
  default     = {}
}

variable "state_backend" {
  description = "sqlite (EFS) or postgres (RDS)."
  type        = string
  default     = "sqlite"
}

variable "metrics_ingress_cidrs" {
  description = "CIDR blocks allowed to scrape the daemon's metrics."
  type        = list(string)
  default     = []
}

variable "alarm_actions" {
  description = "SNS topics told about dead-lettered notices."
  type        = list(string)
  default     = []
}
