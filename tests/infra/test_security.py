"""Least privilege per function, encryption and TLS everywhere, the same defaults on every function."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from aws_cdk.assertions import Template

from infra.app import build_app
from infra.function_factory import ARCHITECTURE, RUNTIME
from infra.names import (
    API,
    BATCH,
    BUDGETS,
    DOCUMENTS,
    IDEMPOTENCY_TABLE,
    JOBS_TABLE,
    OPENAI_SECRET,
    OUTBOX,
    REALTIME,
    ROLE_SUFFIX,
    STORAGE,
    STREAMING,
    SWEEPER,
    WEBHOOKS,
    WORKER,
    FunctionName,
)
from infra.packaging import PYTHON_VERSION, Packaging
from shared import resources as r

pytestmark = pytest.mark.infra

DOCUMENT_LIMITS = {
    "MAX_DOCUMENT_BYTES",
    "MAX_EXTRACTED_BYTES",
    "MAX_DOCUMENT_PAGES",
    "DOCUMENT_RETENTION_DAYS",
}
# Where each function's constructs live (the capability that creates it).
HOME = {
    FunctionName.SUBMIT: API,
    FunctionName.STATUS: API,
    FunctionName.RELAY: OUTBOX,
    FunctionName.WORKER: WORKER,
    FunctionName.SWEEPER: SWEEPER,
    FunctionName.TICKETS: REALTIME,
    FunctionName.WS_AUTHORIZER: REALTIME,
    FunctionName.WS_CONNECTIONS: REALTIME,
    FunctionName.WS_MESSAGES: REALTIME,
    FunctionName.NOTIFIER: REALTIME,
    FunctionName.WEBHOOK_SENDER: WEBHOOKS,
    FunctionName.BUDGET: BUDGETS,
    FunctionName.WS_FOLLOW: STREAMING,
    FunctionName.OUTPUT_PUSHER: STREAMING,
    FunctionName.DOCUMENTS: DOCUMENTS,
    FunctionName.INGEST: DOCUMENTS,
    FunctionName.BATCHER: BATCH,
    FunctionName.BATCH_POLLER: BATCH,
}
# Actions that support no resource-level permissions: the only ones allowed on Resource "*".
STAR_ACTIONS = {"xray:PutTraceSegments", "xray:PutTelemetryRecords", "dynamodb:ListStreams"}
# The functions the project did not write: aws-cdk-lib's BucketDeployment handler, which copies
# the console into its bucket at deploy time (tests/infra/test_console.py checks its role), and its
# BucketNotificationsHandler, which sets the documents bucket's notification at deploy time.
CDK_HANDLERS = ("CustomCDKBucketDeployment", "BucketNotificationsHandler")


def _ours(resources: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in resources.items() if not k.startswith(CDK_HANDLERS)}


# Exactly the variables each function's settings read (besides Powertools').
EXPECTED_ENVIRONMENT = {
    FunctionName.SUBMIT: {
        r.ENV_JOBS_TABLE,
        r.ENV_IDEMPOTENCY_TABLE,
        r.ENV_PAYLOAD_BUCKET,
        r.ENV_BUDGETS_TABLE,
        r.ENV_DOCUMENTS_TABLE,
        r.ENV_DOCUMENTS_BUCKET,
        "DEFAULT_MONTHLY_TOKENS",
        "DEFAULT_MAX_RUNNING_PER_TENANT",
        "SUBMITS_PER_MINUTE",
        "MAX_ATTEMPTS",
        "DEFAULT_MODEL",
        "ALLOWED_MODELS",
        "MODEL_TIERS",  # the model/tier pairs the price table and the stage offer
        "POLL_AFTER_SECONDS",
        "JOB_RETENTION_DAYS",
        "IDEMPOTENCY_TTL_HOURS",
        "INPUT_RETENTION_HOURS",
        "SWEEP_LOOK_SECONDS",
        "DISPATCH_GRACE_SECONDS",  # when the sweeper first looks at a new job's budget reservation
        "PLAN_VERSION",
        "CHUNK_TOKENS",
        "STEP_OUTPUT_TOKENS",
        "EXTRACT_STEP_OUTPUT_TOKENS",
    },
    FunctionName.STATUS: {
        r.ENV_JOBS_TABLE,
        r.ENV_IDEMPOTENCY_TABLE,
        r.ENV_PAYLOAD_BUCKET,
        r.ENV_CURSOR_SECRET,
        r.ENV_BUDGETS_TABLE,
        r.ENV_OUTPUT_EVENTS_TABLE,
        "POLL_AFTER_SECONDS",
        "INPUT_RETENTION_HOURS",
    },
    FunctionName.RELAY: {r.ENV_JOBS_QUEUE_URL},
    FunctionName.WORKER: {
        r.ENV_JOBS_TABLE,
        r.ENV_PAYLOAD_BUCKET,
        r.ENV_JOBS_QUEUE_URL,
        r.ENV_DLQ_URL,
        r.ENV_ISOLATION_QUEUE_URL,
        r.ENV_ISOLATION_QUEUE_ARN,
        r.ENV_ISOLATION_DLQ_URL,
        r.ENV_OPENAI_SECRET,
        r.ENV_OUTPUT_EVENTS_TABLE,
        r.ENV_SLOTS_TABLE,
        r.ENV_BATCH_QUEUE_URL,  # set by the batch tier's construct: a batch job's calls go there
        "STREAM_FLUSH_BYTES",
        "STREAM_FLUSH_MS",
        "MAX_ATTEMPTS",
        "LEASE_SECONDS",
        "HEARTBEAT_SECONDS",
        "PROVIDER_TIMEOUT_SECONDS",
        "FLEX_TIMEOUT_SECONDS",
        "FLEX_FALLBACK_SECONDS",
        "BACKOFF_BASE_SECONDS",
        "BACKOFF_CAP_SECONDS",
        "RELEASE_MARGIN_SECONDS",
        "SLOT_RETRY_SECONDS",
        "STEP_CONCURRENCY",
        "INPUT_RETENTION_HOURS",
        "DEFAULT_MODEL",
        "ALLOWED_MODELS",
    },
    FunctionName.SWEEPER: {
        r.ENV_JOBS_TABLE,
        r.ENV_PAYLOAD_BUCKET,
        r.ENV_JOBS_QUEUE_URL,
        r.ENV_ISOLATION_QUEUE_URL,
        r.ENV_BUDGETS_TABLE,
        r.ENV_DOCUMENTS_TABLE,
        r.ENV_SLOTS_TABLE,
        "DISPATCH_GRACE_SECONDS",
        "SWEEP_LOOK_SECONDS",
        "LEASE_SECONDS",
        "INPUT_RETENTION_HOURS",
        "MAX_CRASHES",
    },
    FunctionName.TICKETS: {r.ENV_CONNECTIONS_TABLE, r.ENV_WEBSOCKET_URL},
    FunctionName.WS_AUTHORIZER: {r.ENV_CONNECTIONS_TABLE},
    FunctionName.WS_CONNECTIONS: {r.ENV_CONNECTIONS_TABLE, r.ENV_CONNECTIONS_ENDPOINT},
    FunctionName.WS_MESSAGES: set(),
    FunctionName.NOTIFIER: {
        r.ENV_CONNECTIONS_TABLE,
        r.ENV_CONNECTIONS_ENDPOINT,
        r.ENV_WEBHOOKS_TABLE,
        r.ENV_WEBHOOKS_QUEUE_URL,
        r.ENV_BUDGETS_TABLE,
        r.ENV_DOCUMENTS_TABLE,
    },
    FunctionName.WEBHOOK_SENDER: {
        r.ENV_WEBHOOKS_TABLE,
        r.ENV_WEBHOOKS_QUEUE_URL,
        r.ENV_WEBHOOKS_DLQ_URL,
        r.ENV_WEBHOOK_RETRY_SCALE,
        r.ENV_WEBHOOK_LOCAL_EGRESS,
    },
    FunctionName.BUDGET: {r.ENV_BUDGETS_TABLE, "DEFAULT_MONTHLY_TOKENS"},
    FunctionName.WS_FOLLOW: {
        r.ENV_JOBS_TABLE,
        r.ENV_OUTPUT_EVENTS_TABLE,
        r.ENV_CONNECTIONS_TABLE,
        r.ENV_CONNECTIONS_ENDPOINT,
    },
    FunctionName.OUTPUT_PUSHER: {r.ENV_CONNECTIONS_TABLE, r.ENV_CONNECTIONS_ENDPOINT},
    FunctionName.DOCUMENTS: {
        r.ENV_DOCUMENTS_TABLE,
        r.ENV_DOCUMENTS_BUCKET,
        r.ENV_CURSOR_SECRET,
        "POLL_AFTER_SECONDS",
        *DOCUMENT_LIMITS,
    },
    FunctionName.INGEST: {
        r.ENV_DOCUMENTS_TABLE,
        r.ENV_DOCUMENTS_BUCKET,
        r.ENV_INGEST_DLQ_URL,
        "EXTRACTION_MEMORY_MB",
        *DOCUMENT_LIMITS,
    },
    FunctionName.BATCHER: {
        r.ENV_JOBS_TABLE,
        r.ENV_BATCHES_TABLE,
        r.ENV_OPENAI_SECRET,
        "PROVIDER_TIMEOUT_SECONDS",
    },
    FunctionName.BATCH_POLLER: {
        r.ENV_JOBS_TABLE,
        r.ENV_PAYLOAD_BUCKET,
        r.ENV_JOBS_QUEUE_URL,
        r.ENV_ISOLATION_QUEUE_URL,
        r.ENV_BATCHES_TABLE,
        r.ENV_OPENAI_SECRET,
        "PROVIDER_TIMEOUT_SECONDS",
        "INPUT_RETENTION_HOURS",
        r.ENV_BUDGETS_TABLE,
        "BATCH_INTENT_GRACE_SECONDS",
    },
}
PSEUDO_PARAMETERS = {"AWS::AccountId", "AWS::Partition", "AWS::Region", "AWS::URLSuffix"}
POWERTOOLS = {"POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE", "POWERTOOLS_LOG_LEVEL"}
# Traced functions keep responses out of their traces; untraced ones switch the tracer off.
POWERTOOLS_TRACED = {"POWERTOOLS_TRACER_CAPTURE_RESPONSE"}
POWERTOOLS_UNTRACED = {"POWERTOOLS_TRACE_DISABLED"}
# X-Ray on the asynchronous functions; the API-facing ones (the HTTP API's and the WebSocket API's:
# neither sends a trace header) only with `apiTracing`, which the shared synth leaves at its default.
TRACED = {
    FunctionName.RELAY,
    FunctionName.WORKER,
    FunctionName.SWEEPER,
    FunctionName.NOTIFIER,
    FunctionName.WEBHOOK_SENDER,
    FunctionName.OUTPUT_PUSHER,
    FunctionName.INGEST,
    FunctionName.BATCHER,
    FunctionName.BATCH_POLLER,
}
XRAY_ACTIONS = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}


def _referenced_ids(value: Any) -> set[str]:
    """Logical ids a Resource expression points at (Ref / Fn::GetAtt, also inside Fn::Join)."""
    if isinstance(value, dict):
        if "Ref" in value:
            return {value["Ref"]}
        if "Fn::GetAtt" in value:
            return {value["Fn::GetAtt"][0]}
        return set().union(*(_referenced_ids(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_referenced_ids(v) for v in value)) if value else set()
    return set()


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _statements(synthesized, function: FunctionName) -> list[dict[str, Any]]:
    """Every statement of every policy attached to the function's role."""
    role = synthesized.logical_id(HOME[function], f"{function.construct_id}Role")
    statements = []
    for policy in synthesized.of_type("AWS::IAM::Policy").values():
        if {"Ref": role} in policy["Properties"]["Roles"]:
            statements.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    return statements


