"""The documents' HTTP bodies as pydantic models: what the documents routes take and answer.

In the style of shared.contract (camelCase on the wire, instants as RFC 3339 strings), in a
module of its own so that the job API's functions need not build these models.
"""

from typing import Annotated

from pydantic import Field, Strict

from shared.contract import ResponseModel, StrictRequestModel, Timestamp
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


# The longest filename kept: what a file system allows, in characters.
MAX_FILENAME_CHARS = 255


class CreateDocumentRequest(StrictRequestModel):
    """`POST /v1/documents`: the file about to be uploaded.

    `contentType` is any string here, so that a type outside the list is a 415 with its own code,
    not a schema error; the service checks it against ContentType.
    """

    filename: Annotated[str, Strict(), Field(min_length=1, max_length=MAX_FILENAME_CHARS)]
    content_type: Annotated[str, Strict(), Field(min_length=1, max_length=255)]
    bytes: Annotated[int, Strict(), Field(ge=1, description="The file's size: the most the upload may be.")]


class UploadForm(ResponseModel):
    """An S3 presigned POST: send `fields` as form fields, then the file as the field `file`, to `url`."""

    url: str
    fields: dict[str, str]
    expires_at: Timestamp


class CreatedDocument(ResponseModel):
    """What the create answers: the document's id and how to upload its file."""

    document_id: str
    status: DocumentStatus
    upload: UploadForm


class DocumentPage(ResponseModel):
    """One page of the caller's documents, newest first."""

    items: list[DocumentStatusDocument]
    next_cursor: str | None
