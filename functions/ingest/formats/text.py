"""Plain text and Markdown: UTF-8 (a byte-order mark is dropped), kept as written.

Markdown is read as the text it is (its markup is what a model reads well); nothing renders it.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.documents.extraction import Extracted, ExtractionLimits, TextBudget, not_this_format
from shared.documents.types import ContentType

# Files that decode as UTF-8 may still be something else (an uncompressed PDF is ASCII): the
# signatures of the formats a mislabelled upload most likely is, and NUL, which no text holds.
_BINARY_SIGNATURES = (
    b"%PDF-",
    b"PK\x03\x04",  # zip: docx, xlsx, odt, ...
    b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1",  # OLE compound file: doc, xls, encrypted Office files
    b"{\\rtf",
    b"\x89PNG",
    b"\xff\xd8\xff",  # JPEG
    b"GIF8",
    b"\x1f\x8b",  # gzip
    b"\x7fELF",
)


@dataclass(frozen=True)
class TextExtractor:
    """Reads text/plain and text/markdown."""

    content_type: ContentType

    def extract(self, data: bytes, limits: ExtractionLimits) -> Extracted:
        """The file decoded as UTF-8; unsupported_type when it is not text."""
        if data.startswith(_BINARY_SIGNATURES) or b"\x00" in data:
            raise not_this_format(self.content_type)
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise not_this_format(self.content_type) from None
        budget = TextBudget(limits.max_extracted_bytes, separator="")
        budget.add(text)
        return Extracted(text=budget.text(), pages=None)


def extractor(content_type: ContentType) -> TextExtractor:
    """This module's extractor for a declared type."""
    return TextExtractor(content_type)
