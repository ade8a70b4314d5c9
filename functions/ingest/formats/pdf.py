"""PDF with pypdf: the header checked before parsing, the page count before any page is read.

pypdf is pure Python (no native parser to exploit) and bounds its own work on hostile files
(py-pdf's "Security" page): every stream filter stops at an output limit, so does a stream's
declared /Length, the page tree, an array, a content stream's parse. Its `Configuration` is
applied here with the stream limits lowered to what a page's content and fonts can plausibly
need, and with the external JBIG2 decoder never called. Encrypted files are refused rather than
decrypted: even a PDF without a user password carries an owner's restrictions on copying.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import pypdf
from pypdf.errors import LimitReachedError

from shared.documents.extraction import Extracted, ExtractionLimits, TextBudget, not_this_format
from shared.documents.types import ContentType, RejectCode
from shared.errors import DocumentRejectedError

# The spec lets the `%PDF-` header follow some bytes of junk; readers accept it within the first KB.
_MAGIC = b"%PDF-"
_HEADER_WINDOW = 1024
_PAGE_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class PdfExtractor:
    """Reads application/pdf."""

    content_type: ContentType = ContentType.PDF

    def extract(self, data: bytes, limits: ExtractionLimits) -> Extracted:
        """Each page's text, pages apart by a blank line."""
        if _MAGIC not in data[:_HEADER_WINDOW]:
            raise not_this_format(self.content_type)
        try:
            with pypdf.apply_configuration(bounded_configuration(limits)):
                return _read(pypdf.PdfReader(io.BytesIO(data), strict=False), limits)
        except LimitReachedError:
            raise DocumentRejectedError(
                RejectCode.DOCUMENT_TOO_LARGE,
                "The PDF is larger or more complex than a document may be (a part of it expands "
                f"past {limits.max_stream_bytes} bytes, or holds too many objects).",
            ) from None


def _read(reader: pypdf.PdfReader, limits: ExtractionLimits) -> Extracted:
    if reader.is_encrypted:
        raise DocumentRejectedError(
            RejectCode.DOCUMENT_ENCRYPTED,
            "The PDF is encrypted. Save a copy without a password or restrictions and upload that.",
        )
    pages = len(reader.pages)
    if pages > limits.max_pages:
        raise DocumentRejectedError(
            RejectCode.DOCUMENT_TOO_LARGE,
            f"The PDF has {pages} pages; a document may have at most {limits.max_pages}.",
        )
    budget = TextBudget(limits.max_extracted_bytes, separator=_PAGE_SEPARATOR)
    for page in reader.pages:
        text = page.extract_text().strip()
        if text:  # a blank page adds no blank lines
            budget.add(text)
    return Extracted(text=budget.text(), pages=pages)


def bounded_configuration(limits: ExtractionLimits) -> pypdf.Configuration:
    """pypdf's defaults with every decoded stream held to `max_stream_bytes` and no external tool."""
    stream = limits.max_stream_bytes
    return pypdf.Configuration(
        maximum_declared_stream_length=stream,
        array_based_stream_maximum_output_length=stream,
        zlib_maximum_output_length=stream,
        lzw_maximum_output_length=stream,
        run_length_maximum_output_length=stream,
        brotli_maximum_output_length=stream,
        jbig2_maximum_output_length=stream,
        image_maximum_buffer_size=stream,
        jbig2dec_binary=None,
        # The deprecated module constants are never set here: skip pypdf's look at them.
        disable_legacy_handling=True,
    )


def extractor(content_type: ContentType) -> PdfExtractor:
    """This module's extractor."""
    return PdfExtractor(content_type)
