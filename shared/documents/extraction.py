"""The extraction port: one module per format turns a file's bytes into text, or rejects it.

Every file is hostile. An extractor checks the bytes are its format (the magic number, UTF-8)
before any parser sees them, passes its limits to the parser, and stops as soon as a limit is
passed; the ingest runs it in a child process with memory, CPU and wall-clock limits on top
(functions/ingest/sandbox.py), so a parser that misbehaves anyway costs a rejection, not the
function. No pydantic here: the child imports this module, and pays its start-up per file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from shared.documents.types import ContentType, RejectCode
from shared.errors import DocumentRejectedError

MIB = 1024 * 1024


@dataclass(frozen=True)
class ExtractionLimits:
    """What one extraction may produce and read.

    The docx limits bound the zip before any part of it is decompressed: a Word document has a
    few dozen parts, its XML compresses about ten to one, and its main part is some megabytes
    even for a long report. What passes them is still read as a stream, counted as it expands.
    """

    max_extracted_bytes: int
    max_pages: int
    # What one PDF stream may decode to: a page's content is some hundred kilobytes; an embedded
    # font or image is larger, and text extraction decodes fonts, not images.
    max_stream_bytes: int = 32 * MIB
    max_zip_entries: int = 1000
    max_zip_entry_bytes: int = 64 * MIB
    max_zip_total_bytes: int = 256 * MIB
    # Uncompressed over compressed size, judged on parts of at least zip_ratio_floor_bytes
    # (tiny parts compress erratically); deflate's best is about 1000:1, on runs of one byte.
    max_zip_ratio: int = 100
    zip_ratio_floor_bytes: int = MIB


@dataclass(frozen=True)
class Extracted:
    """A file's text. `pages` is the page count of formats that have pages (PDF), else None."""

    text: str
    pages: int | None


class Extractor(Protocol):
    """One format's reader."""

    content_type: ContentType

    def extract(self, data: bytes, limits: ExtractionLimits) -> Extracted:
        """The file's text; raises DocumentRejectedError when the bytes are not this format, are
        encrypted, hold no text or pass a limit. Any other exception means the file is unreadable."""
        ...


class TextBudget:
    """Text collected piece by piece, refused as soon as its UTF-8 size passes the limit.

    Extractors add what each page or paragraph yields, so a file whose text is too large is
    rejected without ever holding all of it. The pieces are joined by `separator`, which counts.
    """

    def __init__(self, max_bytes: int, separator: str) -> None:
        self._max_bytes = max_bytes
        self._separator = separator
        self._parts: list[str] = []
        self._bytes = 0

    def add(self, text: str) -> None:
        """Append `text`; DocumentRejectedError(document_too_large) once the total is over the limit."""
        joint = self._separator if self._parts else ""
        self._bytes += len(joint.encode("utf-8")) + len(text.encode("utf-8"))
        if self._bytes > self._max_bytes:
            raise DocumentRejectedError(
                RejectCode.DOCUMENT_TOO_LARGE,
                f"The document's text is over {self._max_bytes} bytes, the most a document may hold.",
            )
        self._parts.append(text)

    def text(self) -> str:
        """The collected text; rejected (document_has_no_text) when it is only whitespace."""
        joined = self._separator.join(self._parts)
        if not joined.strip():
            raise DocumentRejectedError(
                RejectCode.DOCUMENT_HAS_NO_TEXT,
                "The document holds no text to read (a scan, or images only?).",
            )
        return joined


def not_this_format(content_type: ContentType) -> DocumentRejectedError:
    """The rejection of bytes that are not what their declared type says."""
    return DocumentRejectedError(
        RejectCode.UNSUPPORTED_TYPE,
        f"The file's content is not {content_type.value}, the type it was declared as.",
    )
