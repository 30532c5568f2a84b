# Inputs of the Spotfolio daemon module. No variable carries a secret: the
# database password (postgres backend) is generated and kept by RDS in
# Secrets Manager, and nothing here has a secret default.

# -- identity -------------------------------------------------------------------

variable "name" {
  description = "Prefix of every resource name (cluster, queue, roles, parameters, log group)."
  type        = string
  default     = "spotfolio"

  validation {
    # IAM role names allow 64 characters and the longest suffix used is 18.
    condition     = can(regex("^[a-z][a-z0-9-]{1,38}[a-z0-9]$", var.name))
    error_message = "name: 3-40 characters of lowercase letters, digits and '-', starting with a letter."
  }
}

variable "owner" {
  description = "Ownership id of this daemon: the value of the spotfolio:owner tag it puts on every instance it launches, and the only instances IAM lets it terminate."
  type        = string

  validation {
    # Same pattern as broker.daemon.config.DaemonConfig.owner.
    condition     = can(regex("^[A-Za-z0-9_.:/@+=-]{1,128}$", var.owner))
    error_message = "owner: 1-128 characters of letters, digits and _.:/@+=-"
  }
}

variable "tags" {
  description = "Tags added to every resource the module creates (the provider's default_tags also apply)."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for k, v in var.tags : length(k) >= 1 && length(k) <= 128 && length(v) <= 256 && !startswith(lower(k), "aws:")])
    error_message = "tags: keys of 1-128 characters not starting with aws:, values of at most 256."
  }
}

# -- the container --------------------------------------------------------------

variable "image" {
  description = "Container image of the daemon (Spotfolio installed, `spotfolio` on PATH), pinned by tag or digest. An ECR image in this account gets pull permissions for its repository only."
  type        = string

  validation {
    condition     = length(trimspace(var.image)) > 0 && !endswith(var.image, ":latest")
    error_message = "image: a pinned image reference (a version tag or @sha256: digest), not :latest."
  }
}

variable "daemon_command" {
  description = "Command the container runs once its entrypoint has written the configuration to /run/spotfolio/config.yaml (JSON log lines: CloudWatch Logs Insights reads their fields)."
  type        = list(string)
  default     = ["spotfolio", "daemon", "--config", "/run/spotfolio/config.yaml", "--log-format", "json"]

  validation {
    condition     = length(var.daemon_command) > 0
    error_message = "daemon_command: at least the program to run."
  }
}

variable "container_user" {
  description = "uid:gid the daemon runs as; also the owner of its state directory on EFS (sqlite backend)."
  type        = string
  default     = "1000:1000"

  validation {
    condition     = can(regex("^[1-9][0-9]{0,9}:[1-9][0-9]{0,9}$", var.container_user))
    error_message = "container_user: numeric uid:gid, not root (0)."
  }
}

variable "cpu" {
  description = "Fargate task CPU units (1024 = 1 vCPU). The MILP planner (CBC) is single-threaded."
  type        = number
  default     = 1024

  validation {
    condition     = contains([256, 512, 1024, 2048, 4096, 8192, 16384], var.cpu)
    error_message = "cpu: one of Fargate's sizes 256, 512, 1024, 2048, 4096, 8192, 16384."
  }
}

variable "memory" {
  description = "Fargate task memory in MiB (must be a size Fargate pairs with var.cpu)."
  type        = number
  default     = 2048

  validation {
    condition     = var.memory >= 512 && var.memory <= 122880 && var.memory % 512 == 0
    error_message = "memory: 512-122880 MiB in steps of 512."
  }
}

variable "cpu_architecture" {
  description = "CPU architecture of the Fargate task; must match the image."
  type        = string
  default     = "X86_64"

  validation {
    condition     = contains(["X86_64", "ARM64"], var.cpu_architecture)
    error_message = "cpu_architecture: X86_64 or ARM64."
  }
}

# -- network --------------------------------------------------------------------

variable "vpc_id" {
  description = "VPC of the daemon's task (and of EFS or RDS)."
  type        = string

  validation {
    condition     = can(regex("^vpc-[0-9a-f]{8,17}$", var.vpc_id))
    error_message = "vpc_id: looks like vpc-0123456789abcdef0."
  }
}

