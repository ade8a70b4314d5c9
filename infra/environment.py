"""Each function's environment: only what its settings model reads, named by that model's aliases.

The variable names are never spelled here: they come from the functions' settings models (whose
aliases come from `shared.resources`). Each environment is validated against its model at synth
time, so a missing or out-of-range setting fails `cdk synth`, not a cold start in AWS.
"""

from __future__ import annotations

from collections.abc import Mapping

from functions.batch_poller.settings import BatchPollerSettings
from functions.batcher.settings import BatcherSettings
from functions.budget.settings import BudgetApiSettings
from functions.documents.settings import DocumentsApiSettings
from functions.ingest.settings import IngestSettings
from functions.notifier.settings import NotifierSettings
from functions.output_pusher.settings import OutputPusherSettings
from functions.relay.settings import RelaySettings
from functions.status.settings import StatusSettings
from functions.submit.settings import SubmitSettings
from functions.sweeper.settings import SweeperSettings
from functions.tickets.settings import TicketsSettings
from functions.webhook_sender.settings import WebhookSenderSettings
from functions.worker.settings import WorkerSettings
from functions.ws_authorizer.settings import AuthorizerSettings
from functions.ws_connections.settings import ConnectionsSettings
from functions.ws_follow.settings import FollowSettings
from infra.config import StageConfig
from infra.names import FunctionName
from infra.prices import read_price_table
from shared import resources as r
from shared.prices import encode_model_tiers
from shared.settings import EnvSettings
from shared.tiers import Tier

Value = str | int | float | bool | tuple[str, ...] | None


def _text(value: str | int | float | bool | tuple[str, ...]) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    if isinstance(value, float):
        return format(value, "g")
    return str(value)


def settings_environment(model: type[EnvSettings], values: Mapping[str, Value]) -> dict[str, str]:
    """Environment variables for `model`'s fields (None: not set); validated against the model."""
    environment: dict[str, str] = {}
    for field_name, value in values.items():
        field = model.model_fields.get(field_name)
        if field is None or field.alias is None:
            raise KeyError(f"{model.__name__} has no aliased field {field_name!r}")
        if value is not None:
            environment[field.alias] = _text(value)
    model.model_validate(environment)
    return environment


def powertools_environment(config: StageConfig, function: FunctionName, *, traced: bool) -> dict[str, str]:
    """What Powertools reads in every function."""
    environment = {
        "POWERTOOLS_SERVICE_NAME": function.service,
        "POWERTOOLS_METRICS_NAMESPACE": config.metrics_namespace,
        # Lambda's application log level says the same in AWS (function_factory); this is what
        # local mode, which has no advanced logging controls, goes by.
        "POWERTOOLS_LOG_LEVEL": config.log_level,
    }
    if traced:
        # The tracer would otherwise store each handler's response in the trace: model output
        # and status documents have no place in X-Ray (DESIGN.md, "Security").
        environment["POWERTOOLS_TRACER_CAPTURE_RESPONSE"] = "false"
    else:
        # Without active tracing no segment is sampled: the tracer would still patch botocore
        # and wrap every call at cold start for nothing.
        environment["POWERTOOLS_TRACE_DISABLED"] = "true"
    return environment


