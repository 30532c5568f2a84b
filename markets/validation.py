"""Validation errors as one ``InputError``: file, field path, expectation, value.

Owns: the strict pydantic base (``StrictModel``: frozen, unknown keys
rejected), ``FieldError`` (a cross-field check that names its field),
``read_yaml`` (YAML text to data; a syntax error or a repeated key names the
line) and ``input_error_from`` (the first pydantic error in plain words, its
location joined like ``workloads[2].max_spot_share``).

Must not: know what the files mean (``policies.workloads.spec``, ``broker.planning.demand``).
"""

from __future__ import annotations

from collections.abc import Hashable

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import ErrorDetails

from markets.errors import InputError
from markets.redaction import secret_named

__all__ = ["FieldError", "StrictModel", "input_error_from", "loc_path", "read_yaml"]


class FieldError(ValueError):
    """A cross-field check that failed; ``field`` is appended to the error path."""

    def __init__(self, field: str, message: str, got: object = None) -> None:
        super().__init__(message)
        self.field = field
        self.got = got


class StrictModel(BaseModel):
    """Frozen, unknown keys rejected, fields settable by name or alias."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects a key repeated in one mapping (PyYAML keeps the last)."""


def _no_duplicate_keys(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Hashable, object]:
    seen: set[Hashable] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicate_keys)


def loc_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _expected(err: ErrorDetails) -> str:
    kind, msg = err["type"], str(err["msg"])
    if kind == "missing":
        return "this required field"
    if kind == "extra_forbidden":
        return "a known field name (no field is called that)"
    if kind == "too_short":
        return f"at least {(err.get('ctx') or {}).get('min_length', 1)} item(s)"
    for prefix in ("Input should be ", "Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            rest = msg[len(prefix) :]
            return f"a value {rest}" if rest.startswith(("less", "greater")) else rest
    return msg[:1].lower() + msg[1:]


def input_error_from(source: str, exc: ValidationError, prefix: str = "") -> InputError:
    """The first pydantic error as one InputError: field path, plain expectation, input.

    ``prefix`` is prepended to the path (a model validated inside a larger file).
    """
    first = exc.errors(include_url=False)[0]
    loc: tuple[int | str, ...] = tuple(first["loc"])
    got = None if first["type"] == "missing" else first.get("input")
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, FieldError):
        loc, expected, got = (*loc, cause.field), str(cause), cause.got
    else:
        expected = _expected(first)
    if isinstance(got, dict | list):
        got = None  # a whole mapping is noise on one line
    if any(isinstance(p, str) and secret_named(p) for p in loc):
        got = None  # the value of a field named like a secret is never echoed
    path = loc_path(loc)
    if prefix:
        path = f"{prefix}{'' if not path or path.startswith('[') else '.'}{path}"
    return InputError(source, path or None, expected, got=got)


def read_yaml(text: str, source: str) -> object:
    """Parse YAML text; syntax errors and repeated keys name the line and column."""
    try:
        data = yaml.load(text, Loader=_StrictLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else None
        raise InputError(source, where, f"valid YAML ({e.problem or e.context})") from e
    except yaml.YAMLError as e:
        raise InputError(source, None, f"valid YAML ({e})") from e
    return data
