terraform {
  # optional() object attributes with defaults need 1.3; `check` blocks and
  # the validation messages used here are 1.5.
  required_version = ">= 1.5"

  required_providers {
    aws = {
      source = "hashicorp/aws"
      # Validated offline against 5.100.0 (the plugin directory CI uses).
      version = "~> 5.100"
    }
  }
}
