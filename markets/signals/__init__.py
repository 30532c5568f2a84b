"""Live signals: monitoring systems read as ``markets.protocols.MetricSource``.

Owns: the readers of a metric's recent values, one module per system
(``prometheus.PrometheusReader`` over the Prometheus HTTP API,
``cloudwatch.CloudWatchReader`` over CloudWatch ``GetMetricData``) and the
checks every sample passes (``samples``). A serving workload's
``demand_metric`` names one of them; ``broker.planning.autoscale`` turns
their values into replicas.

``cloudwatch`` needs the ``aws`` extra (botocore), so this package does not
import it: the composition root that opens a CloudWatch reader does.

Must not: decide anything (how many replicas: ``broker.planning.autoscale``),
cache values, or log a credential (URLs pass ``markets.redaction.redact``).
"""

from markets.signals.samples import MAX_METRIC_VALUE, BadReplyError, checked_value

__all__ = ["MAX_METRIC_VALUE", "BadReplyError", "checked_value"]