variable "subnet_ids" {
  description = "Private subnets of the task, one per availability zone (EFS mount targets go in each; RDS needs two zones). They need a route to the AWS APIs: a NAT gateway or VPC endpoints."
  type        = list(string)

  validation {
    condition     = length(var.subnet_ids) > 0 && alltrue([for s in var.subnet_ids : can(regex("^subnet-[0-9a-f]{8,17}$", s))])
    error_message = "subnet_ids: at least one id like subnet-0123456789abcdef0."
  }
}

variable "assign_public_ip" {
  description = "Give the task a public IP (only for public subnets without NAT; keep false otherwise)."
  type        = bool
  default     = false
}

variable "metrics_port" {
  description = "Port of the daemon's Prometheus endpoint; 0 turns it (and the container health check) off."
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

variable "metrics_ingress_cidrs" {
  description = "CIDR blocks allowed to scrape the metrics port (e.g. the Prometheus subnet). Empty: no ingress at all."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for c in var.metrics_ingress_cidrs : can(cidrhost(c, 0)) && c != "0.0.0.0/0"])
    error_message = "metrics_ingress_cidrs: valid CIDR blocks, and not 0.0.0.0/0."
  }
}

# -- what the daemon reads and launches ----------------------------------------

variable "market_regions" {
  description = "Regions whose spot prices and placement scores the daemon reads. Empty: the launch regions (or this region when launch is empty)."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for r in var.market_regions : can(regex("^[a-z]{2}(-[a-z]+)+-[0-9]+$", r))])
    error_message = "market_regions: names like us-east-1."
  }
}

variable "instance_types" {
  description = "Instance types the market snapshot covers. Empty: the daemon's default GPU types."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for t in var.instance_types : can(regex("^[a-z0-9-]+\\.[a-z0-9-]+$", t))])
    error_message = "instance_types: names like g5.xlarge."
  }
}

variable "launch" {
  description = <<-EOT
    Per launch region, what instances are built from (the AWS provider's
    `launch` settings, markets.aws.launch.RegionLaunch): exactly one of
    launch_template_name, launch_template_id or image_id; subnets maps a zone
    to its subnet; security_group_ids; instance_profile_arn. Subnets, security
    groups and a launch template id given here also narrow the IAM policy.
    Notices (EventBridge) are wired for this module's region only.
  EOT
  type = map(object({
    launch_template_name    = optional(string)
    launch_template_id      = optional(string)
    launch_template_version = optional(string, "$Default")
    image_id                = optional(string)
    subnets                 = optional(map(string), {})
    security_group_ids      = optional(list(string), [])
    instance_profile_arn    = optional(string)
  }))

  validation {
    condition     = length(var.launch) > 0
    error_message = "launch: settings for at least one region."
  }
  validation {
    condition     = alltrue([for r, l in var.launch : can(regex("^[a-z]{2}(-[a-z]+)+-[0-9]+$", r))])
    error_message = "launch: keys are region names like us-east-1."
  }
  validation {
    condition = alltrue([for r, l in var.launch :
    length([for s in [l.launch_template_name, l.launch_template_id, l.image_id] : s if s != null]) == 1])
    error_message = "launch: each region needs exactly one of launch_template_name, launch_template_id or image_id."
  }
  validation {
    condition = alltrue(flatten([for r, l in var.launch : [
      for z, s in l.subnets : startswith(z, r) && can(regex("^subnet-[0-9a-f]{8,17}$", s))
    ]]))
    error_message = "launch: subnets map a zone of that region to an id like subnet-0123456789abcdef0."
  }
  validation {
    condition = alltrue(flatten([for r, l in var.launch : [
      for g in l.security_group_ids : can(regex("^sg-[0-9a-f]{8,17}$", g))
    ]]))
    error_message = "launch: security group ids look like sg-0123456789abcdef0."
  }
  validation {
    condition = alltrue([for r, l in var.launch :
    l.launch_template_id == null || can(regex("^lt-[0-9a-f]{17}$", coalesce(l.launch_template_id, "-")))])
    error_message = "launch: launch_template_id looks like lt-0123456789abcdef0."
  }
}

