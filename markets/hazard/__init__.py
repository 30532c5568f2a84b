"""The interruption hazard: how often spot is taken back, and how it bunches.

``prior`` (an advisor bucket as a Gamma prior), ``probes`` (evidence from a
probe series or trace), ``posterior`` (the per-pool estimate) and
``clustering`` (revocations in time and across the pools of a zone).
"""
