"""``SPOTFOLIO_*`` environment variables laid over the daemon's config file.

Owns: the mapping from variable names to config keys, the parsing of their
values, and ``validate_with_environment`` (file data + environment +
command-line overrides, validated once; a bad variable is an ``InputError``
naming the variable, CLI exit 2).

Names: ``SPOTFOLIO_<KEY>`` for a top-level key (``SPOTFOLIO_OWNER``,
``SPOTFOLIO_STORE_URL``), ``SPOTFOLIO_<KEY>__<SUBKEY>`` for a key inside a
section (``SPOTFOLIO_INTERVALS__RECONCILE_S``, ``SPOTFOLIO_SIM__SEED``,
``SPOTFOLIO_LIFECYCLE__RETURN_MIN_DWELL_S``), upper or lower case. Values:
a scalar key takes the text as it is (pydantic reads ``60`` as a number,
``true`` as a boolean); a section, list or mapping key given whole
(``SPOTFOLIO_PROVIDERS='[aws, gcp]'``, ``SPOTFOLIO_COMMITTED='{aws/us-east-1/
g5.xlarge: 4}'``), and a key inside a free-form mapping (``provider_options``,
``market_options``, ``lifecycle``), is read as YAML, as the file would
give it (``SPOTFOLIO_LIFECYCLE__RETURN_LEAD_S=600`` is the number 600). An
empty variable counts as unset. A relative path (and a relative
``sqlite:///`` URL) is relative to the working directory, not to the
config file. A variable naming a section with an unknown sub-key
(``SPOTFOLIO_INTERVALS__RECONCLE_S``) is an error; other ``SPOTFOLIO_*``
names that match no key (``SPOTFOLIO_CONFIG_YAML``, set by the Terraform
module's entrypoint) are not config keys and are left alone.

Precedence: command-line options > environment > config file > defaults.
The file is the artifact a deployment ships (the SSM parameter, the image);
the environment is bound later and per deployment (a task definition, one
shell), so the later, more specific source wins, as in pydantic-settings and
twelve-factor tools.

Must not: read ``os.environ`` itself (the composition root passes it), or
know the meaning of any key (the models do).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from markets.errors import InputError
from markets.validation import input_error_from, read_yaml

__all__ = [
    "LOADER_KEYS",
    "PREFIX",
    "EnvOverlay",
    "env_name",
    "read_environment",
    "validate_with_environment",
]

PREFIX = "SPOTFOLIO_"
SEP = "__"
M = TypeVar("M", bound=BaseModel)


def env_name(*path: str) -> str:
    """The variable for a config key: ``env_name("intervals", "reconcile_s")``."""
    return PREFIX + SEP.join(p.upper() for p in path)


def _args(annotation: object) -> tuple[object, ...]:
    """The members of a union (``X | None``), or the annotation alone."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return tuple(a for a in typing.get_args(annotation) if a is not type(None))
    return (annotation,)


def _model(annotation: object) -> type[BaseModel] | None:
    for a in _args(annotation):
        if isinstance(a, type) and issubclass(a, BaseModel):
            return a
    return None


def _structured(annotation: object) -> bool:
    """A mapping, list or section: given whole, its value is YAML."""
    for a in _args(annotation):
        origin = typing.get_origin(a) or a
        if origin in (dict, list, tuple, set) or (isinstance(a, type) and issubclass(a, BaseModel)):
            return True
    return False


def _is_path(annotation: object) -> bool:
    return any(a is Path for a in _args(annotation))


@dataclass
class EnvOverlay:
    """What the environment sets: nested data, and which variable set which key."""

    data: dict[str, object] = field(default_factory=dict)
    origins: dict[str, tuple[str, str]] = field(default_factory=dict)  # "a.b" -> (name, raw)

    def over(self, base: Mapping[str, object]) -> dict[str, object]:
        """``base`` with the environment's keys laid over it (sections merged)."""
        out = dict(base)
        for key, value in self.data.items():
            below = out.get(key)
            if isinstance(value, dict) and isinstance(below, dict):
                out[key] = {**below, **value}
            else:
                out[key] = value
        return out

    def input_error(self, e: ValidationError) -> InputError | None:
        """The error as one naming its variable, if the environment set that key."""
        err = input_error_from("environment", e)
        where = err.field or ""
        for path, (name, raw) in sorted(self.origins.items(), key=lambda kv: -len(kv[0])):
            if where == path or where.startswith((f"{path}.", f"{path}[")):
                return InputError(name, None, err.expected, got=raw)
        return None


def _value(name: str, raw: str, annotation: object) -> object:
    if _structured(annotation) or annotation is object:
        return read_yaml(raw, name)
    if _is_path(annotation) and not Path(raw).is_absolute():
        return str(Path.cwd() / raw)
    if raw.startswith("sqlite:///") and not raw.startswith("sqlite:////"):
        rel = raw.removeprefix("sqlite:///")
        if rel and rel != ":memory:":
            return f"sqlite:///{Path.cwd() / rel}"
    return raw


# Fields the config loader sets itself (where the settings were read), not
# settings: no variable sets them.
LOADER_KEYS = frozenset({"config_file"})


def read_environment(model: type[BaseModel], environ: Mapping[str, str]) -> EnvOverlay:
    """The ``SPOTFOLIO_*`` variables of ``environ`` that name keys of ``model``."""
    overlay = EnvOverlay()
    fields = model.model_fields
    for name, raw in sorted(environ.items()):
        upper = name.upper()
        if not upper.startswith(PREFIX) or raw == "":
            continue
        top, _, sub = upper.removeprefix(PREFIX).lower().partition(SEP)
        if top not in fields or top in LOADER_KEYS:
            continue  # not a config key (SPOTFOLIO_CONFIG_YAML, a hook's variables)
        annotation = fields[top].annotation
        if not sub:
            overlay.data[top] = _value(name, raw, annotation)
            overlay.origins[top] = (name, raw)
            continue
        section = _model(annotation)
        if section is not None:
            if sub not in section.model_fields:
                known = ", ".join(env_name(top, k) for k in section.model_fields)
                raise InputError(name, None, f"a key of {top} ({known})", got=raw)
            sub_annotation: object = section.model_fields[sub].annotation
        elif _structured(annotation):
            sub_annotation = object  # a free-form mapping: its own model judges the value
        else:
            raise InputError(name, None, f"{env_name(top)} ({top} has no sub-keys)", got=raw)
        target = overlay.data.setdefault(top, {})
        if not isinstance(target, dict):
            raise InputError(name, None, f"either {env_name(top)} or its sub-keys, not both")
        target[sub] = _value(name, raw, sub_annotation)
        overlay.origins[f"{top}.{sub}"] = (name, raw)
    return overlay


def validate_with_environment(
    model: type[M],
    data: Mapping[str, object],
    source: str,
    environ: Mapping[str, str] | None,
    overrides: Mapping[str, object] | None = None,
) -> M:
    """``model`` from ``data`` (read from ``source``), the environment's
    ``SPOTFOLIO_*`` keys over it and ``overrides`` (non-None) over both."""
    overlay = read_environment(model, environ or {})
    merged = overlay.over(data)
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    merged.update(given)
    for path in [p for p in overlay.origins if p.split(".")[0] in given]:
        del overlay.origins[path]  # the command line replaced what the variable set
    try:
        return model.model_validate(merged)
    except ValidationError as e:
        raise overlay.input_error(e) or input_error_from(source, e) from e
