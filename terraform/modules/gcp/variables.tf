# Inputs of the Spotfolio daemon module for GCP. No variable carries a
# secret: the database (postgres backend) is reached with IAM database
# authentication through the Cloud SQL Auth Proxy, so there is no password.

# -- identity -------------------------------------------------------------------

variable "name" {
  description = "Prefix of every resource name (service account, roles, secret, VM, disks, database)."
  type        = string
  default     = "spotfolio"

  validation {
    # Service account ids allow 6-30 characters; the longest suffix used is
    # "-daemon" (7).
    condition     = can(regex("^[a-z][a-z0-9-]{1,21}[a-z0-9]$", var.name))
    error_message = "name: 3-23 characters of lowercase letters, digits and '-', starting with a letter."
  }
}

variable "project" {
  description = "Project the daemon runs in and launches VMs in (provider_options.project)."
  type        = string

  validation {
    # Same pattern as markets.gcp.settings.GcpProviderSettings.project.
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project))
    error_message = "project: a project id, 6-30 characters of lowercase letters, digits and '-'."
  }
}

variable "owner" {
  description = "Ownership id of this daemon: the spotfolio-owner label of every VM it launches, and the seed of their name prefix, the only VMs IAM lets it delete."
  type        = string

  validation {
    # A GCP label value (markets.gcp.labels.is_label_value).
    condition     = can(regex("^[a-z0-9_-]{1,63}$", var.owner))
    error_message = "owner: 1-63 characters of lowercase letters, digits, _ and - (a GCP label value)."
  }
}

variable "labels" {
  description = "Labels added to every resource the module creates that takes labels."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for k, v in var.labels : can(regex("^[a-z][a-z0-9_-]{0,62}$", k)) && can(regex("^[a-z0-9_-]{0,63}$", v))])
    error_message = "labels: keys of [a-z][a-z0-9_-]{0,62}, values of [a-z0-9_-]{0,63}."
  }
}

# -- where the daemon launches ----------------------------------------------------

variable "zones" {
  description = "Zones the daemon launches VMs in (provider_options.zones); IAM lets it delete only VMs of these zones."
  type        = list(string)

  validation {
    condition     = length(var.zones) > 0 && alltrue([for z in var.zones : can(regex("^[a-z]+-[a-z]+[0-9]+-[a-z]$", z))])
    error_message = "zones: at least one zone name like us-central1-a."
  }
}

variable "launch" {
  description = "How the daemon creates VMs: exactly one of instance_template or source_image, and subnetwork, service_account, boot_disk_gb, termination_action, extra_labels (markets.gcp.settings.GcpProviderSettings)."
  type = object({
    instance_template  = optional(string)
    source_image       = optional(string)
    subnetwork         = optional(string)
    service_account    = optional(string)
    boot_disk_gb       = optional(number)
    termination_action = optional(string)
    extra_labels       = optional(map(string))
  })

  validation {
    condition     = (var.launch.instance_template == null) != (var.launch.source_image == null)
    error_message = "launch: exactly one of instance_template or source_image."
  }
  validation {
    condition     = var.launch.termination_action == null || contains(["DELETE", "STOP"], coalesce(var.launch.termination_action, "DELETE"))
    error_message = "launch.termination_action: DELETE or STOP."
  }
  validation {
    condition     = var.launch.service_account == null || can(regex("^[^@\\s]+@[^@\\s]+\\.iam\\.gserviceaccount\\.com$", coalesce(var.launch.service_account, "x@x.iam.gserviceaccount.com")))
    error_message = "launch.service_account: the email of a user-managed service account (NAME@PROJECT.iam.gserviceaccount.com), not the default compute one."
  }
}

variable "market_options" {
  description = "Other GCP market options (regions, instance_types, prices: a price file path inside the image)."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for k in keys(var.market_options) : contains(["regions", "instance_types", "zones", "prices"], k)])
    error_message = "market_options: only regions, instance_types, zones, prices (project is the module's)."
  }
}

variable "daemon_settings" {
  description = "Other DaemonConfig fields (planner, horizon_hours, committed, intervals, backoff, lifecycle, ...), merged under the fields the module sets."
  type        = any
  default     = {}

  validation {
    condition     = length(setintersection(keys(var.daemon_settings), ["owner", "account", "store_url", "market", "market_options", "provider", "provider_options", "metrics_port", "metrics_addr"])) == 0
    error_message = "daemon_settings: owner, account, store_url, market, market_options, provider, provider_options, metrics_port and metrics_addr are set by the module."
  }
}

# -- the daemon's VM --------------------------------------------------------------

variable "zone" {
  description = "Zone of the daemon's own VM (and of its state disk); Cloud SQL goes in its region."
  type        = string

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+-[a-z]$", var.zone))
    error_message = "zone: a zone name like us-central1-a."
  }
}

variable "subnetwork" {
  description = "Self link or id of the subnetwork of the daemon's VM. It needs Private Google Access (the VM has no external IP) and, for postgres, its network's private services access."
  type        = string

  validation {
    condition     = can(regex("projects/[^/]+/regions/[^/]+/subnetworks/[^/]+$", var.subnetwork))
    error_message = "subnetwork: projects/PROJECT/regions/REGION/subnetworks/NAME (or its self link)."
  }
}

variable "image" {
  description = "Container image of the daemon (Spotfolio installed, python3 and spotfolio on PATH), pinned by tag or digest. An Artifact Registry image gets read access on its repository only."
  type        = string

  validation {
    condition     = length(trimspace(var.image)) > 0 && !endswith(var.image, ":latest")
    error_message = "image: a pinned image reference (a version tag or @sha256: digest), not :latest."
  }
}

