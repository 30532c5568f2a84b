# EventBridge rules: the three EC2 events markets.aws.notices reads
# (DETAIL_TYPES, source EVENT_SOURCE), each rule delivering to the notice
# queue. One rule per event so each can be seen (and muted) on its own.
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
}

resource "aws_cloudwatch_event_rule" "notices" {
  for_each = local.notice_detail_types

  name        = "${var.name}-${replace(each.key, "_", "-")}"
  description = "Spotfolio ${var.name}: ${each.value} -> notice queue"
  event_pattern = jsonencode({
    source        = ["aws.ec2"]
    "detail-type" = [each.value]
  })
  tags = local.tags
}

resource "aws_cloudwatch_event_target" "notices" {
  for_each = aws_cloudwatch_event_rule.notices

  rule      = each.value.name
  target_id = "notice-queue"
  arn       = aws_sqs_queue.notices.arn

  retry_policy {
    # An interruption warning is useless after its 120 s, but state changes
    # are still worth delivering: an hour, then the dead-letter queue.
    maximum_event_age_in_seconds = 3600
    maximum_retry_attempts       = 185
  }

  dead_letter_config {
    arn = aws_sqs_queue.dead_letters.arn
  }
}
