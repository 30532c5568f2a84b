"""Options shared by several commands, handed to a command as one typed value.

Owns: ``bundled(cls, options)``: a decorator that stacks ``options`` (click
decorators) on a command callback whose first parameter is a frozen
dataclass ``cls``; the values of the options named like ``cls``'s fields are
collected into one ``cls``, the callback's own options stay keyword
arguments, as click passes them. ``whatif``/``plan`` (``CommonOptions``) and
``cost ...`` (``RateOptions``, ``RunOptions``) use it.

Must not: validate values (the command or the layer below does).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["OptionDecorator", "bundled"]

P = ParamSpec("P")
R = TypeVar("R")
D = TypeVar("D", bound="DataclassInstance")
FC = TypeVar("FC", bound=Callable[..., object])


class OptionDecorator(Protocol):
    """What ``click.option(...)`` returns: it adds the option to a callback."""

    def __call__(self, f: FC, /) -> FC: ...


def bundled(
    cls: type[D], options: Sequence[OptionDecorator]
) -> Callable[[Callable[Concatenate[D, P], R]], Callable[P, R]]:
    """Stack ``options`` (the first one listed first in ``--help``) on a
    callback taking a ``cls`` first; see the module docstring."""
    names = [fld.name for fld in fields(cls)]

    def decorate(f: Callable[Concatenate[D, P], R]) -> Callable[P, R]:
        @functools.wraps(f)
        def callback(*args: P.args, **kwargs: P.kwargs) -> R:
            # click passes every option as a keyword argument whose type is
            # set at run time by the option's type= (Any: click's callback API).
            values: dict[str, Any] = {n: kwargs.pop(n) for n in names}
            return f(cls(**values), *args, **kwargs)

        out: Callable[P, R] = callback
        for option in reversed(options):
            out = option(out)
        return out

    return decorate