def _function(synthesized, function: FunctionName) -> str:
    return str(synthesized.logical_id(HOME[function], f"{function.construct_id}Function"))


def _reachable(synthesized, function: FunctionName) -> set[str]:
    """What the function has a configured way to reach: the resources its environment names, its
    event sources and their on-failure destinations, and its own log group."""
    function_id = _function(synthesized, function)
    reachable = _referenced_ids(synthesized.resources[function_id]["Properties"]["Environment"]["Variables"])
    for mapping in synthesized.of_type("AWS::Lambda::EventSourceMapping").values():
        properties = mapping["Properties"]
        if properties["FunctionName"] == {"Ref": function_id}:
            reachable |= _referenced_ids(properties["EventSourceArn"])
            reachable |= _referenced_ids(properties.get("DestinationConfig", {}))
    reachable.add(synthesized.logical_id(HOME[function], f"{function.construct_id}Logs"))
    return reachable - PSEUDO_PARAMETERS


def _literal(resource: Any) -> str:
    """The text a Resource expression adds around the ARNs it references (Fn::Join's strings)."""
    if isinstance(resource, str):
        return resource
    if isinstance(resource, dict) and "Fn::Join" in resource:
        return "".join(_literal(part) for part in resource["Fn::Join"][1])
    return ""


