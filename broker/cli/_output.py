"""Shared output helpers for the CLI: JSON to stdout, rich tables to a console."""

from __future__ import annotations

import json
import math

import click
from rich.console import Console

__all__ = ["clean", "console", "emit_json", "err_console"]

console = Console()
err_console = Console(stderr=True)


def clean(obj: object) -> object:
    """``obj`` with NaN and infinities as ``None``, keys as strings."""
    if isinstance(obj, float):
        if math.isnan(obj) or math.isinf(obj):
            return None
        return obj
    if isinstance(obj, dict):
        return {str(k): clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [clean(v) for v in obj]
    return obj


def emit_json(obj: object) -> None:
    """Print one JSON object (NaN/inf become null: JSON has neither)."""
    click.echo(json.dumps(clean(obj), indent=2, sort_keys=False, default=str))
