# EventBridge rules: the events markets.aws.notices reads, each rule
# delivering to the notice queue. One rule per event so each can be seen (and
# muted) on its own:
#
# - the three EC2 events (DETAIL_TYPES, source EVENT_SOURCE);
# - AWS Health scheduled changes for EC2 (markets.aws.health: retirement,
#   scheduled stop, maintenance reboots), read as notices whose deadline is
#   the change's start time. AWS Health sends them to the default bus of the
#   affected region, about two weeks ahead for maintenance.
#
# EventBridge rules see the events of their own region only: instances the
# daemon launches in another region send their notices to that region's
# default bus, which this module does not wire (see README).

locals {
  notice_detail_types = {
    interruption = "EC2 Spot Instance Interruption Warning"
    rebalance    = "EC2 Instance Rebalance Recommendation"
    state_change = "EC2 Instance State-change Notification"
  }
  # markets.aws.health.HEALTH_EVENT_PATTERN
  health_event_pattern = {
    source        = ["aws.health"]
    "detail-type" = ["AWS Health Event"]
    detail = {
      service           = ["EC2"]
      eventTypeCategory = ["scheduledChange"]
    }
  }
  notice_patterns = merge(
    { for k, t in local.notice_detail_types : k => { source = ["aws.ec2"], "detail-type" = [t] } },
    { scheduled_change = local.health_event_pattern },
  )
  notice_descriptions = merge(local.notice_detail_types, {
    scheduled_change = "AWS Health EC2 scheduled change"
  })
}

resource "aws_cloudwatch_event_rule" "notices" {
  for_each = local.notice_patterns

  name          = "${var.name}-${replace(each.key, "_", "-")}"
  description   = "Spotfolio ${var.name}: ${local.notice_descriptions[each.key]} -> notice queue"
  event_pattern = jsonencode(each.value)
  tags          = local.tags
}

resource "aws_cloudwatch_event_target" "notices" {
  for_each = aws_cloudwatch_event_rule.notices

  rule      = each.value.name
  target_id = "notice-queue"
  arn       = aws_sqs_queue.notices.arn

  retry_policy {
    # An interruption warning is useless after its 120 s, but state changes
    # and scheduled changes are still worth delivering: an hour, then the
    # dead-letter queue.
    maximum_event_age_in_seconds = 3600
    maximum_retry_attempts       = 185
  }

  dead_letter_config {
    arn = aws_sqs_queue.dead_letters.arn
  }
}