def _consumes_a_stream(synthesized, function: FunctionName) -> bool:
    function_id = _function(synthesized, function)
    return any(
        mapping["Properties"]["FunctionName"] == {"Ref": function_id}
        and "StreamArn" in json.dumps(mapping["Properties"]["EventSourceArn"])
        for mapping in synthesized.of_type("AWS::Lambda::EventSourceMapping").values()
    )


# What a grant may be is checked here; that every grant a function needs is there is checked by
# running it: local mode enforces each role, and the end-to-end suite fails on any denied call
# (DESIGN.md, "Deploy fidelity"). A copy of today's grants would prove neither.


@pytest.mark.parametrize("function", list(FunctionName))
def test_a_role_allows_named_actions_only(synthesized, function):
    for statement in _statements(synthesized, function):
        # No Deny to reason about, no NotAction/NotResource (which grant everything else)
        assert statement["Effect"] == "Allow", statement
        assert set(statement) == {"Effect", "Action", "Resource"}, statement
        # And every action is named: no `*`, no `s3:Get*`, no `?`
        for action in _as_list(statement["Action"]):
            assert re.fullmatch(r"[a-z0-9-]+:[A-Za-z]+", action), action


@pytest.mark.parametrize("function", list(FunctionName))
def test_a_role_holds_star_only_for_actions_that_take_no_resource(synthesized, function):
    star = {
        action
        for statement in _statements(synthesized, function)
        if "*" in _as_list(statement["Resource"])
        for action in _as_list(statement["Action"])
    }

    assert star <= STAR_ACTIONS
    # X-Ray only where the function traces, ListStreams only for a stream's consumer
    assert star & XRAY_ACTIONS == (XRAY_ACTIONS if function in TRACED else set())
    assert ("dynamodb:ListStreams" in star) == _consumes_a_stream(synthesized, function)


