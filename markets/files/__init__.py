"""Loaders of recorded market data: files in, typed values out.

``parsing`` (row bookkeeping: what was read, what was bad, where), ``prices``
(AWS spot price histories and our own price files), ``gcp_prices``, ``traces``
(availability / preemption traces), ``fleet_traces``, ``advisor`` (the Spot
Instance Advisor snapshot) and ``datadir`` (a directory of such files).
Must not: talk to a cloud or decide anything.
"""
