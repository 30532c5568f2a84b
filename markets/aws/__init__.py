"""The live AWS market adapter (boto3): prices, placement and instance types.

Owns: ``markets.aws.market.AwsMarket`` and its factory ``open_aws_market``
(named by ``markets.registry``), the SDK manifest ``AWS_API_CALLS``
(``markets.aws.sdk``), and the readers of each API (``inventory``, ``spot``,
``pricing``), error translation (``errors``) and row validation (``rows``).

Must not: be imported by ``policies`` or ``broker`` outside composition roots.
This package file imports nothing, so naming it costs no SDK import.
"""

from __future__ import annotations

__all__: list[str] = []