def submit_environment(
    config: StageConfig,
    *,
    jobs_table: str,
    idempotency_table: str,
    bucket: str,
    budgets_table: str,
    documents_table: str,
    documents_bucket: str,
) -> dict[str, str]:
    """The submit function: where to write, and the policy applied to new jobs (their budgets too)."""
    return settings_environment(
        SubmitSettings,
        {
            "jobs_table": jobs_table,
            "idempotency_table": idempotency_table,
            "payload_bucket": bucket,
            "budgets_table": budgets_table,
            "documents_table": documents_table,
            "documents_bucket": documents_bucket,
            "default_monthly_tokens": config.default_monthly_tokens,
            "default_max_running_per_tenant": config.max_running_per_tenant,
            "submits_per_minute": config.submits_per_minute,
            "max_attempts": config.max_attempts,
            "default_model": config.default_model,
            "allowed_models": config.allowed_models,
            # The model/tier pairs a job may ask for: priced in the table and allowed by the stage.
            "model_tiers": encode_model_tiers(
                read_price_table().tiers_of(config.allowed_models, (Tier(t) for t in config.allowed_tiers))
            ),
            "poll_after_seconds": config.poll_after_seconds,
            "job_retention_days": config.job_retention_days,
            "idempotency_ttl_hours": config.idempotency_ttl_hours,
            "input_retention_hours": config.input_retention_hours,
            "plan_version": config.plan_version,
            "chunk_tokens": config.chunk_tokens,
            "step_output_tokens": config.step_output_tokens,
            "extract_step_output_tokens": config.extract_step_output_tokens,
            # New jobs get their first sweep time from it: it must agree with the sweeper's.
            "sweep_look_seconds": config.sweep_look_seconds,
            # The time the sweeper first looks at a new job's budget reservation: the sweeper's grace.
            "dispatch_grace_seconds": config.dispatch_grace_seconds,
        },
    )


def status_environment(
    config: StageConfig,
    *,
    jobs_table: str,
    idempotency_table: str,
    bucket: str,
    cursor_secret_arn: str,
    budgets_table: str,
    output_events_table: str,
) -> dict[str, str]:
    """The status function (status, result, output, list, cancel)."""
    return settings_environment(
        StatusSettings,
        {
            "jobs_table": jobs_table,
            "output_events_table": output_events_table,
            "budgets_table": budgets_table,
            "idempotency_table": idempotency_table,
            "payload_bucket": bucket,
            "cursor_secret": cursor_secret_arn,
            "poll_after_seconds": config.poll_after_seconds,
            "input_retention_hours": config.input_retention_hours,
        },
    )


def relay_environment(jobs_queue_url: str) -> dict[str, str]:
    """The relay function: the queue it forwards new jobs to (plain settings, no pydantic model)."""
    environment = {r.ENV_JOBS_QUEUE_URL: jobs_queue_url}
    RelaySettings.from_environ(environment)  # the check the relay makes at cold start, at synth
    return environment


def worker_environment(
    config: StageConfig,
    *,
    jobs_table: str,
    bucket: str,
    jobs_queue_url: str,
    dlq_url: str,
    isolation_queue_url: str,
    isolation_queue_arn: str,
    isolation_dlq_url: str,
    openai_secret_arn: str,
    output_events_table: str,
    slots_table: str,
) -> dict[str, str]:
    """The worker: storage, queues, the provider, the timing of leases, retries and releases, and
    where and when a streaming call's output is written."""
    return settings_environment(
        WorkerSettings,
        {
            "jobs_table": jobs_table,
            "slots_table": slots_table,
            "output_events_table": output_events_table,
            "stream_flush_bytes": config.stream_flush_bytes,
            "stream_flush_ms": config.stream_flush_ms,
            "payload_bucket": bucket,
            "jobs_queue_url": jobs_queue_url,
            "dlq_url": dlq_url,
            "isolation_queue_url": isolation_queue_url,
            "isolation_queue_arn": isolation_queue_arn,
            "isolation_dlq_url": isolation_dlq_url,
            "openai_secret": openai_secret_arn,
            "max_attempts": config.max_attempts,
            "lease_seconds": config.lease_seconds,
            "heartbeat_seconds": config.heartbeat_seconds,
            "provider_timeout_seconds": config.provider_timeout_seconds,
            "flex_timeout_seconds": config.flex_timeout_seconds,
            "flex_fallback_seconds": config.flex_fallback_seconds,
            "backoff_base_seconds": config.backoff_base_seconds,
            "backoff_cap_seconds": config.backoff_cap_seconds,
            "release_margin_seconds": config.release_margin_seconds,
            "slot_retry_seconds": config.slot_retry_seconds,
            "step_concurrency": config.step_concurrency,
            "input_retention_hours": config.input_retention_hours,
            "default_model": config.default_model,
            "allowed_models": config.allowed_models,
            # Unset means the SDK's default endpoint; set only to reach a compatible gateway.
            "openai_base_url": config.openai_base_url,
        },
    )


