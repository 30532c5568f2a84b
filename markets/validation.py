"""Validation errors as one ``InputError``: file, field path, expectation, value.

Owns: the strict pydantic base (``StrictModel``: frozen, unknown keys
rejected), ``FieldError`` (a cross-field check that names its field),
``read_yaml`` / ``read_json`` (text to data; a syntax error or a repeated key
names the line; depth, expanded size and integer digits are bounded, so a
hostile document is one line, not a RecursionError) and
``input_error_from`` (the first pydantic error in plain words, its location
joined like ``workloads[2].max_spot_share``).

Must not: know what the files mean (``policies.workloads.spec``, ``broker.planning.demand``).
"""

from __future__ import annotations

import json
from collections.abc import Hashable

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import ErrorDetails

from markets.errors import InputError, RebuiltByState
from markets.redaction import secret_named

__all__ = [
    "MAX_DEPTH",
    "FieldError",
    "StrictModel",
    "input_error_from",
    "json_loads",
    "loc_path",
    "read_json",
    "read_yaml",
]


class FieldError(RebuiltByState, ValueError):
    """A cross-field check that failed; ``field`` is appended to the error path."""

    def __init__(self, field: str, message: str, got: object = None) -> None:
        super().__init__(message)
        self.field = field
        self.got = got


class StrictModel(BaseModel):
    """Frozen, unknown keys rejected, fields settable by name or alias."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


# Our files nest a handful of levels; PyYAML's composer and Python's json
# recurse once per level, so a 5,000-deep document would end in a
# RecursionError instead of a line naming the file.
MAX_DEPTH = 64
# Nodes after aliases are expanded: anchors let a few lines stand for
# billions of nodes ("billion laughs"), which validation would then walk.
MAX_NODES = 2_000_000
# Digits of one integer: Python refuses to convert more than 4,300 (a
# ValueError, not a YAML error), and no count of ours has more than 19.
MAX_DIGITS = 40


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects a key repeated in one mapping (PyYAML keeps the
    last), nesting deeper than ``MAX_DEPTH`` and more than ``MAX_NODES``
    nodes once aliases are expanded."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._sizes: dict[int, int] = {}

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"nesting at most {MAX_DEPTH} deep",
                    self.peek_event().start_mark,  # type: ignore[no-untyped-call]
                )
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if node is None:
            return None
        size = self._sizes.get(id(node))
        if size is None:
            size = 1
            if isinstance(node, yaml.SequenceNode):
                size += sum(self._sizes.get(id(c), 1) for c in node.value)
            elif isinstance(node, yaml.MappingNode):
                size += sum(
                    self._sizes.get(id(k), 1) + self._sizes.get(id(v), 1) for k, v in node.value
                )
            self._sizes[id(node)] = size
        if size > MAX_NODES:
            raise yaml.composer.ComposerError(
                None,
                None,
                f"at most {MAX_NODES:,} values once aliases are expanded",
                node.start_mark,
            )
        return node

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        digits = sum(ch.isdigit() for ch in str(node.value))
        if digits > MAX_DIGITS:
            raise yaml.constructor.ConstructorError(
                None, None, f"an integer of at most {MAX_DIGITS} digits", node.start_mark
            )
        value: int = super().construct_yaml_int(node)
        return value


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
_StrictLoader.add_constructor("tag:yaml.org,2002:int", _StrictLoader.construct_yaml_int)


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
        raise InputError(source, None, f"valid YAML ({' '.join(str(e).split())})") from e
    except (ValueError, OverflowError, RecursionError) as e:
        # a scalar PyYAML's constructors cannot convert (a timestamp in year 0)
        raise InputError(source, None, f"valid YAML ({' '.join(str(e).split())[:200]})") from e
    return data


def _depth_within(data: object, limit: int) -> bool:
    """Whether ``data`` nests at most ``limit`` lists/dicts deep (iterative)."""
    stack: list[tuple[object, int]] = [(data, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return False
            children = item.values() if isinstance(item, dict) else item
            stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return True


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise ValueError(f"an integer of at most {MAX_DIGITS} digits")
    return int(text)


def _no_constant(name: str) -> float:
    raise ValueError(f"a finite number, not {name}")


def json_loads(text: str, source: str) -> object:
    """``json.loads`` with ``read_json``'s bounds: a syntax error stays a
    ``json.JSONDecodeError`` (a caller may try JSON lines next); depth, digits
    and ``NaN``/``Infinity`` are an ``InputError`` naming ``source``."""
    try:
        data = json.loads(text, parse_int=_bounded_int, parse_constant=_no_constant)
    except json.JSONDecodeError:
        raise
    except RecursionError as e:
        raise InputError(source, None, f"JSON nesting at most {MAX_DEPTH} deep") from e
    except (ValueError, OverflowError) as e:
        raise InputError(source, None, f"valid JSON ({e})") from e
    if not _depth_within(data, MAX_DEPTH):
        raise InputError(source, None, f"JSON nesting at most {MAX_DEPTH} deep")
    return data


def read_json(text: str, source: str) -> object:
    """Parse JSON text: at most ``MAX_DEPTH`` deep, integers of at most
    ``MAX_DIGITS`` digits, no ``NaN``/``Infinity``; any failure names the file."""
    try:
        return json_loads(text, source)
    except json.JSONDecodeError as e:
        where = f"line {e.lineno}, column {e.colno}"
        raise InputError(source, where, f"valid JSON ({e.msg})") from e
