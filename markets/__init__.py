"""Reading markets: prices, placement and interruptions, from clouds and files.

The core (``model``, ``protocols``, ``registry``, ``errors``, ``clock``) is
what ``policies`` and ``broker`` may import. Cloud adapters live in
``markets.aws`` and ``markets.gcp`` and import their SDKs lazily.
"""

__all__: list[str] = []
