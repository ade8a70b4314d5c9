"""Construct ids, handler strings, routes and output keys: the names the CDK app, local mode and tests share.

Table keys, index names and environment variable names live in `shared.resources`; this module
holds only what exists because of the CDK app. Construct ids are part of the logical ids in the
template, so changing one here replaces the resource on the next deploy.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

# The stack's construct id: the template is `cdk.out/<STACK_ID>.template.json`. The CloudFormation
# stack name is a context setting (`stackName`), so several stages can live in one account.
STACK_ID = "Outlast"

# One construct per capability, composed by the stack.
AUTH = "Auth"
STORAGE = "Storage"
OUTBOX = "Outbox"
WORKER = "Worker"
SWEEPER = "Sweeper"
API = "Api"
REALTIME = "Realtime"
WEBHOOKS = "Webhooks"
BUDGETS = "Budgets"
FAIRNESS = "Fairness"
STREAMING = "Streaming"
DOCUMENTS = "Documents"
MONITORING = "Monitoring"
CONSOLE = "Console"
PACKAGING = "Packaging"

# Constructs inside the capabilities that local mode and tests look up.
USER_POOL = "UserPool"
USER_POOL_CLIENT = "Client"
CLI_CLIENT = "CliClient"  # the command line's public app client (outlast login); local mode finds it by this
JOBS_TABLE = "JobsTable"
IDEMPOTENCY_TABLE = "IdempotencyTable"
PAYLOAD_BUCKET = "PayloadBucket"
JOBS_QUEUE = "JobsQueue"
JOBS_DLQ = "JobsDlq"
ISOLATION_QUEUE = "IsolationQueue"
ISOLATION_DLQ = "IsolationDlq"
RELAY_FAILURE_QUEUE = "RelayFailures"
OPENAI_SECRET = "OpenAiKey"  # noqa: S105 - a construct id, not a secret
CURSOR_SECRET = "CursorKey"  # noqa: S105 - a construct id, not a secret
HTTP_API = "HttpApi"
CONNECTIONS_TABLE = "ConnectionsTable"
BUDGETS_TABLE = "BudgetsTable"
SLOTS_TABLE = "SlotsTable"
WEBSOCKET_API = "WebSocketApi"
WEBSOCKET_STAGE = "Stage"
TICKET_AUTHORIZER = "TicketAuthorizer"
NOTIFIER_FAILURE_QUEUE = "NotifierFailures"
OUTPUT_EVENTS_TABLE = "OutputEventsTable"
OUTPUT_PUSHER_FAILURE_QUEUE = "OutputPusherFailures"
WEBHOOKS_TABLE = "WebhooksTable"
WEBHOOKS_QUEUE = "WebhooksQueue"
WEBHOOKS_DLQ = "WebhooksDlq"
DOCUMENTS_TABLE = "DocumentsTable"
DOCUMENTS_BUCKET = "DocumentsBucket"
INGEST_QUEUE = "IngestQueue"
INGEST_DLQ = "IngestDlq"
# The WebSocket stage: wss://<api id>.execute-api.<region>.amazonaws.com/live
WEBSOCKET_STAGE_NAME = "live"
# The identity source of the $connect authorizer: no ticket in the query, no authorizer call (401).
TICKET_IDENTITY_SOURCE = "route.request.querystring.ticket"
WEBSOCKET_ROUTES = ("$connect", "$disconnect", "$default")
# Routes of the selection expression `$request.body.action` (DESIGN.md, "Streaming output").
FOLLOW_ROUTES = ("follow", "unfollow")
# The web console (infra/constructs/console.py); local mode finds its app client by CONSOLE_CLIENT.
CONSOLE_BUCKET = "Bucket"
CONSOLE_HEADERS = "Headers"
CONSOLE_DISTRIBUTION = "Distribution"
CONSOLE_DOMAIN = "Domain"
CONSOLE_CLIENT = "ConsoleClient"
CONSOLE_BRANDING = "Branding"
CONSOLE_DEPLOYMENT = "Deployment"
ALARM_TOPIC = "AlarmTopic"
SWEEP_RULE = "Schedule"
BATCH = "Batch"
BATCHES_TABLE = "BatchesTable"
BATCH_QUEUE = "Queue"
BATCH_DLQ = "Dlq"
BATCH_POLL_RULE = "PollSchedule"

# The function factory names each function's constructs after it (`<Name>Function`, `<Name>Role`, ...).
FUNCTION_SUFFIX = "Function"
ROLE_SUFFIX = "Role"
LOG_GROUP_SUFFIX = "Logs"

# Powertools: one metrics namespace (a context setting, default below) and the service per function,
# which is also the `service` dimension of every metric a function emits.
DEFAULT_METRICS_NAMESPACE = "outlast"
SWEEPER_RECOVERIES_METRIC = "SweeperRecoveries"


class FunctionName(StrEnum):
    """The functions; the value names the package and is the Powertools service name."""

    SUBMIT = "submit"
    STATUS = "status"
    RELAY = "relay"
    WORKER = "worker"
    SWEEPER = "sweeper"
    TICKETS = "tickets"
    WS_AUTHORIZER = "ws_authorizer"
    WS_CONNECTIONS = "ws_connections"
    WS_MESSAGES = "ws_messages"
    NOTIFIER = "notifier"
    WEBHOOK_SENDER = "webhook_sender"
    BUDGET = "budget"
    WS_FOLLOW = "ws_follow"
    OUTPUT_PUSHER = "output_pusher"
    DOCUMENTS = "documents"
    INGEST = "ingest"
    BATCHER = "batcher"
    BATCH_POLLER = "batch_poller"

    @property
    def construct_id(self) -> str:
        """`Submit`, `Status`, `WsAuthorizer`, ...: the prefix of the function's construct ids."""
        return "".join(part.capitalize() for part in self.value.split("_"))

    @property
    def handler(self) -> str:
        """The handler string, relative to the code asset (which holds `functions/` and `shared/`)."""
        return f"functions.{self.value}.handler.lambda_handler"

    @property
    def service(self) -> str:
        """POWERTOOLS_SERVICE_NAME, and so the `service` metric dimension."""
        return self.value


