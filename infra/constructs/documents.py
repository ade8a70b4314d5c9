"""Documents (DESIGN.md, "Documents: upload once, run jobs on them"): the store, the bucket, the
upload notification, the ingest queue with its DLQ, the ingest function and the documents API.

- The documents table: one item per document in its owner's partition, a local secondary index in
  creation order (a list page may read consistently), TTL at the document's expiry, point-in-time
  recovery and the AWS managed key like every table.
- The documents bucket, of its own (not the payload bucket): its notification and CORS rules are
  about uploads alone. SSE-S3, public access blocked, TLS only, objects owned by the bucket. The
  documents prefix expires after the retention plus the job retention (a pin keeps a document's
  record until its job's expiry, and the objects must outlive it); CORS allows POST from the
  console's origin only (none when it is not set), since browsers upload straight to S3 with the
  presigned POST.
- ObjectCreated on `documents/*/original` -> the ingest queue (SSE-SQS, TLS only; the DLQ after a
  few receives: a message that crashes the ingest) -> the ingest function, one message per
  invocation (an extraction takes the function's CPU), a few at once (`ingestMaxConcurrency`).
- The ingest function has its own layer (pypdf, defusedxml: the API layer carries no parser) and
  memory for the confined child plus the parent's copy of the file; its timeout holds a whole
  extraction's wall-clock limit and the writes after it.
- Grants, exactly what each calls. The documents function: PutItem, GetItem, DeleteItem and Query
  on the creation index; PutObject on originals (S3 authorizes a presigned POST as its signer);
  DeleteObject under the prefix; the cursor key (granted when the API hands it over). The ingest:
  GetItem and UpdateItem; GetObject under the prefix (and ListBucket, so a missing object is 404);
  PutObject on texts only; SendMessage to its DLQ (poison); the event source adds receive/delete.
"""

from __future__ import annotations

import jsii
from aws_cdk import Duration, IStableStringProducer, Lazy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_notifications as s3n
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import capacity, grants, nag
from infra.config import DLQ_EXTRA_RECEIVES, DLQ_RETENTION_DAYS, VISIBILITY_TIMEOUT_FACTOR, StageConfig
from infra.constructs.outbox import secure_queue
from infra.environment import documents_environment, ingest_environment
from infra.function_factory import FunctionFactory, FunctionSpec, removal_policy
from infra.names import DOCUMENTS_BUCKET, DOCUMENTS_TABLE, INGEST_DLQ, INGEST_QUEUE, FunctionName
from infra.packaging import API_LAYER, INGEST_LAYER
from shared import resources as r
from shared.documents.keys import DocumentPart

_STRING = dynamodb.AttributeType.STRING
# The ingest's timeout: the extraction's wall-clock kill (its settings' default, 90 s), the margin
# the handler keeps for the writes after it (5 s), and the read of a 25 MiB original before it.
INGEST_TIMEOUT_SECONDS = 120
# A message that crashed or timed out the ingest this many times goes to the DLQ.
INGEST_MAX_RECEIVES = 2 + DLQ_EXTRA_RECEIVES
_API_FUNCTION_TIMEOUT = Duration.seconds(10)
ORIGINALS = f"{r.DOCUMENTS_PREFIX}*/{DocumentPart.ORIGINAL.value}"
TEXTS = f"{r.DOCUMENTS_PREFIX}*/{DocumentPart.TEXT.value}"


