"""One synth per session (bundling off, every optional resource on), shared by the infra tests."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# Before jsii starts node: hide the end-of-life banner of Node 20 (the Makefile exports it too).
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from aws_cdk import Stack
from aws_cdk.assertions import Template

from infra.app import build_app
from infra.packaging import Packaging

# Everything optional switched on, so that cdk-nag and cfn-lint see every resource the app can make.
TEST_CONTEXT = {"bundle": "false", "alarmEmail": "ops@example.com"}
# The same stage with provisioned DynamoDB capacity (auto scaling on every table and index).
PROVISIONED_CONTEXT = {
    **TEST_CONTEXT,
    "billingMode": "provisioned",
    "minReadCapacity": "2",
    "maxReadCapacity": "200",
    "minWriteCapacity": "3",
    "maxWriteCapacity": "300",
}


@dataclass(frozen=True)
class Synthesized:
    """The synthesized stack: the construct tree, its template and cdk-nag's findings."""

    stack: Stack
    outdir: Path
    template_path: Path
    template: Template
    resources: dict[str, dict[str, Any]]
    synth_error: str | None
    violations: list[dict[str, Any]]

    def logical_id(self, *path: str) -> str:
        """The logical id of the CloudFormation resource under the construct at `path` (names.py ids)."""
        construct = self.stack
        node: Any = construct
        for part in path:
            node = node.node.find_child(part)
        child = node.node.default_child or node
        return str(self.stack.resolve(child.logical_id))

    def of_type(self, resource_type: str) -> dict[str, dict[str, Any]]:
        """Resources of one CloudFormation type, by logical id."""
        return {k: v for k, v in self.resources.items() if v["Type"] == resource_type}

    def of_api(self, resource_type: str, *api_path: str) -> dict[str, dict[str, Any]]:
        """Resources of one AWS::ApiGatewayV2 type that belong to the API at `api_path` (by its ApiId)."""
        api = self.logical_id(*api_path)
        return {
            k: v
            for k, v in self.of_type(resource_type).items()
            if v["Properties"].get("ApiId") == {"Ref": api}
        }


def _violations(outdir: Path) -> list[dict[str, Any]]:
    """Findings from the validation report cdk-nag's plugin run wrote into the cloud assembly."""
    report = outdir / "validation-report.json"
    if not report.is_file():
        return []
    found = []
    for plugin in json.loads(report.read_text())["pluginReports"]:
        found.extend(plugin.get("violations", []))
    return found


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return _synthesize(tmp_path_factory, TEST_CONTEXT)


@pytest.fixture(scope="session")
def synthesized_provisioned(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The stage with `billingMode=provisioned` (and capacity bounds of its own)."""
    return _synthesize(tmp_path_factory, PROVISIONED_CONTEXT)


@pytest.fixture(params=["on-demand", "provisioned"])
def every_mode(request: pytest.FixtureRequest) -> Synthesized:
    """Each capacity mode's synth in turn: the checks that must hold for both."""
    name = "synthesized" if request.param == "on-demand" else "synthesized_provisioned"
    synth: Synthesized = request.getfixturevalue(name)
    return synth


def _synthesize(tmp_path_factory: pytest.TempPathFactory, context: dict[str, str]) -> Synthesized:
    outdir = tmp_path_factory.mktemp("cdk.out")
    build = tmp_path_factory.mktemp("build")
    app, stack = build_app(context, outdir=str(outdir), packaging=Packaging(build_dir=build))
    synth_error = None
    try:
        app.synth()
    except RuntimeError as error:  # cdk-nag findings fail the synth; the template is written anyway
        synth_error = str(error)
    template_path = outdir / f"{stack.artifact_id}.template.json"
    body = json.loads(template_path.read_text())
    return Synthesized(
        stack=stack,
        outdir=outdir,
        template_path=template_path,
        template=Template.from_json(body),
        resources=body["Resources"],
        synth_error=synth_error,
        violations=_violations(outdir),
    )