@dataclass(frozen=True)
class Route:
    """One HTTP API route and the function that serves it."""

    method: str
    path: str
    function: FunctionName

    @property
    def key(self) -> str:
        """The API Gateway route key, e.g. `POST /v1/jobs`."""
        return f"{self.method} {self.path}"


ROUTES: tuple[Route, ...] = (
    Route("POST", "/v1/jobs", FunctionName.SUBMIT),
    Route("GET", "/v1/jobs", FunctionName.STATUS),
    Route("GET", "/v1/jobs/{jobId}", FunctionName.STATUS),
    Route("GET", "/v1/jobs/{jobId}/result", FunctionName.STATUS),
    Route("GET", "/v1/jobs/{jobId}/output", FunctionName.STATUS),
    Route("POST", "/v1/jobs/{jobId}/cancellation", FunctionName.STATUS),
    Route("POST", "/v1/realtime/tickets", FunctionName.TICKETS),
    Route("GET", "/v1/budget", FunctionName.BUDGET),
    Route("POST", "/v1/documents", FunctionName.DOCUMENTS),
    Route("GET", "/v1/documents", FunctionName.DOCUMENTS),
    Route("GET", "/v1/documents/{documentId}", FunctionName.DOCUMENTS),
    Route("DELETE", "/v1/documents/{documentId}", FunctionName.DOCUMENTS),
)

# CORS (DESIGN.md, "HTTP contract"): what browsers may send and read.
CORS_ALLOW_HEADERS = ("Authorization", "Content-Type", "Idempotency-Key")
CORS_EXPOSE_HEADERS = ("Location", "Retry-After", "Idempotent-Replayed")

# The Cognito custom attribute that carries the tenant (`custom:tenant` in tokens).
TENANT_ATTRIBUTE = "tenant"


