"""Plain environment parsing, for the functions whose cold start cannot afford pydantic.

The relay reads one variable; importing pydantic and building a settings model for it would be
most of the relay's own cold start (docs/architecture.md, "Cold start"). The rules are the
pydantic settings models' rules: every problem is found at once, at cold start, and the error
names each variable and what is wrong with it (never its value: a variable may hold a secret's
name, and error text reaches the logs).
"""

from __future__ import annotations

from collections.abc import Mapping


class SettingsError(ValueError):
    """The environment does not configure the function: which variables, and what is wrong."""

    def __init__(self, settings: str, problems: list[str]) -> None:
        super().__init__(f"{settings}: " + "; ".join(problems))
        self.problems = tuple(problems)


class EnvironmentReader:
    """Reads variables from one mapping and collects every problem before failing."""

    def __init__(self, settings: str, environ: Mapping[str, str]) -> None:
        self._settings = settings
        self._environ = environ
        self._problems: list[str] = []

    def text(self, name: str) -> str:
        """A required variable: present, and not blank."""
        value = self._environ.get(name)
        if value is None:
            self._problems.append(f"{name} is missing")
            return ""
        if not value.strip():
            self._problems.append(f"{name} is empty")
        return value

    def check(self) -> None:
        """Raise SettingsError naming every problem found so far."""
        if self._problems:
            raise SettingsError(self._settings, self._problems)