@pytest.mark.parametrize("function", list(FunctionName))
def test_a_role_is_granted_only_what_its_function_can_reach(synthesized, function):
    # Given what the function is configured to reach (environment, event sources, destinations)
    reachable = _reachable(synthesized, function)

    for statement in _statements(synthesized, function):
        for resource in _as_list(statement["Resource"]):
            if resource == "*":
                continue
            granted = _referenced_ids(resource) - PSEUDO_PARAMETERS
            # Then every resource is one of the app's, and one the function can reach
            assert granted, f"{resource} is not a resource of this app"
            assert granted <= reachable, f"{function.value} cannot reach {granted - reachable}: {statement}"
            # And a wildcard only ends a named key prefix, stands for the ids in one named part of
            # such a prefix (`documents/*/text`), or ends one stage and method's @connections: never
            # every object of a bucket, every index of a table or every stage of an API
            text = _literal(resource)
            if "*" in text:
                assert re.search(
                    r"/(?!index/)[A-Za-z0-9_-]+/\*$|/[A-Za-z0-9_-]+/\*/[a-z]+$|/[A-Z]+/@connections/\*$", text
                ), resource


def test_only_cdks_own_handler_has_wildcard_actions(synthesized):
    for policy in _ours(synthesized.of_type("AWS::IAM::Policy")).values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if "*" in _as_list(statement["Resource"]):
                assert set(_as_list(statement["Action"])) <= STAR_ACTIONS
            assert not any("*" in a for a in _as_list(statement["Action"]))