class Documents(Construct):
    """The documents table and bucket, the ingest queue, DLQ and function, the documents function."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: StageConfig, factory: FunctionFactory
    ) -> None:
        super().__init__(scope, construct_id)
        self._cursor_secret = _LaterSecret()
        self.table = self._table(config)
        self.bucket = self._bucket(config)
        self.dead_letter_queue = secure_queue(
            self, INGEST_DLQ, retention_period=Duration.days(DLQ_RETENTION_DAYS)
        )
        self.queue = secure_queue(
            self,
            INGEST_QUEUE,
            visibility_timeout=Duration.seconds(VISIBILITY_TIMEOUT_FACTOR * INGEST_TIMEOUT_SECONDS),
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dead_letter_queue, max_receive_count=INGEST_MAX_RECEIVES
            ),
        )
        self.bucket.add_event_notification(
            s3.EventType.OBJECT_CREATED,
            s3n.SqsDestination(self.queue),
            s3.NotificationKeyFilter(prefix=r.DOCUMENTS_PREFIX, suffix=f"/{DocumentPart.ORIGINAL.value}"),
        )
        self.ingest = self._ingest(config, factory)
        self.function = self._api_function(config, factory)
        self._acknowledge()

    @property
    def functions(self) -> dict[FunctionName, lambda_.Function]:
        """The functions of this capability, by name."""
        return {FunctionName.DOCUMENTS: self.function, FunctionName.INGEST: self.ingest}

    def grant_job_input(self, submit: lambda_.Function) -> None:
        """The submit's part in jobs on documents: read the document (GetItem), pin it (UpdateItem),
        read its text (GetObject on texts, ListBucket so that a missing one is 404, not 403)."""
        grants.grant_table(self.table, submit, ["GetItem", "UpdateItem"])
        self._grant_pattern(submit, "s3:GetObject", TEXTS, "A job on a document reads the document's text")
        grants.grant_missing_objects_as_404(self.bucket, submit)

    def grant_pin_repair(self, sweeper: lambda_.Function) -> None:
        """The sweeper's part: pinned documents due a check (Query on the pin index), the document
        (GetItem), its pins and its check (UpdateItem)."""
        grants.grant_table(
            self.table, sweeper, ["Query", "GetItem", "UpdateItem"], indexes=[r.DOCUMENTS_PIN_INDEX]
        )

    def grant_unpin(self, notifier: lambda_.Function) -> None:
        """The notifier's part: a job's terminal write unpins its document (UpdateItem)."""
        grants.grant_table(self.table, notifier, ["UpdateItem"])

    def use_cursor_secret(self, secret: secretsmanager.ISecret) -> None:
        """Sign list cursors with the API's key (made by the API construct, after this one): its ARN
        fills the function's environment at synth."""
        self._cursor_secret.secret = secret
        grants.grant_secret_value(secret, self.function)

    def _table(self, config: StageConfig) -> dynamodb.Table:
        table = dynamodb.Table(
            self,
            DOCUMENTS_TABLE,
            partition_key=dynamodb.Attribute(name=r.DOCUMENTS_PARTITION_KEY, type=_STRING),
            sort_key=dynamodb.Attribute(name=r.DOCUMENTS_SORT_KEY, type=_STRING),
            **capacity.table_billing(config),
            time_to_live_attribute=r.TTL_ATTRIBUTE,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            deletion_protection=config.retain_data,
            removal_policy=removal_policy(config),
        )
        table.add_local_secondary_index(
            index_name=r.DOCUMENTS_LIST_INDEX,
            sort_key=dynamodb.Attribute(name=r.DOCUMENTS_LIST_INDEX_SORT, type=_STRING),
            projection_type=dynamodb.ProjectionType.ALL,
        )
        # Pinned documents only carry its keys (sparse, sharded): the sweeper's pin repair.
        table.add_global_secondary_index(
            index_name=r.DOCUMENTS_PIN_INDEX,
            partition_key=dynamodb.Attribute(name=r.DOCUMENTS_PIN_INDEX_PARTITION, type=_STRING),
            sort_key=dynamodb.Attribute(name=r.DOCUMENTS_PIN_INDEX_SORT, type=_STRING),
            projection_type=dynamodb.ProjectionType.KEYS_ONLY,
            **capacity.index_capacity(config),
        )
        capacity.auto_scale(table, config, indexes=(r.DOCUMENTS_PIN_INDEX,))
        return table

    def _bucket(self, config: StageConfig) -> s3.Bucket:
        cors = (
            [
                s3.CorsRule(
                    allowed_methods=[s3.HttpMethods.POST],
                    allowed_origins=[config.console_origin],
                    # A browser that watches its upload's progress sends a preflight.
                    allowed_headers=["Content-Type"],
                    max_age=3600,
                )
            ]
            if config.console_origin
            else None
        )
        return s3.Bucket(
            self,
            DOCUMENTS_BUCKET,
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            versioned=False,
            removal_policy=removal_policy(config),
            cors=cors,
            lifecycle_rules=[
                # Never before the record: a pinned document's record lives until its last job's
                # expiry, at most the retention plus the job retention after its creation (docs/
                # architecture.md, "Documents": why a lifecycle rule and not tags or a function).
                s3.LifecycleRule(
                    id="expire-documents",
                    prefix=r.DOCUMENTS_PREFIX,
                    expiration=Duration.days(config.document_object_expiration_days),
                ),
                s3.LifecycleRule(
                    id="abort-incomplete-uploads", abort_incomplete_multipart_upload_after=Duration.days(1)
                ),
            ],
        )

    def _ingest(self, config: StageConfig, factory: FunctionFactory) -> lambda_.Function:
        environment = ingest_environment(
            config,
            documents_table=self.table.table_name,
            documents_bucket=self.bucket.bucket_name,
            dlq_url=self.dead_letter_queue.queue_url,
        )
        # Half the function's memory for the child's address space: the parent holds the file too.
        environment["EXTRACTION_MEMORY_MB"] = str(config.ingest_memory_mb // 2)
        function = factory.create(
            self,
            FunctionSpec(
                name=FunctionName.INGEST,
                layer=INGEST_LAYER,
                environment=environment,
                timeout=Duration.seconds(INGEST_TIMEOUT_SECONDS),
                memory_mb=config.ingest_memory_mb,
                description="outlast ingest: uploaded documents -> extracted text, Ready or Rejected",
            ),
        )
        grants.grant_table(self.table, function, ["GetItem", "UpdateItem"])
        grants.grant_objects(self.bucket, function, ["GetObject"], [r.DOCUMENTS_PREFIX])
        grants.grant_missing_objects_as_404(self.bucket, function)
        self._grant_pattern(function, "s3:PutObject", TEXTS, "The ingest writes each document's text")
        grants.grant_send(self.dead_letter_queue, function)
        function.add_event_source(
            sources.SqsEventSource(
                self.queue,
                batch_size=1,
                report_batch_item_failures=True,
                max_concurrency=config.ingest_max_concurrency,
            )
        )
        return function

    def _api_function(self, config: StageConfig, factory: FunctionFactory) -> lambda_.Function:
        function = factory.create(
            self,
            FunctionSpec(
                name=FunctionName.DOCUMENTS,
                layer=API_LAYER,
                environment=documents_environment(
                    config,
                    documents_table=self.table.table_name,
                    documents_bucket=self.bucket.bucket_name,
                    cursor_secret_arn=Lazy.string(self._cursor_secret),
                ),
                timeout=_API_FUNCTION_TIMEOUT,
                memory_mb=config.api_memory_mb,
                description="outlast documents: create (presigned POST), read, list and delete documents",
                traced=config.api_tracing,
            ),
        )
        grants.grant_table(
            self.table,
            function,
            ["PutItem", "GetItem", "DeleteItem", "Query"],
            indexes=[r.DOCUMENTS_LIST_INDEX],
        )
        # S3 authorizes a presigned POST as the role that signed it.
        self._grant_pattern(
            function, "s3:PutObject", ORIGINALS, "The presigned POSTs this role signs upload originals"
        )
        grants.grant_objects(self.bucket, function, ["DeleteObject"], [r.DOCUMENTS_PREFIX])
        return function

    def _grant_pattern(self, function: lambda_.Function, action: str, pattern: str, why: str) -> None:
        """One action on the objects a key pattern names (a document's original, or its text)."""
        iam.Grant.add_to_principal(
            grantee=function, actions=[action], resource_arns=[self.bucket.arn_for_objects(pattern)]
        )
        bucket = self.bucket.node.default_child
        assert isinstance(bucket, s3.CfnBucket)  # noqa: S101 - the bucket is made right above
        logical_id = self.bucket.stack.resolve(bucket.logical_id)
        if function.role is None:  # pragma: no cover - the factory gives every function a role
            raise RuntimeError("function without a role")
        nag.acknowledge(
            function.role,
            nag.wildcard_resource(f"<{logical_id}.Arn>/{pattern}"),
            f"{why}: their keys hold the owner and a document id unknown until a document exists, "
            f"so `{pattern}` is the narrowest resource there is, for {action} only.",
        )

    def _acknowledge(self) -> None:
        nag.acknowledge(
            self.bucket,
            "AwsSolutions-S1",
            "Server access logs are off: only the documents and ingest roles and presigned POSTs those "
            "roles sign touch documents (public access blocked, TLS enforced); every create, ingest and "
            "delete is logged with the document id. Accounts that need an object-level audit trail "
            "enable CloudTrail S3 data events.",
        )
        stack = self.bucket.stack
        handler = next(
            (c for c in stack.node.children if c.node.id.startswith("BucketNotificationsHandler")), None
        )
        if handler is None:  # pragma: no cover - add_event_notification always adds its singleton
            raise RuntimeError("the bucket notifications handler was not found")
        for rule, reason in (
            (
                "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                "AWSLambdaBasicExecutionRole]",
                "The bucket notifications handler (a CDK-provided function that sets the documents "
                "bucket's notification at deploy time) writes its logs through "
                "AWSLambdaBasicExecutionRole; it runs only during deployments.",
            ),
            (
                nag.wildcard_resource("*"),
                "The bucket notifications handler's s3:PutBucketNotification: aws-cdk-lib grants it on "
                "every bucket; it only sets notifications, during deployments.",
            ),
        ):
            nag.acknowledge(handler, rule, reason)


@jsii.implements(IStableStringProducer)
class _LaterSecret:
    """The cursor key's ARN, produced at synth: the API construct makes the key after this one."""

    def __init__(self) -> None:
        self.secret: secretsmanager.ISecret | None = None

    def produce(self) -> str:
        """The ARN of the key use_cursor_secret was given."""
        if self.secret is None:
            raise RuntimeError("Documents.use_cursor_secret was never called")
        return self.secret.secret_arn
