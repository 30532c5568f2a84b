"""Workloads: the classes with their default policies, and the validated fleet file.

``classes`` (``WorkloadClass`` and its defaults), ``spec`` (``Workload``,
``WorkloadSet``, ``load_workloads``). Must not: know markets or prices.
"""