variable "instance_role_arns" {
  description = "ARNs of the IAM roles inside the instance profiles the launched instances carry (from launch or a launch template). The daemon may pass these roles to EC2 and no other; empty: no iam:PassRole at all."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for a in var.instance_role_arns : can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:role/", a))])
    error_message = "instance_role_arns: role ARNs (arn:aws:iam::123456789012:role/...)."
  }
}

variable "secret_arns" {
  description = "SSM parameters and Secrets Manager secrets the hook settings reference ({ssm: NAME}, {secretsmanager: NAME}): the daemon may read these and no other. A customer-managed KMS key on them needs its key policy to let the task role decrypt."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for a in var.secret_arns : can(regex("^arn:aws[a-z-]*:(ssm:[a-z0-9-]+:[0-9]{12}:parameter/|secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:)", a))])
    error_message = "secret_arns: ARNs of SSM parameters (arn:aws:ssm:REGION:ACCOUNT:parameter/...) or Secrets Manager secrets (arn:aws:secretsmanager:REGION:ACCOUNT:secret:...)."
  }
}

variable "demand_metric_regions" {
  description = "Regions whose CloudWatch metrics a serving workload's demand_metric reads (source: cloudwatch): the daemon may call GetMetricData there and nowhere else. Empty: no CloudWatch access."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for r in var.demand_metric_regions : can(regex("^[a-z]{2}(-[a-z]+)+-[0-9]$", r))])
    error_message = "demand_metric_regions: AWS region names such as us-east-1."
  }
}

variable "launch_extra_resource_arns" {
  description = "Further resource ARNs RunInstances may use, for what a launch template names beyond image, subnet, security group and network interface: key pairs, placement groups, capacity reservations."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for a in var.launch_extra_resource_arns : can(regex("^arn:aws[a-z-]*:ec2:", a)) && !can(regex(":(instance|volume)/", a))])
    error_message = "launch_extra_resource_arns: EC2 ARNs other than instance/ and volume/ (those require the owner tag)."
  }
}

# -- daemon configuration (rendered to SSM) ------------------------------------

variable "daemon_settings" {
  description = "Further fields of the daemon's YAML configuration (broker.daemon.config.DaemonConfig): planner, horizon_hours, committed, intervals, backoff, lifecycle, ... The module sets owner, account, store_url, market, market_options, provider, provider_options, metrics_port and workloads itself."
  type        = any
  default     = {}

  validation {
    condition = length(setintersection(keys(var.daemon_settings), [
      "owner", "account", "store_url", "market", "market_options", "provider",
      "provider_options", "metrics_port", "metrics_addr", "workloads",
    ])) == 0
    error_message = "daemon_settings: owner, account, store_url, market, market_options, provider, provider_options, metrics_port, metrics_addr and workloads are set by the module (use its variables)."
  }
}

variable "market_options" {
  description = "Extra options of the AWS market (placement, history_days, reserved, ...), as strings."
  type        = map(string)
  default     = {}

  validation {
    condition     = length(setintersection(keys(var.market_options), ["regions", "instance_types"])) == 0
    error_message = "market_options: regions and instance_types come from var.market_regions and var.instance_types."
  }
}

variable "workloads_yaml" {
  description = "The workloads file (YAML text) the daemon plans for, stored beside the configuration in SSM. null: the daemon's shipped example fleet."
  type        = string
  default     = null

  validation {
    # An advanced SSM parameter holds at most 8 KB.
    condition     = var.workloads_yaml == null || (length(trimspace(coalesce(var.workloads_yaml, " "))) > 0 && length(coalesce(var.workloads_yaml, " ")) <= 8192)
    error_message = "workloads_yaml: null, or non-empty YAML text of at most 8192 characters (an SSM parameter's limit)."
  }
}

# -- notices --------------------------------------------------------------------

variable "notice_retention_s" {
  description = "How long an unread notice stays in the queue. A spot warning is worth nothing after its 120 s; state changes are re-read from EC2 at every reconcile."
  type        = number
  default     = 3600

  validation {
    condition     = var.notice_retention_s >= 60 && var.notice_retention_s <= 1209600
    error_message = "notice_retention_s: 60 s to 14 days (SQS limits)."
  }
}

