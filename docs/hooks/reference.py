"""The generated reference pages: the CLI from Click, the config files from JSON Schema.

Owns docs/reference/cli.md and docs/reference/schemas.md; run as a MkDocs hook
(before each build) or as `python docs/hooks/reference.py` to rewrite them.
`tests/docs/test_docs.py` fails while the committed pages differ from what this
writes, so the reference cannot drift from the code. Must not import anything
but the CLI's entry point and the schema files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

ROOT = Path(__file__).resolve().parents[2]
CLI_PAGE = ROOT / "docs" / "reference" / "cli.md"
SCHEMA_PAGE = ROOT / "docs" / "reference" / "schemas.md"


def _command_md(cmd: click.Command, path: list[str], out: list[str]) -> None:
    name = " ".join(path)
    out.append(f"{'#' * min(len(path) + 1, 4)} `{name}`\n")
    ctx = click.Context(cmd, info_name=name)
    help_text = cmd.help or cmd.short_help or ""
    if help_text:
        out.append(help_text.strip().replace("\b\n", "") + "\n")
    out.append(
        "```text\n"
        + " ".join(cmd.collect_usage_pieces(ctx)).join([f"Usage: {name} ", ""])
        + "\n```\n"
    )
    rows = []
    for p in cmd.get_params(ctx):
        rec = p.get_help_record(ctx)
        if rec is None:
            continue
        opt, text = rec
        cell = text.replace("|", "\\|").replace("\n", " ")
        rows.append(f"| `{opt}` | {cell} |")
    if rows:
        out.append("| option | meaning |\n|---|---|\n" + "\n".join(rows) + "\n")
    if isinstance(cmd, click.Group):
        for sub_name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, sub_name)
            if sub is not None and not sub.hidden:
                _command_md(sub, [*path, sub_name], out)


def cli_page() -> str:
    from broker.cli import cli as main

    out = [
        "# CLI reference\n",
        "Generated from the `spotfolio` command's own definitions "
        "(`docs/hooks/reference.py`); `spotfolio COMMAND --help` prints the same.\n",
    ]
    _command_md(main, ["spotfolio"], out)
    return "\n".join(out)


def _schema_rows(schema: dict[str, Any], prefix: str, rows: list[str], depth: int = 0) -> None:
    props = schema.get("properties", {})
    required = set(schema.get("required", []))
    for key, sub in props.items():
        field = f"{prefix}{key}"
        kind = sub.get("type", "")
        if isinstance(kind, list):
            kind = " or ".join(kind)
        if not kind and "$ref" in sub:
            kind = sub["$ref"].rsplit("/", 1)[-1]
        desc = (
            (sub.get("description") or sub.get("title") or "")
            .replace("|", "\\|")
            .replace("\n", " ")
        )
        default = f"`{json.dumps(sub['default'])}`" if "default" in sub else ""
        rows.append(
            f"| `{field}` | {kind} | {'yes' if key in required else ''} | {default} | {desc} |"
        )
        if depth < 3 and sub.get("type") == "object":
            _schema_rows(sub, field + ".", rows, depth + 1)


def schema_page() -> str:
    out = [
        "# Configuration reference\n",
        "Generated from the JSON Schemas in `schemas/` (`docs/hooks/reference.py`). "
        "Editors that read JSON Schema validate a file against them as you type.\n",
    ]
    for path in sorted((ROOT / "schemas").glob("*.schema.json")):
        schema = json.loads(path.read_text())
        out.append(f"## `{path.name}`\n")
        if schema.get("description"):
            out.append(str(schema["description"]).strip() + "\n")
        rows: list[str] = []
        _schema_rows(schema, "", rows)
        for def_name, sub in sorted(schema.get("$defs", {}).items()):
            if sub.get("properties"):
                _schema_rows(sub, f"{def_name}.", rows)
        out.append(
            "| field | type | required | default | meaning |\n|---|---|---|---|---|\n"
            + "\n".join(rows)
            + "\n"
        )
    return "\n".join(out)


def write() -> None:
    CLI_PAGE.write_text(cli_page())
    SCHEMA_PAGE.write_text(schema_page())


def on_pre_build(config: object) -> None:
    """MkDocs hook: rewrite the reference pages before the files are collected."""
    write()


if __name__ == "__main__":
    write()
