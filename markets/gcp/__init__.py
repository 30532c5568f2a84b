"""The live Google Cloud adapters (google-cloud-compute): market and provider.

Owns: ``markets.gcp.market.GcpMarket`` (a ``PriceSource``; factory
``open_gcp_market``), ``markets.gcp.provider.GcpProvider`` (a ``Provider``;
factory ``open_gcp_provider``), the SDK manifest ``GCP_API_CALLS``
(``markets.gcp.sdk``), error translation (``errors``), the readers of each API
(``inventory``), prices from a price file (``prices``), labels and names of
what we launch (``labels``), preemption notices from zone operations
(``preemption``) and the stand-alone on-instance watcher (``watcher``, stdlib
only: it is copied onto VMs).

Must not: be imported by ``policies`` or ``broker`` outside composition roots.
This package file imports nothing, so naming it costs no SDK import.
"""

from __future__ import annotations

__all__: list[str] = []
