"""The classes a package's modules define, for tests that hold a rule over all of them."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterator
from types import ModuleType


def defined_subclasses[T](
    packages: tuple[ModuleType, ...], base: type[T]
) -> Iterator[tuple[ModuleType, type[T]]]:
    """Each subclass of `base` that a module of these packages defines (not imports), with its module."""
    for package in packages:
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            module = importlib.import_module(info.name)
            for value in vars(module).values():
                if inspect.isclass(value) and issubclass(value, base) and value.__module__ == module.__name__:
                    yield module, value
