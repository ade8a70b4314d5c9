"""The documents' HTTP bodies as pydantic models: what `GET /v1/documents/{id}` answers.

In the style of shared.contract (camelCase on the wire, instants as RFC 3339 strings), in a
module of its own so that the job API's functions need not build these models.
"""

from pydantic import Field

from shared.contract import ResponseModel, Timestamp
from shared.documents.types import ContentType, DocumentStatus, RejectCode


class ReadyDocument(ResponseModel):
    """What a Ready document's text is."""

    # The PDF's page count; null for formats without pages (text, Markdown, docx).
    pages: int | None
    bytes: int = Field(description="The stored file's size in bytes.")
    text_bytes: int = Field(description="The extracted text's size in UTF-8 bytes: what a job reads.")
    sha256: str = Field(description="The extracted text's SHA-256 (hex); a job on the document records it.")


class DocumentErrorDocument(ResponseModel):
    """Why a document was rejected: a stable code and a message safe to show."""

    code: RejectCode
    message: str


class DocumentStatusDocument(ResponseModel):
    """Where a document stands."""

    document_id: str
    status: DocumentStatus
    filename: str
    content_type: ContentType
    bytes: int = Field(description="The size the create declared: the most the upload may be.")
    created_at: Timestamp
    updated_at: Timestamp
    expires_at: Timestamp
    ready: ReadyDocument | None = Field(description="Set once the document is Ready.")
    error: DocumentErrorDocument | None = Field(description="Set once the document is Rejected.")