def test_status_role_cannot_touch_the_idempotency_table(synthesized):
    # Its settings name the table (it shares the API functions' settings), but it never uses it
    idempotency = synthesized.logical_id(STORAGE, IDEMPOTENCY_TABLE)

    assert not [
        s
        for s in _statements(synthesized, FunctionName.STATUS)
        if idempotency in _referenced_ids(s["Resource"])
    ]


def test_relay_role_reads_only_the_stream_of_the_jobs_table(synthesized):
    jobs = synthesized.logical_id(STORAGE, JOBS_TABLE)
    table_statements = [
        s for s in _statements(synthesized, FunctionName.RELAY) if jobs in _referenced_ids(s["Resource"])
    ]

    assert table_statements
    for statement in table_statements:
        assert statement["Resource"] == {"Fn::GetAtt": [jobs, "StreamArn"]}


def test_only_the_worker_and_the_batch_tier_read_the_openai_secret(synthesized):
    secret = synthesized.logical_id(WORKER, OPENAI_SECRET)
    readers = {
        policy_id
        for policy_id, policy in synthesized.of_type("AWS::IAM::Policy").items()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if secret in _referenced_ids(statement["Resource"])
    }

    assert readers == {
        synthesized.logical_id(WORKER, "WorkerRole", "DefaultPolicy"),
        synthesized.logical_id(BATCH, "BatcherRole", "DefaultPolicy"),
        synthesized.logical_id(BATCH, "BatchPollerRole", "DefaultPolicy"),
    }


