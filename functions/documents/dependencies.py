"""The composition root of the documents function: ports wired to adapters, once per container."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import boto3
from botocore.config import Config

from functions.documents.settings import DocumentsApiSettings
from shared.adapters.dynamodb_documents import DynamoDocumentRepository
from shared.adapters.s3_documents import S3DocumentObjects
from shared.adapters.s3_upload_signer import S3UploadSigner
from shared.adapters.secrets import CachedSecretSource
from shared.clock import SystemClock
from shared.cursor import CursorCodec
from shared.documents.catalog import DocumentCatalog
from shared.lazy import once
from shared.ports import SecretSource


@dataclass(frozen=True)
class DocumentsDependencies:
    """The settings (how often to poll) and the catalog the routes call."""

    settings: DocumentsApiSettings
    catalog: DocumentCatalog


def _secrets_source(settings: DocumentsApiSettings) -> SecretSource:
    # Imported here: only the list route needs a secret, and the provider costs cold-start time.
    from aws_lambda_powertools.utilities.parameters import SecretsProvider  # noqa: PLC0415

    return CachedSecretSource(
        SecretsProvider(boto3_client=boto3.client("secretsmanager")), settings.secret_max_age_seconds
    )


@cache
def build_dependencies(settings: DocumentsApiSettings) -> DocumentsDependencies:
    """Create the DynamoDB client once per container; S3 and the secret only when first needed."""
    clock = SystemClock()

    @cache
    def secrets() -> SecretSource:
        return _secrets_source(settings)

    def cursor_codec() -> CursorCodec:
        # Read through the cache on every call, so a rotated secret takes effect within max age.
        return CursorCodec(secrets().get(settings.cursor_secret).encode("utf-8"))

    # SigV4 and virtual-hosted URLs: the regional bucket endpoint a browser can POST to directly.
    signing = once(
        lambda: boto3.client(
            "s3",
            endpoint_url=settings.upload_endpoint_url,
            config=Config(signature_version="s3v4", s3={"addressing_style": "virtual"}),
        )
    )
    catalog = DocumentCatalog(
        repository=DynamoDocumentRepository(boto3.client("dynamodb"), settings.documents_table),
        objects=S3DocumentObjects(once(lambda: boto3.client("s3")), settings.documents_bucket),
        signer=S3UploadSigner(signing, settings.documents_bucket, clock),
        cursor_codec=cursor_codec,
        clock=clock,
        limits=settings,
    )
    return DocumentsDependencies(settings=settings, catalog=catalog)
