# The notice queue (EventBridge -> SQS -> markets.aws.notices.SqsNotices)
# and its dead-letter queue.
#
# Encryption: the module's customer managed key, not SSE-SQS. Both encrypt at
# rest, but with SSE-SQS the key policy cannot be read or narrowed, and
# checkov's CKV2_AWS_73 asks for a CMK; with the CMK, EventBridge needs
# kms:GenerateDataKey/Decrypt (granted in main.tf to our rules only) and the
# daemon kms:Decrypt through SQS (iam.tf).

resource "aws_sqs_queue" "dead_letters" {
  name                              = "${var.name}-notices-dlq"
  kms_master_key_id                 = aws_kms_key.this.arn
  kms_data_key_reuse_period_seconds = 300
  # The longest SQS keeps a message: time to look at what went wrong.
  message_retention_seconds = 1209600
  tags                      = local.tags
}

resource "aws_sqs_queue" "notices" {
  name                              = "${var.name}-notices"
  kms_master_key_id                 = aws_kms_key.this.arn
  kms_data_key_reuse_period_seconds = 300
  message_retention_seconds         = var.notice_retention_s
  # The daemon sets its own VisibilityTimeout and WaitTimeSeconds on every
  # receive (markets.aws.notices: 30 s and 5 s); these are the same values
  # for any other reader.
  visibility_timeout_seconds = 30
  receive_wait_time_seconds  = 5
  # A message the daemon cannot read is never deleted by it: after
  # max_receive_count receives SQS moves it here.
  redrive_policy = jsonencode({
    deadLetterTargetArn = aws_sqs_queue.dead_letters.arn
    maxReceiveCount     = var.max_receive_count
  })
  tags = local.tags
}

resource "aws_sqs_queue_redrive_allow_policy" "dead_letters" {
  queue_url = aws_sqs_queue.dead_letters.id
  redrive_allow_policy = jsonencode({
    redrivePermission = "byQueue"
    sourceQueueArns   = [aws_sqs_queue.notices.arn]
  })
}

# Only our EventBridge rules may send (to the queue, and to the dead-letter
# queue when a delivery fails); nothing may use either queue without TLS.
data "aws_iam_policy_document" "queue" {
  for_each = {
    notices      = aws_sqs_queue.notices.arn
    dead_letters = aws_sqs_queue.dead_letters.arn
  }

  statement {
    sid       = "OurEventBridgeRulesSend"
    actions   = ["sqs:SendMessage"]
    resources = [each.value]
    principals {
      type        = "Service"
      identifiers = ["events.amazonaws.com"]
    }
    condition {
      test     = "ArnEquals"
      variable = "aws:SourceArn"
      values   = [for r in aws_cloudwatch_event_rule.notices : r.arn]
    }
  }

  statement {
    sid       = "DenyWithoutTls"
    effect    = "Deny"
    actions   = ["sqs:*"]
    resources = [each.value]
    principals {
      type        = "*"
      identifiers = ["*"]
    }
    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
}

resource "aws_sqs_queue_policy" "notices" {
  queue_url = aws_sqs_queue.notices.id
  policy    = data.aws_iam_policy_document.queue["notices"].json
}

resource "aws_sqs_queue_policy" "dead_letters" {
  queue_url = aws_sqs_queue.dead_letters.id
  policy    = data.aws_iam_policy_document.queue["dead_letters"].json
}

# Anything in the dead-letter queue is a notice the daemon never handled.
resource "aws_cloudwatch_metric_alarm" "dead_letters" {
  alarm_name          = "${var.name}-notices-dead-letters"
  alarm_description   = "Spotfolio ${var.name}: notices the daemon could not read or EventBridge could not deliver"
  namespace           = "AWS/SQS"
  metric_name         = "ApproximateNumberOfMessagesVisible"
  dimensions          = { QueueName = aws_sqs_queue.dead_letters.name }
  statistic           = "Maximum"
  period              = 300
  evaluation_periods  = 1
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_actions
  ok_actions          = var.alarm_actions
  tags                = local.tags
}
