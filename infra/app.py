"""The CDK app's entry point (`cdk.json` runs `python3 -m infra.app`).

`build_app` is also what the tests and local mode call: it loads cdk.json's context (feature
flags included), so an app built in-process synthesizes exactly what the CDK CLI would.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aws_cdk import App, Validations
from cdk_nag import AwsSolutionsChecks

from infra.config import StageConfig
from infra.names import STACK_ID
from infra.packaging import PROJECT_ROOT, Packaging
from infra.stack import OutlastStack

CDK_JSON = PROJECT_ROOT / "cdk.json"
# Written into the cloud assembly whatever runs the app: the validation report as JSON (where the
# tests read cdk-nag's findings) and asset paths in the template metadata (where local mode finds
# each function's code).
APP_CONTEXT: dict[str, Any] = {
    "@aws-cdk/core:validationReportJson": True,
    "aws:cdk:enable-asset-metadata": True,
}


def cdk_json_context(path: Path = CDK_JSON) -> dict[str, Any]:
    """The `context` block of cdk.json (feature flags and stage defaults)."""
    context: dict[str, Any] = json.loads(path.read_text())["context"]
    return context


def build_app(
    context: Mapping[str, Any] | None = None, *, outdir: str | None = None, packaging: Packaging | None = None
) -> tuple[App, OutlastStack]:
    """The app with the outlast stack and cdk-nag's AwsSolutions checks; `context` overrides cdk.json."""
    app = App(
        context={**cdk_json_context(), **APP_CONTEXT, **(context or {})},
        outdir=outdir,
        analytics_reporting=False,
    )
    config = StageConfig.from_context(app.node.try_get_context)
    stack = OutlastStack(
        app, STACK_ID, config=config, packaging=packaging or Packaging(), stack_name=config.stack_name
    )
    # cdk-nag 3.x is a policy-validation plugin: findings fail the synth and land in the report.
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, stack


def main() -> None:
    """Synthesize into the directory the CDK CLI asked for."""
    app, _ = build_app()
    app.synth()


if __name__ == "__main__":
    main()
