"""Generated documents for the demo, the benchmarks and the tests: long, deterministic, in
paragraphs, and PDFs of given pages (written with pypdf, imported only when one is made: the
client wheel has no pypdf)."""

from __future__ import annotations

import io
from collections.abc import Iterable

TOPICS = ("revenue", "costs", "hiring", "shipping", "support", "security", "research", "outlook")


def long_document(max_bytes: int, delay_seconds: float | None = None) -> str:
    """Report text in paragraphs, as close to `max_bytes` UTF-8 bytes as whole paragraphs allow.

    With `delay_seconds`, every paragraph asks the local model server to take that long, so every
    step's call of a job planned in steps does (a directive applies to the call that holds it).
    """
    directive = f" [[delay:{delay_seconds:g}]]" if delay_seconds else ""
    paragraphs: list[str] = []
    size = 0
    while True:
        number = len(paragraphs)
        topic = TOPICS[number % len(TOPICS)]
        paragraph = (
            " ".join(
                f"Section {number + 1} on {topic}: in week {line + 1} the {topic} figures moved as planned, "
                f"and the team noted one change worth a closer look."
                for line in range(12)
            )
            + directive
        )
        added = len(paragraph.encode("utf-8")) + (2 if paragraphs else 0)
        if size + added > max_bytes:
            return "\n\n".join(paragraphs)
        paragraphs.append(paragraph)
        size += added


PAGE_WIDTH, PAGE_HEIGHT = 612, 792  # US Letter, in points


def _pdf_string(text: str) -> str:
    return "(" + text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ")"


def pdf(pages: Iterable[str | None], *, password: str | None = None) -> bytes:
    """A PDF with one page per item: its text (one line per line, in Helvetica, which every reader
    has built in), or a blank page for None; RC4-encrypted with `password` when one is given."""
    from pypdf import PdfWriter  # noqa: PLC0415 - a dev dependency, not the client's
    from pypdf.generic import ContentStream, DictionaryObject, NameObject  # noqa: PLC0415

    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    writer = PdfWriter()
    for text in pages:
        page = writer.add_blank_page(PAGE_WIDTH, PAGE_HEIGHT)
        if text is None:
            continue
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
        )
        lines = " T* ".join(f"{_pdf_string(line)} Tj" for line in text.splitlines())
        content = ContentStream(None, writer)
        content.set_data(f"BT /F1 11 Tf 14 TL 72 720 Td {lines} ET".encode("latin-1"))
        page.replace_contents(content)
    if password is not None:
        writer.encrypt(user_password=password, algorithm="RC4-128")
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def numbered_pages(count: int, words_per_page: int = 40) -> list[str]:
    """Page texts that say which page they are, so a reader can find each in the extracted text."""
    return [
        f"Page {n} of {count}. " + " ".join(f"word{n}x{w}" for w in range(words_per_page))
        for n in range(1, count + 1)
    ]
