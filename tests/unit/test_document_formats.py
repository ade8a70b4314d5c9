"""The format modules on files the tests make: each ends as text, or as a rejection with its code.

In-process here (the child's limits are tests/unit/test_extraction_sandbox.py's subject).
"""

from __future__ import annotations

import zipfile

import pytest

from functions.ingest.formats import extractor_for
from functions.ingest.formats.docx import check_archive
from shared.documents.extraction import Extracted, ExtractionLimits
from shared.documents.types import ContentType, RejectCode
from shared.errors import DocumentRejectedError
from tests.support import documents as files

MIB = 1024 * 1024
LIMITS = ExtractionLimits(max_extracted_bytes=8 * MIB, max_pages=500)


def extract(content_type: ContentType, data: bytes, limits: ExtractionLimits = LIMITS) -> Extracted:
    return extractor_for(content_type).extract(data, limits)


def rejection(content_type: ContentType, data: bytes, limits: ExtractionLimits = LIMITS) -> RejectCode:
    with pytest.raises(DocumentRejectedError) as raised:
        extract(content_type, data, limits)
    # The message is for the owner: never the parser's text or the file's bytes.
    assert "Error" not in raised.value.message
    return raised.value.code


# --- text and Markdown -------------------------------------------------------------------------


def test_markdown_is_kept_as_written():
    extracted = extract(ContentType.MARKDOWN, files.MARKDOWN.encode())

    assert extracted == Extracted(text=files.MARKDOWN, pages=None)


def test_text_is_utf8_and_a_byte_order_mark_is_dropped():
    extracted = extract(ContentType.TEXT, "\ufeffZürich, 東京\n".encode())

    assert extracted.text == "Zürich, 東京\n"


@pytest.mark.parametrize(
    "data",
    [
        pytest.param("café".encode("latin-1"), id="latin-1"),
        pytest.param(b"text with a NUL \x00 byte", id="nul"),
        pytest.param(files.pdf(["a PDF"]), id="a-pdf"),
        pytest.param(files.docx(["a docx"]), id="a-docx"),
    ],
)
def test_text_that_is_not_utf8_text_is_an_unsupported_type(data):
    assert rejection(ContentType.TEXT, data) is RejectCode.UNSUPPORTED_TYPE


def test_whitespace_is_no_text():
    assert rejection(ContentType.MARKDOWN, b" \n\t\n") is RejectCode.DOCUMENT_HAS_NO_TEXT


def test_text_over_the_extracted_limit_is_too_large():
    limits = ExtractionLimits(max_extracted_bytes=10, max_pages=1)

    assert extract(ContentType.TEXT, b"0123456789", limits).text == "0123456789"
    assert rejection(ContentType.TEXT, b"0123456789a", limits) is RejectCode.DOCUMENT_TOO_LARGE


# --- PDF ------------------------------------------------------------------------------------------


def test_a_multi_page_pdf_yields_each_pages_text_a_blank_line_apart():
    data = files.pdf(["First page\nsecond line", "Second (page)", None, "Fourth"])

    extracted = extract(ContentType.PDF, data)

    assert extracted == Extracted(text="First page\nsecond line\n\nSecond (page)\n\nFourth", pages=4)


def test_an_encrypted_pdf_is_refused_not_decrypted():
    assert rejection(ContentType.PDF, files.pdf(["secret"], password="pw")) is RejectCode.DOCUMENT_ENCRYPTED


def test_a_pdf_of_blank_pages_has_no_text():
    assert rejection(ContentType.PDF, files.pdf([None, None, None])) is RejectCode.DOCUMENT_HAS_NO_TEXT


def test_a_pdf_over_the_page_limit_is_too_large_before_any_page_is_read():
    limits = ExtractionLimits(max_extracted_bytes=8 * MIB, max_pages=3)

    assert extract(ContentType.PDF, files.pdf(["a", "b", "c"]), limits).pages == 3
    assert (
        rejection(ContentType.PDF, files.pdf(["a", "b", "c", "d"]), limits) is RejectCode.DOCUMENT_TOO_LARGE
    )


