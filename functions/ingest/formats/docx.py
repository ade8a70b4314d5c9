"""docx: the zip checked before anything is decompressed, its main part parsed as a stream.

A docx is a zip of XML parts, so it is hostile twice over: as an archive (a zip bomb: parts
that expand a thousandfold, or thousands of them) and as XML (entity expansion, external
entities). The archive's directory is judged first (entry count, each part's and the total
uncompressed size, compression ratios); then only `word/document.xml` is read, decompressed as
it is parsed, by defusedxml with DTDs, entities and external references forbidden: Word writes
none of them. A directory that understates a part's size does not help a bomb: zipfile stops a
part at the size its directory entry records, and then fails the part's CRC.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO
from xml.etree.ElementTree import Element, ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import iterparse

from shared.documents.extraction import Extracted, ExtractionLimits, TextBudget, not_this_format
from shared.documents.types import ContentType, RejectCode
from shared.errors import DocumentRejectedError

_MAGIC = b"PK\x03\x04"
MAIN_PART = "word/document.xml"
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_PARAGRAPH, _TEXT, _TAB = f"{_W}p", f"{_W}t", f"{_W}tab"
_BREAKS = frozenset({f"{_W}br", f"{_W}cr"})
_ENCRYPTED_FLAG = 0x1  # general purpose bit 0 of a zip entry


@dataclass(frozen=True)
class DocxExtractor:
    """Reads Word documents (Office Open XML); each paragraph becomes a line."""

    content_type: ContentType = ContentType.DOCX

    def extract(self, data: bytes, limits: ExtractionLimits) -> Extracted:
        """The main part's paragraphs, one per line (table cells included, in reading order)."""
        if not data.startswith(_MAGIC):
            raise not_this_format(self.content_type)
        try:
            archive = zipfile.ZipFile(io.BytesIO(data))
        except zipfile.BadZipFile:
            raise _unreadable("The file is not a readable zip archive, which a docx is.") from None
        with archive:
            check_archive(archive.infolist(), limits)
            try:
                main = archive.getinfo(MAIN_PART)
            except KeyError:
                raise not_this_format(self.content_type) from None
            if main.flag_bits & _ENCRYPTED_FLAG:
                raise DocumentRejectedError(RejectCode.DOCUMENT_ENCRYPTED, "The document is encrypted.")
            try:
                with archive.open(main) as part:
                    return Extracted(text=_paragraphs(part, limits), pages=None)
            except zipfile.BadZipFile:
                raise _unreadable(
                    "The docx is damaged: a part does not match its archive's record."
                ) from None


def check_archive(entries: list[zipfile.ZipInfo], limits: ExtractionLimits) -> None:
    """Refuse an archive whose directory says it expands past the limits (before any is read)."""
    if len(entries) > limits.max_zip_entries:
        raise _too_large(f"The docx has {len(entries)} parts; at most {limits.max_zip_entries} are read.")
    total = 0
    for entry in entries:
        if entry.file_size > limits.max_zip_entry_bytes:
            raise _too_large(f"A part of the docx expands past {limits.max_zip_entry_bytes} bytes.")
        ratio_judged = entry.file_size >= limits.zip_ratio_floor_bytes
        if ratio_judged and entry.file_size > limits.max_zip_ratio * max(entry.compress_size, 1):
            raise _unreadable(
                "A part of the docx is compressed more than any document's text is: refused as a zip bomb."
            )
        total += entry.file_size
    if total > limits.max_zip_total_bytes:
        raise _too_large(f"The docx expands past {limits.max_zip_total_bytes} bytes.")


def _paragraphs(part: IO[bytes], limits: ExtractionLimits) -> str:
    budget = TextBudget(limits.max_extracted_bytes, separator="\n")
    pieces: list[str] = []
    try:
        for element in _ends(part):
            if element.tag == _TEXT:
                pieces.append(element.text or "")
            elif element.tag == _TAB:
                pieces.append("\t")
            elif element.tag in _BREAKS:
                pieces.append("\n")
            elif element.tag == _PARAGRAPH:
                budget.add("".join(pieces))
                pieces.clear()
                element.clear()  # the parsed tree stays as small as one paragraph
    except DefusedXmlException:
        raise _unreadable(
            "The document's XML declares entities or a DTD, which no Word document does."
        ) from None
    except ParseError:
        raise _unreadable("The document's XML is malformed.") from None
    return budget.text()


def _ends(part: IO[bytes]) -> Iterator[Element]:
    # DTDs, entity declarations and external references all raise (defusedxml's forbid_* flags).
    for _, element in iterparse(
        part, events=("end",), forbid_dtd=True, forbid_entities=True, forbid_external=True
    ):
        yield element


def _too_large(message: str) -> DocumentRejectedError:
    return DocumentRejectedError(RejectCode.DOCUMENT_TOO_LARGE, message)


def _unreadable(message: str) -> DocumentRejectedError:
    return DocumentRejectedError(RejectCode.DOCUMENT_UNREADABLE, message)


def extractor(content_type: ContentType) -> DocxExtractor:
    """This module's extractor."""
    return DocxExtractor(content_type)
