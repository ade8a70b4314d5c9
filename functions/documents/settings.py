"""Settings of the documents function."""

from pydantic import Field

from shared import resources as r
from shared.documents.settings import DocumentLimitSettings


class DocumentsApiSettings(DocumentLimitSettings):
    """Where documents live, the secret that signs list cursors, and where uploads are sent."""

    documents_table: str = Field(alias=r.ENV_DOCUMENTS_TABLE, min_length=1)
    documents_bucket: str = Field(alias=r.ENV_DOCUMENTS_BUCKET, min_length=1)
    cursor_secret: str = Field(alias=r.ENV_CURSOR_SECRET, min_length=1)
    poll_after_seconds: int = Field(default=2, alias="POLL_AFTER_SECONDS", ge=1, le=60)
    secret_max_age_seconds: int = Field(default=300, alias="SECRET_MAX_AGE_SECONDS", ge=0, le=3600)
    # The S3 endpoint the presigned POSTs name. Unset in the template (S3's own, for the region);
    # local mode points it at its upload front, which checks the policy before moto stores it.
    upload_endpoint_url: str | None = Field(default=None, alias=r.ENV_UPLOAD_ENDPOINT_URL)