def test_a_pdf_whose_text_is_over_the_extracted_limit_is_too_large():
    data = files.pdf(files.numbered_pages(5))
    limits = ExtractionLimits(max_extracted_bytes=1000, max_pages=10)

    assert rejection(ContentType.PDF, data, limits) is RejectCode.DOCUMENT_TOO_LARGE


def test_a_300_page_pdf_keeps_every_page_in_order():
    extracted = extract(ContentType.PDF, files.pdf(files.numbered_pages(300)))

    assert extracted.pages == 300
    starts = [extracted.text.index(f"Page {n} of 300.") for n in range(1, 301)]
    assert starts == sorted(starts)


def test_a_pdf_stream_that_expands_past_the_stream_limit_is_too_large():
    data = files.pdf(["x" * 5000])
    limits = ExtractionLimits(max_extracted_bytes=8 * MIB, max_pages=10, max_stream_bytes=1000)

    assert rejection(ContentType.PDF, data, limits) is RejectCode.DOCUMENT_TOO_LARGE


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(files.docx(["a docx"]), id="a-docx"),
        pytest.param(files.MARKDOWN.encode(), id="markdown"),
        pytest.param(b"\x00" * 2000 + b"%PDF-1.7", id="header-after-the-first-kb"),
    ],
)
def test_bytes_without_a_pdf_header_are_an_unsupported_type(data):
    assert rejection(ContentType.PDF, data) is RejectCode.UNSUPPORTED_TYPE


def test_a_damaged_pdf_raises_for_the_child_to_call_unreadable():
    data = files.pdf(["x"])[:200]

    with pytest.raises(Exception) as raised:  # noqa: PT011 - any exception: the child maps them all
        extract(ContentType.PDF, data)
    assert not isinstance(raised.value, DocumentRejectedError)


# --- docx -----------------------------------------------------------------------------------------


def test_a_docx_yields_one_line_per_paragraph():
    extracted = extract(ContentType.DOCX, files.docx(["Title", "Ben & Jerry's <fine> print", ""]))

    assert extracted == Extracted(text="Title\nBen & Jerry's <fine> print\n", pages=None)


def test_tabs_and_breaks_inside_a_paragraph_are_kept():
    run = "<w:r><w:t>a</w:t><w:tab/><w:t>b</w:t><w:br/><w:t>c</w:t></w:r>"
    part = f'<w:document xmlns:w="{files.WORD_NAMESPACE}"><w:body><w:p>{run}</w:p></w:body></w:document>'

    assert extract(ContentType.DOCX, files.docx(main_part=part)).text == "a\tb\nc"


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(files.pdf(["a pdf"]), id="a-pdf"),
        pytest.param(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 100, id="a-legacy-doc"),
    ],
)
def test_bytes_that_are_not_a_zip_are_an_unsupported_type(data):
    assert rejection(ContentType.DOCX, data) is RejectCode.UNSUPPORTED_TYPE


def test_a_zip_without_a_word_document_is_an_unsupported_type():
    archive = files.docx(["x"]).replace(b"word/document.xml", b"word/documenX.xml")

    assert rejection(ContentType.DOCX, archive) is RejectCode.UNSUPPORTED_TYPE


def test_a_truncated_zip_is_unreadable():
    assert rejection(ContentType.DOCX, files.docx(["x"])[:60]) is RejectCode.DOCUMENT_UNREADABLE


def test_a_zip_bomb_past_the_part_limit_is_too_large_without_being_expanded():
    bomb = files.docx_bomb(100 * MIB)

    assert len(bomb) < MIB
    assert rejection(ContentType.DOCX, bomb) is RejectCode.DOCUMENT_TOO_LARGE


