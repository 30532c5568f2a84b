"""The embedded default market: the catalog's list prices plus a seeded spot model.

``calibration`` (every figure of the spot model, with its source), ``spot_model``
(seeded parameters, zone paths and spot prices), ``market`` (``DefaultMarket``
and ``open_default_market``). No I/O, no credentials.
"""
