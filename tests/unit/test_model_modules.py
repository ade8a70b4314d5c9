"""Modules that define pydantic models evaluate their annotations when the class is made.

With `from __future__ import annotations` every annotation is a string, and pydantic compiles
and evaluates each field's string at class creation: about a fifth of what making a model
costs, paid by every cold start for every model imported (docs/architecture.md, "Cold start").
Other modules keep the future import; these must not bring it back.
"""

import __future__

import importlib
import inspect
import pkgutil
from types import ModuleType

from pydantic import BaseModel

import functions
import shared


def _modules() -> list[ModuleType]:
    found: list[ModuleType] = []
    for package in (shared, functions):
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            found.append(importlib.import_module(info.name))
    return found


def _defines_models(module: ModuleType) -> bool:
    return any(
        inspect.isclass(value) and issubclass(value, BaseModel) and value.__module__ == module.__name__
        for value in vars(module).values()
    )


def test_model_modules_do_not_postpone_annotations() -> None:
    model_modules = [module for module in _modules() if _defines_models(module)]
    assert {"shared.contract", "shared.job", "shared.settings"} <= {m.__name__ for m in model_modules}
    postponed = [
        module.__name__
        for module in model_modules
        if vars(module).get("annotations") is __future__.annotations
    ]
    assert postponed == []
