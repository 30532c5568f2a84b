"""Economics and decision rules: pure functions, no I/O.

May import only the data model of ``markets`` (model, errors, clock).
"""

__all__: list[str] = []
