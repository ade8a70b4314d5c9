"""The OpenAPI document of the HTTP API, generated from the route code, and the client's models
generated from that document (`make openapi` runs both; tests/contract checks both for drift)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

TITLE = "outlast"
VERSION = "1.0.0"
DESCRIPTION = (
    "Durable LLM jobs: submit with an Idempotency-Key, poll the status URL (or follow live updates "
    "over the WebSocket a ticket opens), fetch the result; GET /v1/budget shows the tenant's "
    "monthly token budget; /v1/documents uploads files (PDF, docx, Markdown, text) to run jobs on. "
    "Every route needs a Cognito ID token (Authorization: Bearer). Errors are "
    "application/problem+json (RFC 9457) with a stable `code`."
)


def build_document() -> dict[str, Any]:
    """Merge the schemas of every API function's resolver into one document."""
    from aws_lambda_powertools.event_handler.openapi.merge import OpenAPIMerge  # noqa: PLC0415
    from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer  # noqa: PLC0415

    from functions.budget.routes import app as budget_app  # noqa: PLC0415
    from functions.documents.routes import app as documents_app  # noqa: PLC0415
    from functions.status.routes import app as status_app  # noqa: PLC0415
    from functions.submit.routes import app as submit_app  # noqa: PLC0415
    from functions.tickets.routes import app as tickets_app  # noqa: PLC0415

    merge = OpenAPIMerge(
        title=TITLE,
        version=VERSION,
        description=DESCRIPTION,
        security_schemes={"cognitoIdToken": HTTPBearer(bearerFormat="JWT")},
        security=[{"cognitoIdToken": []}],
        on_conflict="error",
    )
    for app in (submit_app, status_app, tickets_app, budget_app, documents_app):
        merge.add_schema(
            app.get_openapi_schema(title=TITLE, version=VERSION).model_dump(by_alias=True, exclude_none=True)
        )
    document: dict[str, Any] = json.loads(merge.get_openapi_json_schema())
    return _without_unreachable_422(document)


def _without_unreachable_422(document: dict[str, Any]) -> dict[str, Any]:
    """Drop the 422 answers Powertools documents for every validated route.

    shared.http maps validation failures to 400/413 problem+json, so a 422 is never sent; a
    documented status the code never returns would mislead clients and fuzzers.
    """
    for path_item in document.get("paths", {}).values():
        for operation in path_item.values():
            operation.get("responses", {}).pop("422", None)
    schemas = document.get("components", {}).get("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        schemas.pop(unused, None)
    return document


def render() -> str:
    """The committed form: sorted keys, two-space indent, trailing newline."""
    return json.dumps(build_document(), indent=2, sort_keys=True) + "\n"


# The client's documents: pydantic models with snake_case fields (camelCase aliases), the closed
# sets as Literals, no timestamp, formatted by ruff: one run always writes the same file.
MODELS_HEADER = (
    '"""GENERATED from docs/openapi.json by datamodel-code-generator (`make openapi`): do not edit.\n\n'
    "The API's documents as pydantic models; tests/contract/test_client_types.py fails when this file is\n"
    'not exactly what the generator makes of the committed document.\n"""'
)
MODELS_OPTIONS = (
    "--input-file-type", "openapi",
    "--output-model-type", "pydantic_v2.BaseModel",
    "--target-python-version", "3.13",
    "--snake-case-field", "--allow-population-by-field-name",
    "--use-annotated", "--use-standard-collections", "--use-union-operator", "--use-exact-imports",
    "--enum-field-as-literal", "all", "--collapse-root-models", "--field-constraints",
    "--output-datetime-class", "AwareDatetime",
    "--use-schema-description", "--use-double-quotes", "--keep-model-order", "--disable-timestamp",
    "--formatters", "ruff-format", "ruff-check",
)  # fmt: skip


def generate_models(document: Path, output: Path) -> None:
    """Write the client's models for an OpenAPI document (datamodel-code-generator, a dev tool)."""
    tool = shutil.which("datamodel-codegen", path=str(Path(sys.executable).parent))
    if tool is None:
        raise RuntimeError("datamodel-codegen is not installed: `make install` (the dev extra)")
    # Generated outside the repository, then copied: the generator's ruff formatting follows the
    # configuration it finds beside its output, so writing in place formatted the file at the
    # repository's line length and the drift test (which generates into a temporary directory) failed.
    with tempfile.TemporaryDirectory() as scratch:
        generated = Path(scratch) / "models.py"
        command = [tool, "--input", str(document.resolve()), "--output", str(generated), *MODELS_OPTIONS]
        subprocess.run([*command, "--custom-file-header", MODELS_HEADER], check=True, capture_output=True)  # noqa: S603
        output.write_text(generated.read_text())


def main(argv: list[str] | None = None) -> None:
    """Print the document (make openapi redirects it into docs/openapi.json); with
    `--client-models DOCUMENT OUTPUT`, write the client's models for the document instead."""
    arguments = sys.argv[1:] if argv is None else argv
    if arguments[:1] == ["--client-models"] and len(arguments) == 3:
        generate_models(Path(arguments[1]), Path(arguments[2]))
        return
    sys.stdout.write(render())


if __name__ == "__main__":
    main()
