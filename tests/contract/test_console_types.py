"""The console's API types are generated from docs/openapi.json and committed (web/src/api/schema.d.ts);
they must be exactly what openapi-typescript makes of the document, and the console must compile
against them (tsc, strict): a change to the API that the console does not follow fails here."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NODE_BIN = ROOT / "node_modules" / ".bin"
SCHEMA = ROOT / "web" / "src" / "api" / "schema.d.ts"


def _tool(name: str) -> str:
    path = NODE_BIN / name
    assert path.exists(), f"{name} is not installed: run `npm ci` (make node)"
    assert shutil.which("node"), "node is not on the PATH"
    return str(path)


def test_committed_console_types_match_the_openapi_document(tmp_path: Path) -> None:
    generated = tmp_path / "schema.d.ts"

    subprocess.run(  # noqa: S603 - the pinned tool from node_modules
        [_tool("openapi-typescript"), str(ROOT / "docs" / "openapi.json"), "-o", str(generated)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )

    assert generated.read_text() == SCHEMA.read_text(), (
        "web/src/api/schema.d.ts is stale: run `make console-types` and commit it"
    )


def test_the_console_type_checks_against_the_generated_types() -> None:
    result = subprocess.run(  # noqa: S603 - the pinned tool from node_modules
        [_tool("tsc"), "-p", str(ROOT / "web")], cwd=ROOT, capture_output=True, text=True, check=False
    )

    assert result.returncode == 0, result.stdout + result.stderr
