"""Files for the documents tests, made by the tests themselves: no binary of unknown origin.

PDFs are written with pypdf by outlast.documents (which the benchmarks use too): a page's text is
a content stream showing a string in Helvetica, one of the fonts every PDF reader has built in.
docx files are zip archives of the few parts Word needs, written with zipfile.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterable

from outlast.documents import numbered_pages, pdf

__all__ = ["MARKDOWN", "document_xml", "docx", "docx_bomb", "numbered_pages", "pdf"]

WORD_NAMESPACE = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
DOCX_CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
_CONTENT_TYPES = f"""<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>
<Default Extension="xml" ContentType="application/xml"/>
<Override PartName="/word/document.xml" ContentType="{DOCX_CONTENT_TYPE}"/>
</Types>"""
_RELATIONSHIPS = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
<Relationship Id="rId1" Target="word/document.xml"
 Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument"/>
</Relationships>"""


def document_xml(paragraphs: Iterable[str]) -> str:
    """word/document.xml with one paragraph (one run) per item."""
    body = "".join(
        f'<w:p><w:r><w:t xml:space="preserve">{_xml_text(text)}</w:t></w:r></w:p>' for text in paragraphs
    )
    return (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        f'<w:document xmlns:w="{WORD_NAMESPACE}"><w:body>{body}</w:body></w:document>'
    )


def _xml_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def docx(paragraphs: Iterable[str] = (), *, main_part: str | None = None, extra_parts: int = 0) -> bytes:
    """A docx: the paragraphs (or `main_part`, word/document.xml as given), and `extra_parts`
    small parts besides (media a real document would carry)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", _CONTENT_TYPES)
        archive.writestr("_rels/.rels", _RELATIONSHIPS)
        archive.writestr(
            "word/document.xml", main_part if main_part is not None else document_xml(paragraphs)
        )
        for n in range(extra_parts):
            archive.writestr(f"word/media/part{n}.xml", "<x/>")
    return buffer.getvalue()


def docx_bomb(expanded_bytes: int) -> bytes:
    """A docx whose main part is one paragraph of `expanded_bytes` spaces: a few KB as deflated,
    written a MB at a time (the test never holds the expanded part)."""
    buffer = io.BytesIO()
    chunk = b" " * (1024 * 1024)
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", _CONTENT_TYPES)
        archive.writestr("_rels/.rels", _RELATIONSHIPS)
        with archive.open("word/document.xml", "w", force_zip64=True) as part:
            part.write(f'<w:document xmlns:w="{WORD_NAMESPACE}"><w:body><w:p><w:r><w:t>'.encode())
            written = 0
            while written < expanded_bytes:
                piece = chunk[: expanded_bytes - written]
                part.write(piece)
                written += len(piece)
            part.write(b"</w:t></w:r></w:p></w:body></w:document>")
    return buffer.getvalue()


MARKDOWN = """# Quarterly report

Revenue grew **12%** over the quarter.

- Churn fell to 2%.
- Two regions opened.
"""
