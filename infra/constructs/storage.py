"""State: the jobs table (the outbox stream on it), the idempotency table and the payload bucket.

Table keys, index names, key schemas and projections all come from `shared.resources`, the
same definitions the integration tests build their moto tables from.

Capacity: on demand, or provisioned with auto scaling on each table and index (`infra.capacity`).

Encryption: both tables use the AWS managed key (alias/aws/dynamodb): encrypted at rest with
key use recorded in CloudTrail, no key to pay for or to write a policy for. A customer managed
key would matter only for cross-account key control or crypto-shredding, which outlast does
not need. The bucket uses SSE-S3 for the same reasons.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra import capacity, nag
from infra.config import StageConfig
from infra.function_factory import removal_policy
from infra.names import IDEMPOTENCY_TABLE, JOBS_TABLE, PAYLOAD_BUCKET
from shared import resources as r

_STRING = dynamodb.AttributeType.STRING


class Storage(Construct):
    """Tables and bucket, encrypted, recoverable, expiring with the job retention."""

    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig) -> None:
        super().__init__(scope, construct_id)
        removal = removal_policy(config)
        recovery = dynamodb.PointInTimeRecoverySpecification(point_in_time_recovery_enabled=True)
        self.jobs_table = dynamodb.Table(
            self,
            JOBS_TABLE,
            partition_key=dynamodb.Attribute(name=r.PARTITION_KEY, type=_STRING),
            sort_key=dynamodb.Attribute(name=r.SORT_KEY, type=_STRING),
            **capacity.table_billing(config),
            # The outbox: the relay reads INSERTs of job items from it (NEW_IMAGE carries the type).
            stream=dynamodb.StreamViewType.NEW_IMAGE,
            time_to_live_attribute=r.TTL_ATTRIBUTE,
            point_in_time_recovery_specification=recovery,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            deletion_protection=config.retain_data,
            removal_policy=removal,
        )
        self.jobs_table.add_global_secondary_index(
            index_name=r.LIST_INDEX,
            partition_key=dynamodb.Attribute(name=r.LIST_INDEX_PARTITION, type=_STRING),
            sort_key=dynamodb.Attribute(name=r.LIST_INDEX_SORT, type=_STRING),
            # Only what a status document needs: each projected attribute is rewritten per transition.
            projection_type=dynamodb.ProjectionType.INCLUDE,
            non_key_attributes=list(r.LIST_INDEX_PROJECTION),
            **capacity.index_capacity(config),
        )
        self.jobs_table.add_global_secondary_index(
            index_name=r.SWEEP_INDEX,
            partition_key=dynamodb.Attribute(name=r.SWEEP_INDEX_PARTITION, type=_STRING),
            sort_key=dynamodb.Attribute(name=r.SWEEP_INDEX_SORT, type=_STRING),
            projection_type=dynamodb.ProjectionType.KEYS_ONLY,
            **capacity.index_capacity(config),
        )
        capacity.auto_scale(self.jobs_table, config, indexes=(r.LIST_INDEX, r.SWEEP_INDEX))
        self.idempotency_table = dynamodb.Table(
            self,
            IDEMPOTENCY_TABLE,
            partition_key=dynamodb.Attribute(name=r.IDEMPOTENCY_PARTITION_KEY, type=_STRING),
            **capacity.table_billing(config),
            time_to_live_attribute=r.TTL_ATTRIBUTE,
            point_in_time_recovery_specification=recovery,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            deletion_protection=config.retain_data,
            removal_policy=removal,
        )
        capacity.auto_scale(self.idempotency_table, config)
        self.payload_bucket = s3.Bucket(
            self,
            PAYLOAD_BUCKET,
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            versioned=False,
            removal_policy=removal,
            lifecycle_rules=[
                # S3 counts whole days from the object's creation: inputs live through the job's run
                # plus the retention after it ends; results as long as the job itself.
                s3.LifecycleRule(
                    id="expire-inputs",
                    prefix=r.INPUT_PREFIX,
                    expiration=Duration.days(config.input_object_expiration_days),
                ),
                s3.LifecycleRule(
                    id="expire-results",
                    prefix=r.RESULT_PREFIX,
                    expiration=Duration.days(config.job_retention_days),
                ),
                s3.LifecycleRule(
                    id="abort-incomplete-uploads", abort_incomplete_multipart_upload_after=Duration.days(1)
                ),
            ],
        )
        nag.acknowledge(
            self.payload_bucket,
            "AwsSolutions-S1",
            "Server access logs are off: only the submit, status and worker roles read or write payload "
            "objects (public access blocked, TLS enforced), each access is traced in X-Ray and logged with "
            "the job id, and a log bucket would add a request per short-lived object. Accounts that need "
            "an object-level audit trail enable CloudTrail S3 data events.",
        )
