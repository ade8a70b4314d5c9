"""The documents' limits: read by the ingest now, and by the functions that create documents
and submit jobs on them (the presigned POST's size range, the text a job may read)."""

from pydantic import Field

from shared.documents.extraction import MIB
from shared.settings import EnvSettings


class DocumentLimitSettings(EnvSettings):
    """How large a document may be, as a file and as text, and how long it is kept."""

    # The largest file an upload may be: the POST policy's content-length-range ends here.
    max_document_bytes: int = Field(default=25 * MIB, alias="MAX_DOCUMENT_BYTES", ge=1, le=100 * MIB)
    # The most text a document may yield: a job's input read in one GET (DESIGN.md).
    max_extracted_bytes: int = Field(default=8 * MIB, alias="MAX_EXTRACTED_BYTES", ge=1, le=64 * MIB)
    # A PDF with more pages is rejected before any page is read.
    max_document_pages: int = Field(default=2000, alias="MAX_DOCUMENT_PAGES", ge=1, le=100_000)
    document_retention_days: int = Field(default=30, alias="DOCUMENT_RETENTION_DAYS", ge=1, le=365)
