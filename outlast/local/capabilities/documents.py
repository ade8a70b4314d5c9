"""Documents, emulated: the bucket's upload notification and the S3 front that checks presigned POSTs.

Emulates what infra/constructs/documents.py adds beyond tables, queues and functions (which the
storage, functions and mappings starters make from the template like any other):
- the bucket notification, from the template's Custom::S3BucketNotifications resource (what
  aws-cdk-lib's handler would put at deploy time), put on moto's bucket as is: moto then sends
  ObjectCreated events for matching keys to the ingest queue (an `s3:TestEvent` first);
- the upload front (outlast.local.upload_front): the documents function's presigned POSTs name
  it (a local-only variable of that function), and it checks each POST's policy and its signer's
  role before moto stores the file, since moto checks neither; it answers CORS from the template's
  bucket rules, their origins replaced by the local console's (outlast.local.bucket_cors).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import boto3

from infra.names import FunctionName
from outlast.local.bucket_cors import bucket_rules
from outlast.local.capabilities.base import Log, Starter
from outlast.local.iam.enforcement import Enforcement
from outlast.local.iam.roles import SECRET_ACCESS_KEY
from outlast.local.template import REGION, Resolver, Template
from outlast.local.upload_front import UploadFront, UploadRules
from shared import resources as r

NOTIFICATIONS = "Custom::S3BucketNotifications"
BUCKET = "AWS::S3::Bucket"


class Documents(Starter):
    """The upload front (bound before the functions start: their environment names it) and the
    bucket notifications (put once moto's buckets and queues exist)."""

    def __init__(self, log: Log) -> None:
        self._log = log
        self._front: UploadFront | None = None

    @property
    def url(self) -> str | None:
        """The upload front's URL (after bind)."""
        return self._front.url if self._front else None

    def bind(self, *, endpoint: str, iam: Callable[[], Enforcement]) -> Documents:
        """Bind the front's port; its checks read the roles once the functions have them."""

        def secret_of(access_key_id: str) -> str | None:
            known = any(role.access_key_id == access_key_id for role in iam().roles.values())
            return SECRET_ACCESS_KEY if known else None

        def authorize(access_key_id: str, bucket: str, key: str) -> bool:
            resource = f"arn:aws:s3:::{bucket}/{key}"
            return iam().authorize(access_key_id, "s3:PutObject", resource, "s3.PostObject")

        rules = UploadRules(region=REGION, secret_of=secret_of, authorize=authorize, moto_endpoint=endpoint)
        self._front = UploadFront(rules)
        return self

    def function_environment(self) -> dict[str, dict[str, str]]:
        """Local-only variables by handler: the documents function signs POSTs for the front."""
        if self._front is None:
            return {}
        return {FunctionName.DOCUMENTS.handler: {r.ENV_UPLOAD_ENDPOINT_URL: self._front.url}}

    def start(
        self, template: Template, resolver: Resolver, endpoint: str, console_origin: str | None = None
    ) -> Documents:
        """Put every bucket notification of the template on moto, then serve the front (its CORS the
        buckets' rules, allowing `console_origin` where the template names the deployed console's)."""
        s3: Any = boto3.client("s3", endpoint_url=endpoint, region_name=REGION)
        for resource in template.resources(NOTIFICATIONS):
            properties = resolver.resolve(resource.properties)
            configuration = {
                key: value
                for key, value in properties["NotificationConfiguration"].items()
                if key in {"QueueConfigurations", "TopicConfigurations", "LambdaFunctionConfigurations"}
            }
            s3.put_bucket_notification_configuration(
                Bucket=str(properties["BucketName"]), NotificationConfiguration=configuration
            )
        if self._front is not None:
            buckets = [
                (
                    str(resolver.ref(bucket.logical_id)),
                    resolver.resolve(bucket.properties["CorsConfiguration"]),
                )
                for bucket in template.resources(BUCKET)
                if "CorsConfiguration" in bucket.properties
            ]
            origins = (console_origin,) if console_origin is not None else None
            self._front.allow_cors(bucket_rules(buckets, origins))
            self._front.start()
        return self

    def stop(self) -> None:
        if self._front is not None:
            self._front.stop()