def test_roles_have_no_managed_policies_and_trust_only_lambda(synthesized):
    roles = _ours(synthesized.of_type("AWS::IAM::Role"))

    assert len(roles) == len(FunctionName)
    for role in roles.values():
        assert "ManagedPolicyArns" not in role["Properties"]
        (statement,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert statement["Principal"] == {"Service": "lambda.amazonaws.com"}


@pytest.mark.parametrize("function", list(FunctionName))
def test_every_function_has_the_factory_defaults(synthesized, function):
    properties = synthesized.resources[
        synthesized.logical_id(HOME[function], f"{function.construct_id}Function")
    ]["Properties"]

    assert properties["Runtime"] == RUNTIME.name == f"python{PYTHON_VERSION}"
    assert properties["Architectures"] == [ARCHITECTURE.name] == ["arm64"]
    assert properties["Handler"] == f"functions.{function.value}.handler.lambda_handler"
    assert properties["LoggingConfig"] == {
        "LogGroup": {"Ref": synthesized.logical_id(HOME[function], f"{function.construct_id}Logs")},
        "LogFormat": "JSON",
        # Lambda's START/END/REPORT lines are INFO: not written
        "SystemLogLevel": "WARN",
        # The stage's logLevel (INFO by default), which Lambda hands to Powertools
        "ApplicationLogLevel": "INFO",
    }
    assert properties["Role"] == {
        "Fn::GetAtt": [synthesized.logical_id(HOME[function], f"{function.construct_id}Role"), "Arn"]
    }
    assert len(properties["Layers"]) == 1


@pytest.mark.parametrize("function", list(FunctionName))
def test_every_function_gets_only_what_its_settings_read(synthesized, function):
    properties = synthesized.resources[
        synthesized.logical_id(HOME[function], f"{function.construct_id}Function")
    ]["Properties"]
    variables = properties["Environment"]["Variables"]

    tracer = POWERTOOLS_TRACED if function in TRACED else POWERTOOLS_UNTRACED
    assert set(variables) == EXPECTED_ENVIRONMENT[function] | POWERTOOLS | tracer
    assert variables["POWERTOOLS_SERVICE_NAME"] == function.service
    assert variables["POWERTOOLS_METRICS_NAMESPACE"] == "outlast"
    assert variables["POWERTOOLS_LOG_LEVEL"] == "INFO"


@pytest.mark.parametrize("function", list(FunctionName))
def test_only_the_asynchronous_functions_trace_by_default(synthesized, function):
    properties = synthesized.resources[
        synthesized.logical_id(HOME[function], f"{function.construct_id}Function")
    ]["Properties"]

    if function in TRACED:
        assert properties["TracingConfig"] == {"Mode": "Active"}
        assert properties["Environment"]["Variables"]["POWERTOOLS_TRACER_CAPTURE_RESPONSE"] == "false"
    else:
        # No TracingConfig is Lambda's PassThrough: nothing sampled, no X-Ray permissions
        assert "TracingConfig" not in properties
        assert properties["Environment"]["Variables"]["POWERTOOLS_TRACE_DISABLED"] == "true"


def test_api_tracing_turns_x_ray_on_for_the_api_functions(tmp_path):
    # Given a stage with apiTracing on (a synth of its own: the shared one keeps the default)
    _, stack = build_app(
        {"bundle": "false", "apiTracing": "true"},
        outdir=str(tmp_path / "cdk.out"),
        packaging=Packaging(build_dir=tmp_path / "build"),
    )

    # When it is synthesized
    resources = Template.from_stack(stack).to_json()["Resources"]

    # Then every function traces, and the API roles may send segments (and nothing else on *)
    functions = [v["Properties"] for v in _ours(resources).values() if v["Type"] == "AWS::Lambda::Function"]
    assert len(functions) == len(FunctionName)
    for properties in functions:
        assert properties["TracingConfig"] == {"Mode": "Active"}
        assert "POWERTOOLS_TRACE_DISABLED" not in properties["Environment"]["Variables"]
    api = stack.node.find_child(API)
    for function in (FunctionName.SUBMIT, FunctionName.STATUS):
        role: Any = api.node.find_child(f"{function.construct_id}{ROLE_SUFFIX}").node.default_child
        star_actions = {
            action
            for policy in resources.values()
            if policy["Type"] == "AWS::IAM::Policy"
            and {"Ref": stack.resolve(role.logical_id)} in policy["Properties"]["Roles"]
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]
            if statement["Resource"] == "*"
            for action in _as_list(statement["Action"])
        }
        assert star_actions == XRAY_ACTIONS


def test_log_groups_have_a_retention(synthesized):
    for log_group in synthesized.of_type("AWS::Logs::LogGroup").values():
        assert log_group["Properties"]["RetentionInDays"] > 0


def test_every_queue_is_encrypted_and_denies_requests_without_tls(synthesized):
    queues = synthesized.of_type("AWS::SQS::Queue")
    protected = set()
    for policy in synthesized.of_type("AWS::SQS::QueuePolicy").values():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        if any(
            s["Effect"] == "Deny" and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
            for s in statements
        ):
            protected |= _referenced_ids(policy["Properties"]["Queues"])

    # jobs, isolation, webhooks, ingest and the batcher's with their DLQs, three failure queues
    assert len(queues) == 13
    assert protected == set(queues)
    for queue in queues.values():
        assert (
            queue["Properties"].get("SqsManagedSseEnabled") is True or "KmsMasterKeyId" in queue["Properties"]
        )


def test_secrets_are_generated_never_written_in_the_template(synthesized):
    secrets = synthesized.of_type("AWS::SecretsManager::Secret")

    assert len(secrets) == 2
    for secret in secrets.values():
        assert "SecretString" not in secret["Properties"]
        assert "GenerateSecretString" in secret["Properties"]


def test_alarm_topic_is_encrypted_and_tls_only(synthesized):
    (topic,) = synthesized.of_type("AWS::SNS::Topic").values()
    (policy,) = synthesized.of_type("AWS::SNS::TopicPolicy").values()

    assert "KmsMasterKeyId" in topic["Properties"]
    assert any(
        s["Effect"] == "Deny" and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
    )
