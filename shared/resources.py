"""Names and shapes of the AWS resources, shared by the functions, the CDK app, local mode and tests.

Changing a key or an index here changes it everywhere at once; nothing else spells them.
"""

from __future__ import annotations

# Environment variables through which the CDK app (and local mode) tell functions where things are.
ENV_JOBS_TABLE = "JOBS_TABLE_NAME"
ENV_IDEMPOTENCY_TABLE = "IDEMPOTENCY_TABLE_NAME"
ENV_PAYLOAD_BUCKET = "PAYLOAD_BUCKET_NAME"
ENV_CURSOR_SECRET = "CURSOR_SECRET_ARN"  # noqa: S105 - the name of a variable, not a secret
ENV_JOBS_QUEUE_URL = "JOBS_QUEUE_URL"
ENV_DLQ_URL = "JOBS_DLQ_URL"
# The isolation queue: jobs whose batch crashed a worker run from it one per invocation.
ENV_ISOLATION_QUEUE_URL = "ISOLATION_QUEUE_URL"
ENV_ISOLATION_QUEUE_ARN = "ISOLATION_QUEUE_ARN"
ENV_ISOLATION_DLQ_URL = "ISOLATION_DLQ_URL"
ENV_BATCH_QUEUE_URL = "BATCH_QUEUE_URL"
ENV_BATCHES_TABLE = "BATCHES_TABLE"
ENV_OPENAI_SECRET = "OPENAI_SECRET_ARN"  # noqa: S105 - the name of a variable, not a secret

# Jobs table: the job item, its input and its result share a partition.
PARTITION_KEY = "pk"
SORT_KEY = "sk"
TTL_ATTRIBUTE = "ttl"
TYPE_ATTRIBUTE = "type"
JOB_ITEM_TYPE = "job"
INPUT_ITEM_TYPE = "input"
RESULT_ITEM_TYPE = "result"
STEP_ITEM_TYPE = "step"  # a multi-step job's checkpoint (shared.adapters.step_checkpoints)
# Every job write sets `w` (the kind of write, shared.ports.WriteKind) and adds 1 to `revision`:
# the stream's consumers read both.
WRITE_KIND_ATTRIBUTE = "w"
REVISION_ATTRIBUTE = "revision"

# List index: the owner's jobs in submission order. Sparse: only job items carry its keys.
LIST_INDEX = "byOwner"
LIST_INDEX_PARTITION = "ownerKey"
LIST_INDEX_SORT = "listKey"
# Only what never changes after the submit, so that no later write of a job touches the index:
# the list reads the jobs it finds there (eventually consistent) and filters them by status.
# `expiresAt` lets the query itself skip expired jobs.
LIST_INDEX_PROJECTION = ("expiresAt",)

# Sweeper index: only jobs that are Pending, Running or CancellationRequested carry its keys,
# sharded so that a burst of submits does not crowd one index partition.
SWEEP_INDEX = "bySweep"
SWEEP_INDEX_PARTITION = "sweepShard"
SWEEP_INDEX_SORT = "sweepAt"
SWEEP_SHARDS = 16

# Idempotency table: idempotency claims and per-owner submit-rate counters (no stream).
IDEMPOTENCY_PARTITION_KEY = "pk"

# Object keys in the payload bucket.
INPUT_PREFIX = "inputs/"
RESULT_PREFIX = "results/"

# Payloads above this size go to S3: an S3 PUT costs what about 8 KB of DynamoDB writes cost.
INLINE_PAYLOAD_LIMIT_BYTES = 8 * 1024
# SQS's longest DelaySeconds: a job due later is sent that much delayed, and deferred again on arrival.
MAX_DELAY_SECONDS = 900

# Live updates (DESIGN.md, "Live updates"): tickets and open WebSocket connections share one table.
ENV_CONNECTIONS_TABLE = "CONNECTIONS_TABLE_NAME"
# The WebSocket stage's URL (wss://...), which tickets are appended to.
ENV_WEBSOCKET_URL = "WEBSOCKET_URL"
# The stage's callback URL (https://.../stage): the @connections management API's endpoint. Set
# from the template, never left to boto3's defaults (locally those would reach moto's stub).
ENV_CONNECTIONS_ENDPOINT = "CONNECTIONS_ENDPOINT"
CONNECTIONS_PARTITION_KEY = "pk"
CONNECTIONS_SORT_KEY = "sk"

