terraform {
  # optional() object attributes with defaults need 1.3; `check` blocks and
  # the validation messages used here are 1.5.
  required_version = ">= 1.5"

  required_providers {
    aws = {
      source = "hashicorp/aws"
      # Validated (init, validate, fmt, checkov, `terraform test`) against
      # 5.100.0, the only release in the offline plugin directory CI uses.
      # 6.x allowed: its breaking changes (6.0.0 changelog) touch no argument
      # of the 30 resource and data types used here; the one deprecation that
      # does, data.aws_region's `name`, is avoided (`id` is the region name in
      # both majors), and tests/terraform/test_aws.py fails on v6's removed
      # arguments. 7.x: unknown, so excluded.
      version = ">= 5.100, < 7.0"
    }
  }
}