def sweeper_environment(
    config: StageConfig,
    *,
    jobs_table: str,
    bucket: str,
    jobs_queue_url: str,
    isolation_queue_url: str,
    budgets_table: str,
    documents_table: str,
    slots_table: str,
) -> dict[str, str]:
    """The sweeper: what counts as stuck, where recovered jobs are re-sent, the reservations and the
    document pins it repairs."""
    return settings_environment(
        SweeperSettings,
        {
            "jobs_table": jobs_table,
            "budgets_table": budgets_table,
            "documents_table": documents_table,
            "slots_table": slots_table,
            "payload_bucket": bucket,
            "jobs_queue_url": jobs_queue_url,
            "isolation_queue_url": isolation_queue_url,
            "dispatch_grace_seconds": config.dispatch_grace_seconds,
            "sweep_look_seconds": config.sweep_look_seconds,
            "lease_seconds": config.lease_seconds,
            "input_retention_hours": config.input_retention_hours,
            "max_crashes": config.max_crashes,
        },
    )


def tickets_environment(*, connections_table: str, websocket_url: str) -> dict[str, str]:
    """The tickets function: where tickets go, and the stage URL they are appended to."""
    return settings_environment(
        TicketsSettings, {"connections_table": connections_table, "websocket_url": websocket_url}
    )


def ws_authorizer_environment(*, connections_table: str) -> dict[str, str]:
    """The $connect ticket authorizer: where tickets are taken from."""
    return settings_environment(AuthorizerSettings, {"connections_table": connections_table})


def ws_connections_environment(*, connections_table: str, connections_endpoint: str) -> dict[str, str]:
    """$connect and $disconnect: the connection store and the stage's management endpoint."""
    return settings_environment(
        ConnectionsSettings,
        {"connections_table": connections_table, "connections_endpoint": connections_endpoint},
    )


def notifier_environment(
    *,
    connections_table: str,
    connections_endpoint: str,
    webhooks_table: str,
    webhooks_queue_url: str,
    budgets_table: str,
    documents_table: str,
) -> dict[str, str]:
    """The notifier: the connection store, the stage's management endpoint (its callback URL),
    where webhook endpoints are read and their deliveries enqueued, the budget ledger terminal
    writes settle in, and the documents they unpin."""
    return settings_environment(
        NotifierSettings,
        {
            "connections_table": connections_table,
            "connections_endpoint": connections_endpoint,
            "webhooks_table": webhooks_table,
            "webhooks_queue_url": webhooks_queue_url,
            "budgets_table": budgets_table,
            "documents_table": documents_table,
        },
    )


def ws_follow_environment(
    *, jobs_table: str, output_events_table: str, connections_table: str, connections_endpoint: str
) -> dict[str, str]:
    """The follow and unfollow routes: the owner check, the follows, the replay and where it is posted."""
    return settings_environment(
        FollowSettings,
        {
            "jobs_table": jobs_table,
            "output_events_table": output_events_table,
            "connections_table": connections_table,
            "connections_endpoint": connections_endpoint,
        },
    )


def output_pusher_environment(*, connections_table: str, connections_endpoint: str) -> dict[str, str]:
    """The output pusher: the follows and the stage's management endpoint (its callback URL)."""
    return settings_environment(
        OutputPusherSettings,
        {"connections_table": connections_table, "connections_endpoint": connections_endpoint},
    )


