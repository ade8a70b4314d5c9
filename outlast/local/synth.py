"""Synthesize the CDK app for local mode, or reuse a cloud assembly that is still fresh."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from infra.names import STACK_ID
from outlast.local.template import Template

PROJECT_ROOT = Path(__file__).resolve().parents[2]
# What a template depends on: a change to any of these makes the cloud assembly stale.
SOURCES = ("infra", "shared", "functions", "cdk.json", "pyproject.toml")
# Local mode never bundles layers: the host's virtual environment stands in for them. It is a stage
# with a console origin, so that what names that origin is in the template (the HTTP API's CORS, the
# documents bucket's CORS rules); the local fronts put the local console's origin in its place.
LOCAL_CONSOLE_ORIGIN = "https://console.outlast.invalid"
LOCAL_CONTEXT: dict[str, Any] = {
    "bundle": "false",
    "consoleOrigin": LOCAL_CONSOLE_ORIGIN,
    # A short batching window, so that a batch job ends in seconds.
    "batchWindowSeconds": "2",
    # A short batcher timeout, so that the calls of a batcher that died come back within a minute
    # (its queue's visibility timeout is six times it).
    "batcherTimeoutSeconds": "10",
    # The poller resolves a dead batcher's intent this long after the batcher's timeout.
    "batchIntentMarginSeconds": "5",
}
STACK_TEMPLATE = f"{STACK_ID}.template.json"


def _newest_source(root: Path) -> float:
    newest = 0.0
    for name in SOURCES:
        path = root / name
        files: Iterable[Path] = path.rglob("*.py") if path.is_dir() else [path]
        for file in files:
            if file.exists() and "__pycache__" not in file.parts:
                newest = max(newest, file.stat().st_mtime)
    return newest


def _context_stamp(outdir: Path) -> Path:
    return outdir / "outlast-local-context.json"


def is_fresh(outdir: Path, context: Mapping[str, Any], root: Path = PROJECT_ROOT) -> bool:
    """True when the assembly was synthesized with this context after the last source change."""
    template, stamp = outdir / STACK_TEMPLATE, _context_stamp(outdir)
    if not template.exists() or not stamp.exists():
        return False
    if json.loads(stamp.read_text()) != dict(context):
        return False
    return template.stat().st_mtime >= _newest_source(root)


def synthesize(outdir: Path, overrides: Mapping[str, Any] | None = None, *, force: bool = False) -> Template:
    """The stack's template in `outdir`, synthesized now unless a fresh one is already there."""
    context = {**LOCAL_CONTEXT, **(overrides or {})}
    if force or not is_fresh(outdir, context):
        outdir.mkdir(parents=True, exist_ok=True)
        environment = {
            **os.environ,
            "CDK_DISABLE_VERSION_CHECK": "1",
            "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        }
        subprocess.run(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "outlast.local.synth", str(outdir), json.dumps(context)],
            cwd=PROJECT_ROOT,
            env=environment,
            check=True,
        )
        _context_stamp(outdir).write_text(json.dumps(context))
    return Template.load(outdir / STACK_TEMPLATE)


def main() -> None:
    """Child process: build the app with the context and write the cloud assembly."""
    from infra.app import build_app  # noqa: PLC0415 - jsii starts only in this child

    outdir, context = sys.argv[1], json.loads(sys.argv[2])
    app, _ = build_app(context, outdir=outdir)
    app.synth()


if __name__ == "__main__":
    main()