# Webhooks (DESIGN.md, "Webhooks for backends"): endpoints, their secrets and delivery records in
# one table of their own (docs/architecture.md, "Webhooks: where endpoints live"); deliveries on
# the webhooks queue, with its DLQ.
ENV_WEBHOOKS_TABLE = "WEBHOOKS_TABLE_NAME"
ENV_WEBHOOKS_QUEUE_URL = "WEBHOOKS_QUEUE_URL"
ENV_WEBHOOKS_DLQ_URL = "WEBHOOKS_DLQ_URL"
# The retry schedule's scale (1 in AWS; local tests make it small) and the local-only egress flag
# (plain http and loopback receivers; "false" in the template, turned on by local mode only).
ENV_WEBHOOK_RETRY_SCALE = "WEBHOOK_RETRY_SCALE"
ENV_WEBHOOK_LOCAL_EGRESS = "WEBHOOK_LOCAL_EGRESS"
WEBHOOKS_PARTITION_KEY = "pk"
WEBHOOKS_SORT_KEY = "sk"
# Endpoints by tenant, for the notifier and `webhooks list`. Sparse (only endpoint items carry
# its partition key) and projected without the secrets: the notifier may read the index only.
WEBHOOKS_TENANT_INDEX = "byTenant"
WEBHOOKS_TENANT_INDEX_PARTITION = "endpointTenant"
WEBHOOKS_TENANT_INDEX_SORT = "pk"
WEBHOOKS_TENANT_INDEX_PROJECTION = (
    "endpointId",
    "url",
    "events",
    "enabled",
    "disabledReason",
    "disabledAt",
    "createdAt",
    "previousUntil",
)
# The sender's metrics (service `webhook_sender`): the failure-rate alarm divides the second by the first.
WEBHOOK_ATTEMPTS_METRIC = "WebhookAttempts"
WEBHOOK_FAILURES_METRIC = "WebhookAttemptFailures"
# Token budgets (DESIGN.md, "Token budgets"): per-tenant limits, per-month counters and one
# reservation per run of a job, in a table of their own with no stream (transactions on it).
ENV_BUDGETS_TABLE = "BUDGETS_TABLE_NAME"
BUDGETS_PARTITION_KEY = "pk"
BUDGETS_SORT_KEY = "sk"
# Open reservations only carry its keys (a sparse index, sharded): the sweeper's way to the
# reservations that nothing settled, without a scan.
BUDGET_CHECK_INDEX = "byCheck"
BUDGET_CHECK_PARTITION = "checkShard"
BUDGET_CHECK_SORT = "checkAt"
# Fairness (DESIGN.md, "Fairness between tenants"): running slots, one item per (tenant group,
# slot k < cap), in a table of their own with no stream (a slot write is no job change).
ENV_SLOTS_TABLE = "SLOTS_TABLE_NAME"
SLOTS_PARTITION_KEY = "pk"

# Documents (DESIGN.md, "Documents"): one item per document in a table of their own, the owner's
# partition holding their documents (a foreign caller's read misses by construction); the files
# and their extracted text in the documents bucket under DOCUMENTS_PREFIX.
ENV_DOCUMENTS_TABLE = "DOCUMENTS_TABLE_NAME"
ENV_DOCUMENTS_BUCKET = "DOCUMENTS_BUCKET_NAME"
# The ingest queue's DLQ: a notification no retry can fix (unparseable, a key outside the prefix).
ENV_INGEST_DLQ_URL = "INGEST_DLQ_URL"
# Where presigned POSTs are sent: unset in AWS (S3's regional endpoint); local mode's upload front.
ENV_UPLOAD_ENDPOINT_URL = "DOCUMENTS_UPLOAD_ENDPOINT_URL"
DOCUMENTS_PARTITION_KEY = "pk"  # the owner: `tenant#sub` (neither may contain `#`)
DOCUMENTS_SORT_KEY = "sk"  # the document id
# The owner's documents in creation order: a local secondary index (so a list page may read
# consistently) on `createdAt#sequenceId`, written once, at the create.
DOCUMENTS_LIST_INDEX = "byCreated"
DOCUMENTS_LIST_INDEX_SORT = "listKey"
DOCUMENTS_PREFIX = "documents/"
# Pinned documents carry the keys of a sparse, sharded index, due a grace after the last pin: the
# sweeper's way to pins whose job ended without its terminal write unpinning (or never was written).
DOCUMENTS_PIN_INDEX = "byPinCheck"
DOCUMENTS_PIN_INDEX_PARTITION = "pinShard"
DOCUMENTS_PIN_INDEX_SORT = "pinCheckAt"
DOCUMENTS_PIN_SHARDS = 4

# Streaming output (DESIGN.md, "Streaming output"): each flush of a streaming call is one item of
# the output events table (`JOB#<id>` / `<attempt>#<seq>`, both zero-padded so they sort as
# numbers), whose stream feeds the output pusher; not the jobs table, whose stream already has
# its two readers (the relay and the notifier). Events live one input retention after their write.
ENV_OUTPUT_EVENTS_TABLE = "OUTPUT_EVENTS_TABLE_NAME"
# Open provider batches (DESIGN.md, "Cost tiers"): one item per batch until the poller saw it through.
BATCHES_PARTITION_KEY = "pk"  # the provider's batch id
OUTPUT_EVENTS_PARTITION_KEY = "pk"
OUTPUT_EVENTS_SORT_KEY = "sk"
