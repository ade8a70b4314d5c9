"""cdk-nag acknowledgements: one helper, so that every acknowledgement carries a reason.

cdk-nag 3.x runs as a CDK policy-validation plugin (`Validations.of(app).add_plugins(...)`) and
reads acknowledgements recorded with `Validations.of(construct).acknowledge(...)`. An
acknowledgement on a construct covers the findings on it and on everything beneath it; findings
that name a wildcard carry it in their id (`AwsSolutions-IAM5[Resource::*]`), and each such id is
acknowledged on its own.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, Validations
from constructs import IConstruct

# A reason must say why the finding does not apply or what compensates for it.
MIN_REASON_LENGTH = 40


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge one cdk-nag finding on `scope` (and its children), with a real reason."""
    if len(reason.strip()) < MIN_REASON_LENGTH:
        raise ValueError(f"acknowledgement of {rule} needs a reason of {MIN_REASON_LENGTH}+ characters")
    Validations.of(scope).acknowledge(Acknowledgment(id=rule, reason=reason))


def wildcard_resource(resource: str) -> str:
    """The id of an IAM5 finding on one wildcard resource, as cdk-nag renders it."""
    return f"AwsSolutions-IAM5[Resource::{resource}]"


def wildcard_action(action: str) -> str:
    """The id of an IAM5 finding on one wildcard action."""
    return f"AwsSolutions-IAM5[Action::{action}]"