def test_a_part_compressed_past_the_ratio_is_refused_as_a_bomb():
    assert rejection(ContentType.DOCX, files.docx_bomb(5 * MIB)) is RejectCode.DOCUMENT_UNREADABLE


def test_too_many_parts_are_too_large():
    limits = ExtractionLimits(max_extracted_bytes=MIB, max_pages=1, max_zip_entries=10)

    assert extract(ContentType.DOCX, files.docx(["x"], extra_parts=7), limits).text == "x"
    assert (
        rejection(ContentType.DOCX, files.docx(["x"], extra_parts=8), limits) is RejectCode.DOCUMENT_TOO_LARGE
    )


def test_parts_whose_sizes_add_up_past_the_total_are_too_large():
    entries = [_entry(f"p{n}", size=40 * MIB, compressed=4 * MIB) for n in range(7)]

    with pytest.raises(DocumentRejectedError) as raised:
        check_archive(entries, LIMITS)
    assert raised.value.code is RejectCode.DOCUMENT_TOO_LARGE
    check_archive(entries[:6], LIMITS)


def test_a_part_larger_than_its_directory_says_is_read_no_further_and_is_unreadable():
    # Given a 3 MiB main part whose directory entry says 1000 bytes (the limit check then passes)
    archive = _directory_size(files.docx(["word " * 1000] * 600), "word/document.xml", 1000)

    # Then reading stops at 1000 bytes, where the part's checksum fails
    assert rejection(ContentType.DOCX, archive) is RejectCode.DOCUMENT_UNREADABLE


@pytest.mark.parametrize(
    "prolog",
    [
        pytest.param('<!DOCTYPE w:document [<!ENTITY lol "lol">]>', id="internal-entity"),
        pytest.param('<!DOCTYPE w:document SYSTEM "http://example.invalid/x.dtd">', id="external-dtd"),
        pytest.param('<!DOCTYPE w:document [<!ENTITY x SYSTEM "file:///etc/passwd">]>', id="external-entity"),
    ],
)
def test_xml_with_a_dtd_or_entities_is_unreadable_and_nothing_is_expanded(prolog):
    part = (
        f'<?xml version="1.0"?>{prolog}<w:document xmlns:w="{files.WORD_NAMESPACE}">'
        "<w:body><w:p><w:r><w:t>&lol;</w:t></w:r></w:p></w:body></w:document>"
    )

    assert rejection(ContentType.DOCX, files.docx(main_part=part)) is RejectCode.DOCUMENT_UNREADABLE


def test_malformed_xml_is_unreadable():
    assert (
        rejection(ContentType.DOCX, files.docx(main_part="<w:document><w:body>"))
        is RejectCode.DOCUMENT_UNREADABLE
    )


def test_an_encrypted_main_part_is_encrypted():
    archive = _central_entry(files.docx(["secret"]), "word/document.xml", flags=0x1)

    assert rejection(ContentType.DOCX, archive) is RejectCode.DOCUMENT_ENCRYPTED


def _directory_size(archive: bytes, name: str, size: int) -> bytes:
    return _central_entry(archive, name, size=size)


def _central_entry(archive: bytes, name: str, *, flags: int = 0, size: int | None = None) -> bytes:
    """The archive with `name`'s central-directory entry changed: flag bits set, or its size."""
    data = bytearray(archive)
    start = 0
    while (start := data.find(b"PK\x01\x02", start)) != -1:
        name_length = int.from_bytes(data[start + 28 : start + 30], "little")
        if data[start + 46 : start + 46 + name_length] == name.encode():
            data[start + 8] |= flags
            if size is not None:
                data[start + 24 : start + 28] = size.to_bytes(4, "little")
            return bytes(data)
        start += 4
    raise AssertionError(f"{name} is not in the archive")


def _entry(name: str, size: int, compressed: int) -> zipfile.ZipInfo:
    entry = zipfile.ZipInfo(name)
    entry.file_size, entry.compress_size = size, compressed
    return entry
