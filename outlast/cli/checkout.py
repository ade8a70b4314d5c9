"""Local mode and the operator tools run the functions' own code (`shared`, `functions`, `infra`),
which lives in the repository, not in the installed package: they work from a checkout.

`use_checkout` finds it (the checkout this package was installed from in editable mode, else the
current directory or one above it) and puts it on sys.path, or says what to do.
"""

from __future__ import annotations

import sys
from pathlib import Path

import outlast
from outlast.cli.errors import CliError

_MARKERS = ("shared/__init__.py", "functions/__init__.py", "infra/app.py", "pyproject.toml")


def _is_checkout(path: Path) -> bool:
    return all((path / marker).is_file() for marker in _MARKERS)


def find_checkout() -> Path | None:
    """The repository root, or None."""
    candidates = [Path(outlast.__file__).resolve().parents[1], *[Path.cwd(), *Path.cwd().parents]]
    return next((path for path in candidates if _is_checkout(path)), None)


def use_checkout(what: str) -> Path:
    """Make the checkout's packages importable for `what` (CliError when there is none)."""
    root = find_checkout()
    if root is None:
        raise CliError(
            f"{what} runs the functions' code, which lives in the outlast repository: run it from a "
            "checkout (git clone, then `make install`); the installed package holds the client only"
        )
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return root
