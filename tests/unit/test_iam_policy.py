"""evaluate(): identity-policy evaluation as local mode enforces it (outlast.local.iam.policy).

The rules are AWS's ("Policy evaluation logic", "IAM JSON policy elements"): an explicit Deny
wins, else an Allow allows, else the request is implicitly denied; actions match without regard
to case, resources with it; `*` and `?` wildcards; NotAction/NotResource; conditions against the
keys local mode models, where anything it cannot evaluate never widens access.
"""

from __future__ import annotations

from typing import Any

import pytest

from outlast.local.iam.policy import Decision, PolicyError, evaluate, local_context, resource_matches

TABLE = "arn:aws:dynamodb:us-east-1:123456789012:table/jobs"
BUCKET = "arn:aws:s3:::payloads"
ROLE = "arn:aws:iam::123456789012:role/worker"
LOCAL = local_context(ROLE, "123456789012", "us-east-1")


def policy(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": list(statements)}


def allow(action: Any, resource: Any, **extra: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": action, "Resource": resource, **extra}


def deny(action: Any, resource: Any, **extra: Any) -> dict[str, Any]:
    return {"Effect": "Deny", "Action": action, "Resource": resource, **extra}


CASES = [
    # Each: the statements, the action, the resource, and the decision.
    pytest.param([allow("dynamodb:GetItem", TABLE)], "dynamodb:GetItem", TABLE, Decision.ALLOWED, id="exact"),
    pytest.param([], "dynamodb:GetItem", TABLE, Decision.IMPLICIT_DENY, id="nothing-allows"),
    pytest.param(
        [allow("dynamodb:GetItem", TABLE)],
        "dynamodb:PutItem",
        TABLE,
        Decision.IMPLICIT_DENY,
        id="other-action",
    ),
    pytest.param(
        [allow("dynamodb:GetItem", TABLE)],
        "dynamodb:GetItem",
        TABLE + "-2",
        Decision.IMPLICIT_DENY,
        id="other-table-sharing-a-prefix",
    ),
    pytest.param(
        [allow("dynamodb:Query", TABLE)],
        "dynamodb:Query",
        TABLE + "/index/byOwner",
        Decision.IMPLICIT_DENY,
        id="table-grant-does-not-cover-its-index",
    ),
    pytest.param(
        [allow("dynamodb:Query", TABLE + "/index/*")],
        "dynamodb:Query",
        TABLE + "/index/byOwner",
        Decision.ALLOWED,
        id="index-wildcard",
    ),
    pytest.param(
        [allow(["dynamodb:GetItem", "dynamodb:PutItem"], [TABLE, TABLE + "/index/x"])],
        "dynamodb:PutItem",
        TABLE,
        Decision.ALLOWED,
        id="lists",
    ),
    pytest.param(
        [allow("DynamoDB:getitem", TABLE)], "dynamodb:GetItem", TABLE, Decision.ALLOWED, id="action-case"
    ),
    pytest.param(
        [allow("dynamodb:GetItem", TABLE.upper())],
        "dynamodb:GetItem",
        TABLE,
        Decision.IMPLICIT_DENY,
        id="arn-case",
    ),
    pytest.param(
        [allow("dynamodb:*", TABLE)], "dynamodb:DeleteItem", TABLE, Decision.ALLOWED, id="action-star"
    ),
    pytest.param(
        [allow("dynamodb:Get*", TABLE)], "dynamodb:GetItem", TABLE, Decision.ALLOWED, id="action-prefix"
    ),
    pytest.param(
        [allow("dynamodb:Get*", TABLE)],
        "dynamodb:PutItem",
        TABLE,
        Decision.IMPLICIT_DENY,
        id="action-prefix-other",
    ),
    pytest.param(
        [allow("dynamodb:?etItem", TABLE)],
        "dynamodb:GetItem",
        TABLE,
        Decision.ALLOWED,
        id="action-question-mark",
    ),
    pytest.param([allow("*", "*")], "sqs:SendMessage", TABLE, Decision.ALLOWED, id="everything"),
    pytest.param(
        [allow("dynamodb:GetItem", "*"), deny("dynamodb:GetItem", TABLE)],
        "dynamodb:GetItem",
        TABLE,
        Decision.EXPLICIT_DENY,
        id="deny-wins",
    ),
    pytest.param(
        [deny("dynamodb:GetItem", TABLE), allow("dynamodb:GetItem", "*")],
        "dynamodb:GetItem",
        TABLE,
        Decision.EXPLICIT_DENY,
        id="deny-wins-whatever-the-order",
    ),
    pytest.param(
        [allow("dynamodb:GetItem", "*"), deny("dynamodb:PutItem", TABLE)],
        "dynamodb:GetItem",
        TABLE,
        Decision.ALLOWED,
        id="deny-of-something-else",
    ),
    pytest.param(
        [allow("s3:GetObject", BUCKET + "/inputs/*")],
        "s3:GetObject",
        BUCKET + "/inputs/job.json",
        Decision.ALLOWED,
        id="key-prefix",
    ),
    pytest.param(
        [allow("s3:GetObject", BUCKET + "/inputs/*")],
        "s3:GetObject",
        BUCKET + "/results/job.json",
        Decision.IMPLICIT_DENY,
        id="other-key-prefix",
    ),
    pytest.param(
        [allow("s3:GetObject", BUCKET + "/inputs/*")],
        "s3:ListBucket",
        BUCKET,
        Decision.IMPLICIT_DENY,
        id="objects-grant-is-not-the-bucket",
    ),
    pytest.param(
        [allow("s3:ListBucket", BUCKET)],
        "s3:GetObject",
        BUCKET + "/inputs/job.json",
        Decision.IMPLICIT_DENY,
        id="bucket-grant-is-not-its-objects",
    ),
    pytest.param(
        [allow("s3:GetObject", "arn:aws:s3:::pay.oads/*")],
        "s3:GetObject",
        BUCKET + "/x",
        Decision.IMPLICIT_DENY,
        id="a-dot-is-a-dot",
    ),
    pytest.param(
        [
            allow(
                "execute-api:ManageConnections",
                "arn:aws:execute-api:us-east-1:1:api/live/POST/@connections/*",
            )
        ],
        "execute-api:ManageConnections",
        "arn:aws:execute-api:us-east-1:1:api/live/POST/@connections/abc=",
        Decision.ALLOWED,
        id="connections-post",
    ),
    pytest.param(
        [
            allow(
                "execute-api:ManageConnections",
                "arn:aws:execute-api:us-east-1:1:api/live/POST/@connections/*",
            )
        ],
        "execute-api:ManageConnections",
        "arn:aws:execute-api:us-east-1:1:api/live/DELETE/@connections/abc=",
        Decision.IMPLICIT_DENY,
        id="connections-other-method",
    ),
    pytest.param(
        [{"Effect": "Allow", "NotAction": "dynamodb:DeleteItem", "Resource": TABLE}],
        "dynamodb:PutItem",
        TABLE,
        Decision.ALLOWED,
        id="not-action-allows-the-rest",
    ),
    pytest.param(
        [{"Effect": "Allow", "NotAction": ["dynamodb:DeleteItem", "s3:*"], "Resource": "*"}],
        "dynamodb:DeleteItem",
        TABLE,
        Decision.IMPLICIT_DENY,
        id="not-action-excludes",
    ),
    pytest.param(
        [allow("*", "*"), {"Effect": "Deny", "NotAction": "dynamodb:GetItem", "Resource": "*"}],
        "dynamodb:PutItem",
        TABLE,
        Decision.EXPLICIT_DENY,
        id="deny-not-action",
    ),
    pytest.param(
        [{"Effect": "Allow", "Action": "s3:GetObject", "NotResource": BUCKET + "/secret/*"}],
        "s3:GetObject",
        BUCKET + "/inputs/a",
        Decision.ALLOWED,
        id="not-resource-allows-the-rest",
    ),
    pytest.param(
        [{"Effect": "Allow", "Action": "s3:GetObject", "NotResource": BUCKET + "/secret/*"}],
        "s3:GetObject",
        BUCKET + "/secret/a",
        Decision.IMPLICIT_DENY,
        id="not-resource-excludes",
    ),
]


@pytest.mark.parametrize(("statements", "action", "resource", "expected"), CASES)
def test_evaluation(statements: list[dict[str, Any]], action: str, resource: str, expected: Decision) -> None:
    assert evaluate([policy(*statements)], action, resource, LOCAL) is expected


def test_a_deny_in_one_document_overrides_an_allow_in_another() -> None:
    documents = [policy(allow("sqs:SendMessage", "*")), policy(deny("sqs:*", "*"))]

    assert (
        evaluate(documents, "sqs:SendMessage", "arn:aws:sqs:us-east-1:1:q", LOCAL) is Decision.EXPLICIT_DENY
    )


def test_a_single_statement_object_is_a_statement_list_of_one() -> None:
    document = {"Version": "2012-10-17", "Statement": allow("dynamodb:GetItem", TABLE)}

    assert evaluate([document], "dynamodb:GetItem", TABLE) is Decision.ALLOWED


class TestResourceWildcards:
    """`*` and `?` stay inside an ARN segment, unless the `*` ends the segment (IAM User Guide)."""

    @pytest.mark.parametrize(
        ("pattern", "arn", "expected"),
        [
            ("arn:aws:dynamodb:*:*:table/jobs", TABLE, True),
            ("arn:aws:dynamodb:us-east-1:123456789012:table/*", TABLE + "/index/i", True),
            ("arn:aws:dynamodb:us-*-1:123456789012:table/jobs", TABLE, True),
            ("arn:aws:dynamodb:us-east-?:123456789012:table/jobs", TABLE, True),
            # A `*` inside a segment cannot swallow the colon after it.
            ("arn:aws:sqs:us-*east-1:123:q", "arn:aws:sqs:us-west-1:999:us-east-1:123:q", False),
            ("arn:aws:sqs:us-east-1:123:q?", "arn:aws:sqs:us-east-1:123:q:", False),
            ("arn:aws:sqs:us-east-1:123:q", "arn:aws:sqs:us-east-1:123:q2", False),
        ],
    )
    def test_segments(self, pattern: str, arn: str, expected: bool) -> None:
        assert resource_matches(pattern, arn) is expected

    def test_a_policy_variable_is_not_evaluated(self) -> None:
        assert resource_matches("arn:aws:s3:::b/${aws:username}/*", "arn:aws:s3:::b/x/y") is None

    def test_an_allow_with_a_policy_variable_allows_nothing(self) -> None:
        document = policy(allow("s3:GetObject", "arn:aws:s3:::b/${aws:username}/*"))

        assert evaluate([document], "s3:GetObject", "arn:aws:s3:::b/x/y", LOCAL) is Decision.IMPLICIT_DENY

    def test_a_deny_with_a_policy_variable_denies(self) -> None:
        document = policy(allow("s3:*", "*"), deny("s3:GetObject", "arn:aws:s3:::b/${aws:username}/*"))

        assert evaluate([document], "s3:GetObject", "arn:aws:s3:::b/x/y", LOCAL) is Decision.EXPLICIT_DENY


TLS_ONLY = {"Bool": {"aws:SecureTransport": "false"}}


class TestConditions:
    def test_local_calls_count_as_tls(self) -> None:
        # Given the usual deny of plain-http requests
        document = policy(allow("sqs:*", "*"), deny("sqs:*", "*", Condition=TLS_ONLY))

        # Then a local call is not refused by it
        assert evaluate([document], "sqs:SendMessage", "arn:aws:sqs:us-east-1:1:q", LOCAL) is Decision.ALLOWED

    def test_an_allow_that_requires_tls_applies(self) -> None:
        document = policy(allow("sqs:*", "*", Condition={"Bool": {"aws:SecureTransport": True}}))

        assert evaluate([document], "sqs:SendMessage", "arn:aws:sqs:us-east-1:1:q", LOCAL) is Decision.ALLOWED

    @pytest.mark.parametrize(
        ("condition", "expected"),
        [
            ({"StringEquals": {"aws:RequestedRegion": "us-east-1"}}, Decision.ALLOWED),
            ({"StringEquals": {"aws:RequestedRegion": ["eu-west-1", "us-east-1"]}}, Decision.ALLOWED),
            ({"StringEquals": {"aws:RequestedRegion": "eu-west-1"}}, Decision.IMPLICIT_DENY),
            ({"StringNotEquals": {"aws:RequestedRegion": "eu-west-1"}}, Decision.ALLOWED),
            ({"StringEqualsIgnoreCase": {"aws:RequestedRegion": "US-EAST-1"}}, Decision.ALLOWED),
            ({"StringLike": {"aws:RequestedRegion": "us-*"}}, Decision.ALLOWED),
            ({"StringNotLike": {"aws:RequestedRegion": "us-*"}}, Decision.IMPLICIT_DENY),
            ({"ArnLike": {"aws:PrincipalArn": "arn:aws:iam::*:role/work*"}}, Decision.ALLOWED),
            (
                {"ArnEquals": {"aws:PrincipalArn": "arn:aws:iam::123456789012:role/other"}},
                Decision.IMPLICIT_DENY,
            ),
            ({"StringEquals": {"aws:PrincipalAccount": "123456789012"}}, Decision.ALLOWED),
            # Two keys (and two operators) must both hold.
            (
                {
                    "StringEquals": {"aws:RequestedRegion": "us-east-1"},
                    "Bool": {"aws:SecureTransport": "false"},
                },
                Decision.IMPLICIT_DENY,
            ),
        ],
    )
    def test_operators(self, condition: dict[str, Any], expected: Decision) -> None:
        document = policy(allow("sqs:SendMessage", "*", Condition=condition))

        assert evaluate([document], "sqs:SendMessage", "arn:aws:sqs:us-east-1:1:q", LOCAL) is expected

    @pytest.mark.parametrize(
        ("condition", "expected"),
        [
            # A key local mode models that this request does not carry.
            ({"StringEquals": {"s3:prefix": "inputs/"}}, Decision.IMPLICIT_DENY),
            ({"StringEqualsIfExists": {"s3:prefix": "inputs/"}}, Decision.ALLOWED),
            ({"StringNotEquals": {"s3:prefix": "inputs/"}}, Decision.ALLOWED),
            ({"Null": {"s3:prefix": "true"}}, Decision.ALLOWED),
            ({"Null": {"s3:prefix": "false"}}, Decision.IMPLICIT_DENY),
            ({"ForAllValues:StringEquals": {"s3:prefix": ["a"]}}, Decision.ALLOWED),
            ({"ForAnyValue:StringEquals": {"s3:prefix": ["a"]}}, Decision.IMPLICIT_DENY),
        ],
    )
    def test_a_modelled_key_missing_from_the_request(
        self, condition: dict[str, Any], expected: Decision
    ) -> None:
        document = policy(allow("s3:ListBucket", "*", Condition=condition))

        assert evaluate([document], "s3:ListBucket", BUCKET, {**LOCAL, "s3:prefix": []}) is expected

    @pytest.mark.parametrize(
        "condition",
        [
            pytest.param({"StringEquals": {"aws:SourceVpce": "vpce-1"}}, id="unknown-key"),
            pytest.param({"StringNotEquals": {"aws:SourceVpce": "vpce-1"}}, id="unknown-key-negated"),
            pytest.param({"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}, id="unknown-operator"),
            pytest.param({"DateLessThan": {"aws:CurrentTime": "2030-01-01T00:00:00Z"}}, id="dates"),
        ],
    )
    def test_what_cannot_be_evaluated_never_allows(self, condition: dict[str, Any]) -> None:
        # Given an Allow that depends on something local mode does not know
        document = policy(allow("sqs:SendMessage", "*", Condition=condition))

        # Then it allows nothing (AWS might; local mode will not guess that it does)
        assert (
            evaluate([document], "sqs:SendMessage", "arn:aws:sqs:us-east-1:1:q", LOCAL)
            is Decision.IMPLICIT_DENY
        )

    def test_a_deny_that_cannot_be_evaluated_denies(self) -> None:
        document = policy(
            allow("sqs:*", "*"),
            deny("sqs:*", "*", Condition={"StringNotEquals": {"aws:SourceVpce": "vpce-1"}}),
        )

        assert (
            evaluate([document], "sqs:SendMessage", "arn:aws:sqs:us-east-1:1:q", LOCAL)
            is Decision.EXPLICIT_DENY
        )

    def test_a_deny_whose_condition_fails_does_not_apply(self) -> None:
        document = policy(
            allow("sqs:*", "*"),
            deny("sqs:*", "*", Condition={"StringEquals": {"aws:RequestedRegion": "eu-west-1"}}),
        )

        assert evaluate([document], "sqs:SendMessage", "arn:aws:sqs:us-east-1:1:q", LOCAL) is Decision.ALLOWED


class TestInvalidPolicies:
    @pytest.mark.parametrize(
        "statement",
        [
            pytest.param({"Effect": "Allow", "Resource": "*"}, id="no-action"),
            pytest.param(
                {"Effect": "Allow", "Action": "s3:*", "NotAction": "s3:Get*", "Resource": "*"}, id="both"
            ),
            pytest.param({"Effect": "Allow", "Action": "s3:*"}, id="no-resource"),
            pytest.param({"Effect": "Maybe", "Action": "s3:*", "Resource": "*"}, id="effect"),
            pytest.param({"Effect": "Allow", "Action": 3, "Resource": "*"}, id="action-type"),
        ],
    )
    def test_are_refused_rather_than_guessed(self, statement: dict[str, Any]) -> None:
        with pytest.raises(PolicyError):
            evaluate([policy(statement)], "s3:GetObject", BUCKET + "/k", LOCAL)
