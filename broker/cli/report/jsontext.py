"""The what-if report as the JSON document itself (``--format json``, ``--json``).

Owns: ``render_json(doc)``: the document, indented, NaN and infinities as
``null`` (JSON has neither), as ``broker.cli._output.emit_json`` prints it.

Must not: change the document.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from broker.cli._output import clean

__all__ = ["render_json"]


def render_json(doc: Mapping[str, object]) -> str:
    return json.dumps(clean(dict(doc)), indent=2, default=str) + "\n"
