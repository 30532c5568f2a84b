"""JSON Schemas of the files a user writes, generated from their models.

Owns: ``SCHEMAS`` (file kind -> the pydantic model that validates it), ``schema``
(the JSON Schema of one, draft 2020-12, input side: field aliases such as a
workload's ``class``) and ``render`` (its text as published in ``schemas/``).
``python -m broker.schemas`` rewrites the published files;
``python -m broker.schemas --check`` exits 1 when one is out of date
(``tests/unit/broker/test_schemas.py`` runs the same check).

A schema says what the models check field by field. What they check across
fields (``intervals.upkeep_s`` below ``lifecycle.return_lead_s``, a field
of another workload class, repeated workload names) and what other models
check later (``provider_options`` by the provider's settings, ``lifecycle``
by ``LifecycleConfig``) stays with the loaders, which name the field either
way.

Must not: validate files itself (the loaders do) or be imported by them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pydantic import BaseModel

from broker.daemon.config import DaemonConfig
from markets.blocks import BlockFile
from policies.workloads.spec import WorkloadSet

__all__ = ["SCHEMAS", "SCHEMA_DIR", "main", "render", "schema", "schema_path"]

SCHEMAS: dict[str, type[BaseModel]] = {
    "blocks": BlockFile,  # spotfolio whatif --blocks FILE
    "daemon-config": DaemonConfig,  # spotfolio daemon --config FILE
    "workloads": WorkloadSet,  # --policies FILE, the config's workloads
}
TITLES = {
    "blocks": "Spotfolio reserved-ahead blocks file (spotfolio whatif --blocks)",
    "daemon-config": "Spotfolio daemon configuration (spotfolio daemon --config)",
    "workloads": "Spotfolio workloads file (--policies, workloads:)",
}
# The published copies, in a source checkout (the repository's schemas/).
SCHEMA_DIR = Path(__file__).resolve().parents[1] / "schemas"
DRAFT = "https://json-schema.org/draft/2020-12/schema"


def schema(kind: str) -> dict[str, object]:
    """The JSON Schema of a ``kind`` of file (a key of ``SCHEMAS``)."""
    body = SCHEMAS[kind].model_json_schema(by_alias=True, mode="validation")
    return {"$schema": DRAFT, **body, "title": TITLES[kind]}


def render(kind: str) -> str:
    return json.dumps(schema(kind), indent=2, ensure_ascii=False) + "\n"


def schema_path(kind: str, directory: Path = SCHEMA_DIR) -> Path:
    return directory / f"{kind}.schema.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write (or --check) the published JSON Schemas.")
    parser.add_argument("--check", action="store_true", help="exit 1 if a file is out of date")
    parser.add_argument("--dir", type=Path, default=SCHEMA_DIR)
    args = parser.parse_args(argv)
    stale = []
    for kind in SCHEMAS:
        path = schema_path(kind, args.dir)
        text = render(kind)
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        if args.check:
            stale.append(str(path))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    if stale:
        print(f"out of date (run python -m broker.schemas): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
