terraform {
  # Validation messages that name other variables and `check` blocks need 1.5.
  required_version = ">= 1.5"

  required_providers {
    google = {
      source = "hashicorp/google"
      # Written against the 5.x and 6.x arguments used here (no beta
      # resources). Not validated by `terraform validate` on these machines:
      # the offline plugin directory holds hashicorp/aws only (README).
      version = ">= 5.0, < 7.0"
    }
  }
}
