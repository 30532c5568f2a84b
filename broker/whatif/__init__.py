"""The cost what-if: Spotfolio beside the rules people use, billed alike.

``run`` (``run_whatif``), ``baselines`` (the alternatives as plans of the same
shape) and ``billing`` (a plan billed against what actually happened).
"""