class Output(StrEnum):
    """Stack output keys (`aws cloudformation describe-stacks` and `cdk deploy --outputs-file`)."""

    API_URL = "ApiUrl"
    WEBSOCKET_URL = "WebSocketUrl"
    USER_POOL_ID = "UserPoolId"
    USER_POOL_CLIENT_ID = "UserPoolClientId"
    JOBS_QUEUE_URL = "JobsQueueUrl"
    DLQ_URL = "DlqUrl"
    ISOLATION_QUEUE_URL = "IsolationQueueUrl"
    ISOLATION_DLQ_URL = "IsolationDlqUrl"
    JOBS_TABLE_NAME = "JobsTableName"
    IDEMPOTENCY_TABLE_NAME = "IdempotencyTableName"
    PAYLOAD_BUCKET_NAME = "PayloadBucketName"
    OPENAI_SECRET_ARN = "OpenAiSecretArn"  # noqa: S105 - an output key, not a secret
    CONNECTIONS_TABLE_NAME = "ConnectionsTableName"
    WEBHOOKS_TABLE_NAME = "WebhooksTableName"
    WEBHOOKS_QUEUE_URL = "WebhooksQueueUrl"
    WEBHOOKS_DLQ_URL = "WebhooksDlqUrl"
    BUDGETS_TABLE_NAME = "BudgetsTableName"
    SLOTS_TABLE_NAME = "SlotsTableName"
    MAX_RUNNING_PER_TENANT = "MaxRunningPerTenant"
    BATCHES_TABLE_NAME = "BatchesTableName"
    OUTPUT_EVENTS_TABLE_NAME = "OutputEventsTableName"
    DEFAULT_MONTHLY_TOKENS = "DefaultMonthlyTokens"
    DISPATCH_GRACE_SECONDS = "DispatchGraceSeconds"
    MAX_CRASHES = "MaxCrashes"
    CLI_CLIENT_ID = "CliClientId"
    CONSOLE_URL = "ConsoleUrl"
    CONSOLE_CLIENT_ID = "ConsoleClientId"
    AUTH_DOMAIN_URL = "AuthDomainUrl"
    DOCUMENTS_TABLE_NAME = "DocumentsTableName"
    DOCUMENTS_BUCKET_NAME = "DocumentsBucketName"
    INGEST_QUEUE_URL = "IngestQueueUrl"
    INGEST_DLQ_URL = "IngestDlqUrl"


class Runbook(StrEnum):
    """Anchors in docs/runbook.md that alarm descriptions link to."""

    DLQ_NOT_EMPTY = "dlq-not-empty"
    ISOLATION_DLQ_NOT_EMPTY = "isolation-dlq-not-empty"
    OLDEST_MESSAGE_AGE = "oldest-message-age"
    STREAM_ITERATOR_AGE = "stream-iterator-age"
    FUNCTION_ERRORS = "function-errors"
    FUNCTION_THROTTLES = "function-throttles"
    SWEEPER_RECOVERIES = "sweeper-recoveries"
    RELAY_FAILURES = "relay-failures"
    NOTIFIER_ITERATOR_AGE = "notifier-iterator-age"
    NOTIFIER_FAILURES = "notifier-failures"
    WEBHOOKS_DLQ_NOT_EMPTY = "webhooks-dlq-not-empty"
    WEBHOOK_FAILURE_RATE = "webhook-failure-rate"
    BUDGET_NEAR_LIMIT = "budget-near-limit"
    BUDGET_EXHAUSTED = "budget-exhausted"
    BUDGET_OVERRUNS = "budget-overruns"
    OUTPUT_PUSHER_ITERATOR_AGE = "output-pusher-iterator-age"
    OUTPUT_PUSHER_FAILURES = "output-pusher-failures"
    INGEST_DLQ_NOT_EMPTY = "ingest-dlq-not-empty"
    INGEST_OLDEST_MESSAGE_AGE = "ingest-oldest-message-age"
    NOISY_TENANTS = "noisy-tenants"
    BATCHER_DLQ_NOT_EMPTY = "batcher-dlq-not-empty"
    BATCH_OVERDUE = "batch-overdue"
    BATCH_FAILED = "batch-failed"
    BATCH_ORPHANED = "batch-orphaned"

    @property
    def link(self) -> str:
        """Where the alarm's reader finds what to do."""
        return f"docs/runbook.md#{self.value}"
