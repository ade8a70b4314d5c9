"""SchemaValidator on the `jsonschema` library (the worker's layer only; the API functions check
schemas with shared.extraction.schema_subset and import no validator).

`jsonschema` is the reference implementation of the specification for Python and is kept
current with it; it is imported on the first structured answer, so a worker that runs no
extract job never pays for the import. Schemas are in the strict subset, so Draft 2020-12
semantics and the format checker cover every keyword they may hold.
"""

from __future__ import annotations

from typing import Any


class JsonSchemaValidator:
    """Validates with `jsonschema`'s Draft 2020-12 validator, formats checked."""

    def first_problem(self, value: Any, schema: dict[str, Any]) -> str | None:
        """The JSON pointer of the first error `jsonschema` finds (by path), or None."""
        from jsonschema import Draft202012Validator  # noqa: PLC0415 - only extract jobs pay the import

        validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
        errors = sorted(validator.iter_errors(value), key=lambda error: list(map(str, error.absolute_path)))
        if not errors:
            return None
        return "".join(
            f"/{str(part).replace('~', '~0').replace('/', '~1')}" for part in errors[0].absolute_path
        )
