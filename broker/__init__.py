"""Deciding and acting: optimizer, lifecycle, daemon, simulator and the CLI.

Imports ``policies`` and the core of ``markets``; names a concrete cloud
adapter only in its composition roots (CLI, daemon wiring) via the registry.
"""

__all__: list[str] = []
