"""What the wheel leaves out of the `outlast` package: the repository's own tools.

setuptools can exclude packages by configuration (pyproject.toml drops outlast.bench and
outlast.chaos), not single modules; this build_py drops those too (outlast/fuzz.py). pyproject's
[tool.setuptools.cmdclass] loads it from this file at build time, so it imports setuptools only.
An editable install still maps the whole directory: `make fuzz` works from the checkout.
"""

from __future__ import annotations

from pathlib import PurePath

from setuptools.command.build_py import build_py  # type: ignore[import-untyped]

REPOSITORY_ONLY_MODULES = frozenset({"outlast/fuzz.py"})


class BuildPy(build_py):  # type: ignore[misc] # setuptools ships no type hints here
    """build_py without the repository-only modules."""

    def find_package_modules(self, package: str, package_dir: str) -> list[tuple[str, str, str]]:
        """The package's modules, less the ones only the repository runs."""
        modules: list[tuple[str, str, str]] = super().find_package_modules(package, package_dir)
        return [m for m in modules if PurePath(m[2]).as_posix() not in REPOSITORY_ONLY_MODULES]