variable "max_receive_count" {
  description = "Receives of one message before SQS moves it to the dead-letter queue (a malformed notice is never deleted by the daemon)."
  type        = number
  default     = 5

  validation {
    condition     = var.max_receive_count >= 1 && var.max_receive_count <= 1000
    error_message = "max_receive_count: 1-1000."
  }
}

variable "alarm_actions" {
  description = "ARNs (SNS topics) notified when a message lands in the dead-letter queue. Empty: the alarm only shows in CloudWatch."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for a in var.alarm_actions : can(regex("^arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:.+$", a))])
    error_message = "alarm_actions: SNS topic ARNs (arn:aws:sns:<region>:<account>:<topic>)."
  }
}

# -- logs and keys --------------------------------------------------------------

variable "log_retention_days" {
  description = "Retention of the daemon's CloudWatch log group (a value CloudWatch Logs accepts, at least a year)."
  type        = number
  default     = 365

  validation {
    condition     = contains([365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.log_retention_days)
    error_message = "log_retention_days: one of CloudWatch's values of a year or more (365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653)."
  }
}

variable "kms_deletion_window_days" {
  description = "Waiting period before the module's KMS key is deleted after destroy."
  type        = number
  default     = 30

  validation {
    condition     = var.kms_deletion_window_days >= 7 && var.kms_deletion_window_days <= 30
    error_message = "kms_deletion_window_days: 7-30."
  }
}

# -- state store ----------------------------------------------------------------

variable "state_backend" {
  description = "Where the daemon keeps its state: \"sqlite\" (a file on an encrypted EFS file system) or \"postgres\" (an encrypted, private RDS PostgreSQL instance whose password RDS keeps in Secrets Manager)."
  type        = string
  default     = "sqlite"

  validation {
    condition     = contains(["sqlite", "postgres"], var.state_backend)
    error_message = "state_backend: \"sqlite\" or \"postgres\"."
  }
}

variable "db_instance_class" {
  description = "RDS instance class (postgres backend)."
  type        = string
  default     = "db.t4g.micro"

  validation {
    condition     = can(regex("^db\\.[a-z0-9-]+\\.[a-z0-9]+$", var.db_instance_class))
    error_message = "db_instance_class: names like db.t4g.micro."
  }
}

variable "db_engine_version" {
  description = "PostgreSQL major version (postgres backend); the parameter group family follows it."
  type        = string
  default     = "16"

  validation {
    condition     = can(regex("^1[4-7]$", var.db_engine_version))
    error_message = "db_engine_version: a PostgreSQL major version 14-17."
  }
}

variable "db_allocated_storage_gb" {
  description = "Allocated storage of the RDS instance in GiB (postgres backend)."
  type        = number
  default     = 20

  validation {
    condition     = var.db_allocated_storage_gb >= 20 && var.db_allocated_storage_gb <= 65536
    error_message = "db_allocated_storage_gb: 20-65536."
  }
}

variable "db_multi_az" {
  description = "Run the RDS instance Multi-AZ (postgres backend). The daemon survives a store outage by stopping, so single-AZ is a cost choice, not a safety one."
  type        = bool
  default     = true
}

variable "db_backup_retention_days" {
  description = "Automated backup retention of the RDS instance (postgres backend)."
  type        = number
  default     = 7

  validation {
    condition     = var.db_backup_retention_days >= 1 && var.db_backup_retention_days <= 35
    error_message = "db_backup_retention_days: 1-35."
  }
}

variable "db_username" {
  description = "Master user name of the RDS instance (postgres backend). Its password is generated and rotated by RDS in Secrets Manager; no password variable exists."
  type        = string
  default     = "spotfolio"

  validation {
    condition     = can(regex("^[a-z][a-z0-9_]{0,62}$", var.db_username)) && !contains(["admin", "postgres", "rdsadmin"], var.db_username)
    error_message = "db_username: lowercase letters, digits, _; not a reserved name."
  }
}

variable "deletion_protection" {
  description = "Protect the state store (RDS instance) from deletion; set false before destroying."
  type        = bool
  default     = true
}
