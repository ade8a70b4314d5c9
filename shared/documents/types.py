"""The closed sets of the documents domain: content types, statuses and rejection codes.

Plain enums, no pydantic: the extraction child imports them, and its start-up is paid per file.
"""

from __future__ import annotations

from enum import StrEnum


class ContentType(StrEnum):
    """The types a document may be declared as; any other is refused at the create (415)."""

    TEXT = "text/plain"
    MARKDOWN = "text/markdown"
    PDF = "application/pdf"
    DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


class DocumentStatus(StrEnum):
    """Where a document stands. Ready and Rejected never change again (a new upload is a new document)."""

    AWAITING_UPLOAD = "AwaitingUpload"
    READY = "Ready"
    REJECTED = "Rejected"


SETTLED: frozenset[DocumentStatus] = frozenset({DocumentStatus.READY, DocumentStatus.REJECTED})


class RejectCode(StrEnum):
    """Why a document was rejected: stable codes clients may branch on (DESIGN.md)."""

    # The bytes are not what the declared type says (magic number, UTF-8), or not a type we read.
    UNSUPPORTED_TYPE = "unsupported_type"
    DOCUMENT_ENCRYPTED = "document_encrypted"
    DOCUMENT_HAS_NO_TEXT = "document_has_no_text"
    # Over a limit: the declared or stored size, the page count, the extracted text, the memory
    # its extraction needs, or a docx whose parts expand past what a document plausibly holds.
    DOCUMENT_TOO_LARGE = "document_too_large"
    # Damaged, hostile or too slow to read: the parser failed, crashed or ran out of time.
    DOCUMENT_UNREADABLE = "document_unreadable"
