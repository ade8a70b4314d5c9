"""Settings of the ingest function."""

from pydantic import Field

from shared import resources as r
from shared.documents.settings import DocumentLimitSettings


class IngestSettings(DocumentLimitSettings):
    """Where documents live, the DLQ for poison, and the extraction child's limits."""

    documents_table: str = Field(alias=r.ENV_DOCUMENTS_TABLE, min_length=1)
    documents_bucket: str = Field(alias=r.ENV_DOCUMENTS_BUCKET, min_length=1)
    dlq_url: str = Field(alias=r.ENV_INGEST_DLQ_URL, min_length=1)
    # The child's address space: the interpreter and pypdf take about 50 MB of it, a 25 MiB file
    # and its parse the rest. The function's memory must hold this and the parent's copy.
    extraction_memory_mb: int = Field(default=1024, alias="EXTRACTION_MEMORY_MB", ge=128, le=8192)
    extraction_cpu_seconds: int = Field(default=60, alias="EXTRACTION_CPU_SECONDS", ge=1, le=600)
    # The wall-clock kill. An extraction starts only with this much of the invocation left (else
    # its message waits for a fresh one), so the function's timeout must exceed it.
    extraction_timeout_seconds: float = Field(default=90, alias="EXTRACTION_TIMEOUT_SECONDS", gt=0, le=600)
