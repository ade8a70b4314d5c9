"""cdk-nag (AwsSolutions) and cfn-lint on the synthesized template."""

from __future__ import annotations

from pathlib import Path

import pytest
from aws_cdk import Validations
from cfnlint.api import ManualArgs, lint_file

from infra.nag import MIN_REASON_LENGTH

pytestmark = pytest.mark.infra

# CDK adds DependsOn on a function's role beside the GetAtt that already implies it: harmless.
IGNORED_CFN_LINT_RULES = ["W3005"]


def test_cdk_nag_reports_no_unacknowledged_findings(every_mode):
    findings = [
        (v["severity"], v["ruleName"], [c["constructPath"] for c in v["violatingConstructs"]])
        for v in every_mode.violations
    ]

    assert findings == []
    assert every_mode.synth_error is None


def test_every_acknowledgement_carries_a_real_reason(synthesized):
    acknowledged = {
        (construct.node.path, rule): reason
        for construct in synthesized.stack.node.find_all()
        for entry in construct.node.metadata
        if entry.type == Validations.ACKNOWLEDGED_RULES_METADATA_KEY
        for rule, reason in entry.data.items()
    }

    assert acknowledged
    for (path, rule), reason in acknowledged.items():
        assert "AwsSolutions-" in rule, (path, rule)
        assert len(reason) >= MIN_REASON_LENGTH, (path, rule)
        # A blanket IAM5 acknowledgement would hide every future wildcard: each names its finding.
        assert not rule.endswith("AwsSolutions-IAM5"), (path, rule)


def test_cfn_lint_finds_no_errors_or_warnings(every_mode):
    matches = lint_file(
        Path(every_mode.template_path), config=ManualArgs(ignore_checks=IGNORED_CFN_LINT_RULES)
    )

    problems = [f"{m.rule.id} {m.message}" for m in matches if m.rule.id[0] in {"E", "W"}]
    assert problems == []
