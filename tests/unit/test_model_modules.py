"""Modules that define pydantic models evaluate their annotations when the class is made.

With `from __future__ import annotations` every annotation is a string, and pydantic compiles
and evaluates each field's string at class creation: about a fifth of what making a model
costs, paid by every cold start for every model imported (docs/architecture.md, "Cold start").
Other modules keep the future import; these must not bring it back.
"""

import __future__

from pydantic import BaseModel

import functions
import shared
from tests.support.modules import defined_subclasses


def test_model_modules_do_not_postpone_annotations() -> None:
    modules = {module.__name__: module for module, _ in defined_subclasses((shared, functions), BaseModel)}
    assert {"shared.contract", "shared.job", "shared.settings"} <= modules.keys()
    postponed = [
        name for name, module in modules.items() if vars(module).get("annotations") is __future__.annotations
    ]
    assert postponed == []
