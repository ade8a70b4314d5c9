"""The stack: composes one construct per capability and publishes the outputs operators need."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from infra.config import BundleMode, StageConfig
from infra.console_build import ConsoleBuildError, build_console, placeholder
from infra.constructs.api import Api
from infra.constructs.auth import Auth
from infra.constructs.batch import Batch
from infra.constructs.budgets import Budgets
from infra.constructs.console import Console
from infra.constructs.documents import Documents
from infra.constructs.fairness import Fairness
from infra.constructs.monitoring import Monitoring
from infra.constructs.outbox import Outbox
from infra.constructs.realtime import Realtime
from infra.constructs.storage import Storage
from infra.constructs.streaming import Streaming
from infra.constructs.sweeper import Sweeper
from infra.constructs.webhooks import Webhooks
from infra.constructs.worker import Worker
from infra.function_factory import FunctionFactory
from infra.names import (
    API,
    AUTH,
    BATCH,
    BUDGETS,
    CONSOLE,
    DOCUMENTS,
    FAIRNESS,
    MONITORING,
    OUTBOX,
    PACKAGING,
    REALTIME,
    STORAGE,
    STREAMING,
    SWEEPER,
    WEBHOOKS,
    WORKER,
    FunctionName,
    Output,
)
from infra.packaging import Packaging

DESCRIPTION = "outlast: durable LLM jobs on AWS serverless"
PLACEHOLDER_NOTE = " [placeholder layers or console: synthesized without bundling, not deployable]"


def console_site(config: StageConfig) -> tuple[Path, bool]:
    """The console's build for the asset, and whether it is a placeholder: built when bundling
    (node_modules needed), built when possible under auto, else (tests, local mode) a placeholder."""
    if config.bundle is BundleMode.ON:
        return build_console(), False
    if config.bundle is BundleMode.AUTO:
        try:
            return build_console(), False
        except ConsoleBuildError:
            return placeholder(), True
    return placeholder(), True


class OutlastStack(Stack):
    """Auth, storage, budgets, outbox, webhooks, live updates, streaming output, worker, sweeper,
    documents, API, console and monitoring; nothing else."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: StageConfig, packaging: Packaging, **kwargs: Any
    ) -> None:
        super().__init__(scope, construct_id, description=DESCRIPTION, **kwargs)
        factory = FunctionFactory(self, PACKAGING, config=config, packaging=packaging)
        site, placeholder_console = console_site(config)
        if factory.placeholder_layers or placeholder_console:
            self.template_options.description = DESCRIPTION + PLACEHOLDER_NOTE
        auth = Auth(self, AUTH, config=config)
        documents = Documents(self, DOCUMENTS, config=config, factory=factory)
        storage = Storage(self, STORAGE, config=config)
        budgets = Budgets(self, BUDGETS, config=config, factory=factory)
        fairness = Fairness(self, FAIRNESS, config=config)
        outbox = Outbox(self, OUTBOX, config=config, factory=factory, storage=storage)
        webhooks = Webhooks(self, WEBHOOKS, config=config, factory=factory)
        realtime = Realtime(
            self,
            REALTIME,
            config=config,
            factory=factory,
            storage=storage,
            webhooks=webhooks,
            budgets=budgets,
            documents=documents,
        )
        streaming = Streaming(
            self, STREAMING, config=config, factory=factory, storage=storage, realtime=realtime
        )
        worker = Worker(
            self,
            WORKER,
            config=config,
            factory=factory,
            storage=storage,
            outbox=outbox,
            streaming=streaming,
            fairness=fairness,
        )
        sweeper = Sweeper(
            self,
            SWEEPER,
            config=config,
            factory=factory,
            storage=storage,
            outbox=outbox,
            budgets=budgets,
            documents=documents,
            fairness=fairness,
        )
        batch = Batch(
            self,
            BATCH,
            config=config,
            factory=factory,
            storage=storage,
            outbox=outbox,
            worker=worker,
            budgets=budgets,
        )
        api = Api(
            self,
            API,
            config=config,
            factory=factory,
            auth=auth,
            storage=storage,
            budgets=budgets,
            streaming=streaming,
            documents=documents,
            route_functions={
                FunctionName.TICKETS: realtime.tickets_function,
                FunctionName.BUDGET: budgets.function,
                FunctionName.DOCUMENTS: documents.function,
            },
        )
        documents.use_cursor_secret(api.cursor_secret)
        console = Console(
            self,
            CONSOLE,
            config=config,
            auth=auth,
            api=api,
            realtime=realtime,
            documents_bucket=documents.bucket,
            site=site,
        )
        functions = {
            **api.functions,
            FunctionName.RELAY: outbox.relay,
            FunctionName.WORKER: worker.function,
            FunctionName.SWEEPER: sweeper.function,
            FunctionName.BATCHER: batch.batcher,
            FunctionName.BATCH_POLLER: batch.poller,
            **realtime.functions,
            **streaming.functions,
            FunctionName.WEBHOOK_SENDER: webhooks.sender,
            FunctionName.INGEST: documents.ingest,
        }
        Monitoring(
            self,
            MONITORING,
            config=config,
            api=api,
            outbox=outbox,
            realtime=realtime,
            streaming=streaming,
            webhooks=webhooks,
            documents=documents,
            functions=functions,
            alarms=batch.alarms,
        )

        outputs = {
            Output.API_URL: (api.http_api.api_endpoint, "Base URL of the HTTP API (`outlast --api-url`)"),
            Output.WEBSOCKET_URL: (
                realtime.stage.url,
                "WebSocket URL of live updates (open it with a ticket: POST /v1/realtime/tickets)",
            ),
            Output.USER_POOL_ID: (
                auth.user_pool.user_pool_id,
                "Cognito user pool: create users, set custom:tenant",
            ),
            Output.USER_POOL_CLIENT_ID: (
                auth.client.user_pool_client_id,
                "App client that signs users in; its ID tokens are the API's bearer tokens",
            ),
            Output.CONSOLE_URL: (console.url, "The web console: open it in a browser and sign in"),
            Output.CONSOLE_CLIENT_ID: (
                console.client.user_pool_client_id,
                "The console's public app client (authorization code + PKCE, managed login)",
            ),
            Output.AUTH_DOMAIN_URL: (console.domain.base_url(), "The user pool domain (managed login)"),
            Output.CLI_CLIENT_ID: (
                auth.cli_client.user_pool_client_id,
                "The command line's public app client: `outlast login --outputs FILE` reads it",
            ),
            Output.JOBS_QUEUE_URL: (outbox.jobs_queue.queue_url, "Jobs queue (the worker's trigger)"),
            Output.DLQ_URL: (
                outbox.dead_letter_queue.queue_url,
                "Jobs DLQ: `outlast ops dlq list` / `ops dlq redrive`",
            ),
            Output.ISOLATION_QUEUE_URL: (
                outbox.isolation_queue.queue_url,
                "Isolation queue: jobs whose batch crashed a worker, run one per invocation",
            ),
            Output.ISOLATION_DLQ_URL: (
                outbox.isolation_dead_letter_queue.queue_url,
                "Isolation DLQ: `outlast ops dlq list --queue isolation`",
            ),
            Output.JOBS_TABLE_NAME: (storage.jobs_table.table_name, "Jobs table (jobs, inputs, results)"),
            Output.IDEMPOTENCY_TABLE_NAME: (
                storage.idempotency_table.table_name,
                "Idempotency claims and submit-rate counters",
            ),
            Output.PAYLOAD_BUCKET_NAME: (storage.payload_bucket.bucket_name, "Inputs and results above 8 KB"),
            Output.CONNECTIONS_TABLE_NAME: (
                realtime.connections_table.table_name,
                "Live-update tickets (hashed) and open WebSocket connections",
            ),
            Output.WEBHOOKS_TABLE_NAME: (
                webhooks.table.table_name,
                "Webhook endpoints (with their signing secrets) and delivery records: `outlast ops webhooks`",
            ),
            Output.WEBHOOKS_QUEUE_URL: (webhooks.queue.queue_url, "Webhooks queue (the sender's trigger)"),
            Output.WEBHOOKS_DLQ_URL: (
                webhooks.dead_letter_queue.queue_url,
                "Webhooks DLQ: `outlast ops webhooks deliveries`, `ops webhooks redrive`",
            ),
            Output.BATCHES_TABLE_NAME: (
                batch.table.table_name,
                "Open provider batches of batch-tier jobs (`outlast ops batches list`)",
            ),
            Output.BUDGETS_TABLE_NAME: (
                budgets.table.table_name,
                "Token budgets: tenants' limits, monthly counters, open reservations (`outlast ops budgets`)",
            ),
            Output.OUTPUT_EVENTS_TABLE_NAME: (
                streaming.table.table_name,
                "Streaming jobs' output events (each flush of a streamed call), 24 h after their write",
            ),
            Output.DOCUMENTS_TABLE_NAME: (
                documents.table.table_name,
                "Documents: one item per uploaded document (status, text facts, pins)",
            ),
            Output.DOCUMENTS_BUCKET_NAME: (
                documents.bucket.bucket_name,
                "Uploaded documents and their extracted text, under documents/",
            ),
            Output.INGEST_QUEUE_URL: (documents.queue.queue_url, "Ingest queue: upload notifications"),
            Output.INGEST_DLQ_URL: (
                documents.dead_letter_queue.queue_url,
                "Ingest DLQ: notifications no retry can fix, or that kept crashing the ingest",
            ),
            Output.SLOTS_TABLE_NAME: (
                fairness.slots_table.table_name,
                "Running slots of capped tenants (one per running job): `outlast ops tenants show`",
            ),
            Output.MAX_RUNNING_PER_TENANT: (
                str(config.max_running_per_tenant),
                "The stage's running cap for tenants without their own (0: no cap)",
            ),
            Output.DEFAULT_MONTHLY_TOKENS: (
                str(config.default_monthly_tokens),
                "The stage's monthly token limit for tenants without their own (0: no limit)",
            ),
            Output.DISPATCH_GRACE_SECONDS: (
                str(config.dispatch_grace_seconds),
                "When the sweeper re-sends a dispatched job whose message was lost (`outlast ops` reads it)",
            ),
            Output.MAX_CRASHES: (
                str(config.max_crashes),
                "Solo claims that crashed a worker before the job fails worker_crashed (`outlast ops`)",
            ),
            Output.OPENAI_SECRET_ARN: (
                worker.openai_secret.secret_arn,
                "Secret that holds the OpenAI API key: put the real key here after the first deploy",
            ),
        }
        for key, (value, description) in outputs.items():
            CfnOutput(self, key.value, value=value, description=description)