def webhook_sender_environment(
    config: StageConfig, *, webhooks_table: str, webhooks_queue_url: str, webhooks_dlq_url: str
) -> dict[str, str]:
    """The webhook sender: the store, the queue and its DLQ, the schedule's scale, and the egress
    flag, always false here: only local mode turns it on (outlast.local.capabilities.functions)."""
    return settings_environment(
        WebhookSenderSettings,
        {
            "webhooks_table": webhooks_table,
            "webhooks_queue_url": webhooks_queue_url,
            "webhooks_dlq_url": webhooks_dlq_url,
            "retry_scale": config.webhook_retry_scale,
            "local_egress": False,
        },
    )


def budget_environment(config: StageConfig, *, budgets_table: str) -> dict[str, str]:
    """The budget function (GET /v1/budget): the ledger and the stage's default limit."""
    return settings_environment(
        BudgetApiSettings,
        {"budgets_table": budgets_table, "default_monthly_tokens": config.default_monthly_tokens},
    )


def _document_limits(config: StageConfig) -> dict[str, Value]:
    return {
        "max_document_bytes": config.max_document_bytes,
        "max_extracted_bytes": config.max_extracted_bytes,
        "max_document_pages": config.max_document_pages,
        "document_retention_days": config.document_retention_days,
    }


def documents_environment(
    config: StageConfig, *, documents_table: str, documents_bucket: str, cursor_secret_arn: str
) -> dict[str, str]:
    """The documents function: the store, the bucket its POSTs upload to, the cursor key, the limits.
    No upload endpoint: S3's own (local mode sets its upload front in its place)."""
    return settings_environment(
        DocumentsApiSettings,
        {
            "documents_table": documents_table,
            "documents_bucket": documents_bucket,
            "cursor_secret": cursor_secret_arn,
            "poll_after_seconds": config.poll_after_seconds,
            **_document_limits(config),
        },
    )


def batcher_environment(
    config: StageConfig, *, jobs_table: str, batches_table: str, openai_secret_arn: str
) -> dict[str, str]:
    """The batcher: the jobs it records batches on, the open batches, the provider."""
    return settings_environment(
        BatcherSettings,
        {
            "jobs_table": jobs_table,
            "batches_table": batches_table,
            "openai_secret": openai_secret_arn,
            "openai_base_url": config.openai_base_url,
            "provider_timeout_seconds": config.provider_timeout_seconds,
        },
    )


def ingest_environment(
    config: StageConfig, *, documents_table: str, documents_bucket: str, dlq_url: str
) -> dict[str, str]:
    """The ingest function: the store, the bucket, the DLQ for poison, the limits."""
    return settings_environment(
        IngestSettings,
        {
            "documents_table": documents_table,
            "documents_bucket": documents_bucket,
            "dlq_url": dlq_url,
            **_document_limits(config),
        },
    )


def batch_poller_environment(
    config: StageConfig,
    *,
    jobs_table: str,
    bucket: str,
    jobs_queue_url: str,
    isolation_queue_url: str,
    batches_table: str,
    openai_secret_arn: str,
    budgets_table: str,
) -> dict[str, str]:
    """The batch poller: the jobs and payloads it writes, the queues it hands jobs back to, the
    open batches, the provider, the budgets late usage comes into."""
    return settings_environment(
        BatchPollerSettings,
        {
            "jobs_table": jobs_table,
            "payload_bucket": bucket,
            "jobs_queue_url": jobs_queue_url,
            "isolation_queue_url": isolation_queue_url,
            "batches_table": batches_table,
            "openai_secret": openai_secret_arn,
            "openai_base_url": config.openai_base_url,
            "provider_timeout_seconds": config.provider_timeout_seconds,
            "input_retention_hours": config.input_retention_hours,
            "budgets_table": budgets_table,
            # A batcher alive is done with its create and its record within its timeout.
            "batch_intent_grace_seconds": config.batcher_timeout_seconds + config.batch_intent_margin_seconds,
        },
    )