variable "daemon_command" {
  description = "Command the container runs once its entrypoint has written the configuration to /run/spotfolio/config.yaml."
  type        = list(string)
  default     = ["spotfolio", "daemon", "--config", "/run/spotfolio/config.yaml", "--log-format", "json"]

  validation {
    condition     = length(var.daemon_command) > 0
    error_message = "daemon_command: at least the program to run."
  }
}

variable "container_user" {
  description = "uid:gid the daemon runs as (not root); also the owner of its state directory (sqlite backend)."
  type        = string
  default     = "1000:1000"

  validation {
    condition     = can(regex("^[1-9][0-9]{0,9}:[1-9][0-9]{0,9}$", var.container_user))
    error_message = "container_user: numeric uid:gid, not root (0)."
  }
}

variable "machine_type" {
  description = "Machine type of the daemon's VM. The MILP planner (CBC) is single-threaded; 2 vCPU / 4 GB is ample."
  type        = string
  default     = "e2-medium"

  validation {
    condition     = can(regex("^[a-z][a-z0-9]*-[a-z0-9-]+$", var.machine_type))
    error_message = "machine_type: a machine type name like e2-medium."
  }
}

variable "metrics_port" {
  description = "Port of the daemon's Prometheus endpoint; 0 turns it off."
  type        = number
  default     = 9108

  validation {
    condition     = var.metrics_port == 0 || (var.metrics_port >= 1024 && var.metrics_port <= 65535 && floor(var.metrics_port) == var.metrics_port)
    error_message = "metrics_port: 0 or an unprivileged port 1024-65535."
  }
}

variable "metrics_addr" {
  description = "Address the daemon's metrics endpoint binds inside the container: 0.0.0.0 so the scraper allowed by the ingress rule reaches it (the daemon's own default is 127.0.0.1)."
  type        = string
  default     = "0.0.0.0"

  validation {
    condition     = can(regex("^([0-9]{1,3}[.]){3}[0-9]{1,3}$|^[0-9a-fA-F:]+$", var.metrics_addr))
    error_message = "metrics_addr: an IPv4 or IPv6 address (0.0.0.0, 127.0.0.1, ::)."
  }
}

variable "metrics_source_ranges" {
  description = "CIDR blocks allowed to scrape the metrics port (e.g. the Prometheus subnet). Empty: no firewall rule, no ingress."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for c in var.metrics_source_ranges : can(cidrhost(c, 0)) && c != "0.0.0.0/0"])
    error_message = "metrics_source_ranges: CIDR blocks, never 0.0.0.0/0."
  }
}

variable "kms_key_name" {
  description = "Cloud KMS key (projects/P/locations/L/keyRings/R/cryptoKeys/K) encrypting the VM's disks; null: Google-managed encryption. The Compute Engine service agent needs encrypter/decrypter on it."
  type        = string
  default     = null

  validation {
    condition     = var.kms_key_name == null || can(regex("^projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+$", coalesce(var.kms_key_name, "-")))
    error_message = "kms_key_name: projects/P/locations/L/keyRings/R/cryptoKeys/K."
  }
}

# -- state ------------------------------------------------------------------------

variable "state_backend" {
  description = "Where the daemon keeps its state: sqlite (a file on a persistent disk attached to the VM) or postgres (Cloud SQL)."
  type        = string
  default     = "sqlite"

  validation {
    condition     = contains(["sqlite", "postgres"], var.state_backend)
    error_message = "state_backend: sqlite or postgres."
  }
}

variable "state_disk_gb" {
  description = "Size of the state disk in GB (sqlite backend)."
  type        = number
  default     = 10

  validation {
    condition     = var.state_disk_gb >= 10 && var.state_disk_gb <= 65536 && floor(var.state_disk_gb) == var.state_disk_gb
    error_message = "state_disk_gb: a whole number of GB, 10-65536."
  }
}

variable "db_tier" {
  description = "Cloud SQL machine tier (postgres backend)."
  type        = string
  default     = "db-custom-1-3840"

  validation {
    condition     = can(regex("^db-[a-z0-9-]+$", var.db_tier))
    error_message = "db_tier: a Cloud SQL tier like db-custom-1-3840."
  }
}

variable "db_version" {
  description = "Cloud SQL PostgreSQL version (postgres backend)."
  type        = string
  default     = "POSTGRES_16"

  validation {
    condition     = contains(["POSTGRES_14", "POSTGRES_15", "POSTGRES_16", "POSTGRES_17"], var.db_version)
    error_message = "db_version: POSTGRES_14 to POSTGRES_17."
  }
}

variable "db_private_network" {
  description = "Self link of the VPC network Cloud SQL gets its private IP in (postgres backend; private services access must be set up on it). Null with sqlite."
  type        = string
  default     = null

  validation {
    condition     = var.db_private_network == null || can(regex("projects/[^/]+/global/networks/[^/]+$", coalesce(var.db_private_network, "-")))
    error_message = "db_private_network: projects/PROJECT/global/networks/NAME (or its self link)."
  }
}

variable "db_high_availability" {
  description = "Cloud SQL regional (high availability) instance (postgres backend)."
  type        = bool
  default     = true
}

variable "deletion_protection" {
  description = "Deletion protection of the Cloud SQL instance (postgres backend); set false before destroying."
  type        = bool
  default     = true
}
