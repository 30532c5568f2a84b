"""Every exception class the project defines crosses a process boundary intact.

The walk imports every module of ``markets``, ``policies`` and ``broker`` and
collects each ``BaseException`` subclass defined there. Each is built with
sample arguments (``_SAMPLES`` for the constructors that take more than a
message), pickled and unpickled: the copy has the same type, message, ``args``
and fields. Once, all of them also go to a real ``ProcessPoolExecutor``
worker, which raises each: the parent gets the same error back, not a
``BrokenProcessPool`` or a ``TypeError`` from unpickling.
"""

from __future__ import annotations

import importlib
import inspect
import multiprocessing
import pickle
import pkgutil
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pytest

_PACKAGES = ("markets", "policies", "broker")
# Scripts alembic runs itself (they expect its context), not library modules.
_NOT_MODULES = (".migrations.env", ".migrations.versions", ".__main__")


def _project_exceptions() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for root in _PACKAGES:
        package = importlib.import_module(root)
        for info in pkgutil.walk_packages(package.__path__, f"{root}."):
            if any(part in info.name for part in _NOT_MODULES):
                continue
            module = importlib.import_module(info.name)
            for _name, obj in inspect.getmembers(module, inspect.isclass):
                if (
                    issubclass(obj, BaseException)
                    and obj.__module__ == info.name
                    and not obj.__name__.startswith("_")
                ):
                    found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return [found[k] for k in sorted(found)]


# Constructors that take more than one message: a sample call each.
# Any: each lambda is called with its own class, whose constructor it knows.
_SAMPLES: dict[str, Callable[[Any], BaseException]] = {
    "markets.errors.CapacityUnavailableError": lambda c: c(
        "no g5 left", pool_key="aws/us-east-1/g5"
    ),
    "markets.errors.InputError": lambda c: c("daemon.yaml", "sim.seed", "a whole number", got=True),
    "markets.errors.StaleDataError": lambda c: c("market", None, "a fresh snapshot", got="x"),
    "markets.errors.InfeasiblePlanError": lambda c: c("no plan", ["a needs 8", "b caps at 4"]),
    "markets.errors.SolverTimeLimitError": lambda c: c(12.5),
    "markets.catalog.UnknownInstanceTypeError": lambda c: c(
        "instance type", None, "a catalog instance type", got="g9.huge"
    ),
    "markets.extras.MissingExtraError": lambda c: c("store_url", "postgres", got="postgresql"),
    "markets.validation.FieldError": lambda c: c("intervals.upkeep_s", "fewer seconds", 900),
    "markets.aws.envelope.RejectedNotice": lambda c: c("account", "not ours"),
    "broker.daemon.store.migrations.SchemaTooNewError": lambda c: c("abc123", "def456"),
}


def _sample(cls: type[BaseException]) -> BaseException:
    key = f"{cls.__module__}.{cls.__qualname__}"
    if key in _SAMPLES:
        return _SAMPLES[key](cls)
    for base in cls.__mro__[1:]:  # a subclass that keeps its base's constructor
        base_key = f"{base.__module__}.{base.__qualname__}"
        if base_key in _SAMPLES and "__init__" not in vars(cls):
            return _SAMPLES[base_key](cls)
    return cls(f"a {cls.__name__} for the test")


def _fields(err: BaseException) -> dict[str, object]:
    return dict(vars(err))


CLASSES = _project_exceptions()


def test_the_walk_finds_the_error_tree() -> None:
    names = {c.__name__ for c in CLASSES}
    assert {"InputError", "FieldError", "LeaseLostError", "SchemaTooNewError"} <= names
    assert len(CLASSES) >= 25


def test_every_custom_constructor_has_a_sample() -> None:
    """A class with its own ``__init__`` that takes more than a message must be
    listed in ``_SAMPLES`` (else the round trip below would test only the
    single-message form)."""
    missing = []
    for cls in CLASSES:
        init = vars(cls).get("__init__")
        if init is None:
            continue
        params = [p for p in inspect.signature(init).parameters.values() if p.name != "self"]
        single = len(params) == 1 and params[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
        if not single and f"{cls.__module__}.{cls.__qualname__}" not in _SAMPLES:
            missing.append(cls.__qualname__)
    assert not missing, missing


@pytest.mark.parametrize("cls", CLASSES, ids=[f"{c.__module__}.{c.__qualname__}" for c in CLASSES])
def test_pickles_to_itself(cls: type[BaseException]) -> None:
    err = _sample(cls)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cls
    assert str(back) == str(err)
    assert back.args == err.args
    assert _fields(back) == _fields(err)


def _raise(err: BaseException) -> None:
    raise err


def test_every_error_comes_back_from_a_worker_process() -> None:
    errors = [_sample(c) for c in CLASSES]
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
        futures = [pool.submit(_raise, e) for e in errors]
        for err, fut in zip(errors, futures, strict=True):
            back = fut.exception(timeout=120)
            assert type(back) is type(err), (type(err), back)
            assert str(back) == str(err)
            assert _fields(back) == _fields(err)
