"""Ingest: how long the extraction of a generated 300-page PDF takes, per page and per MB.

Each run is the ingest's own extraction (functions.ingest.sandbox.ChildProcessExtraction: a
confined `python -m functions.ingest.child` per file, under the function's default limits), so
the time includes the child's start (the interpreter and pypdf's import) as in Lambda, where it
is paid per file too. A generated Markdown file of 8 MiB (the most text a document may yield)
shows the other end: no parser, only the UTF-8 check and the budget. Lambda's arm64 CPU at the
ingest's 2048 MB is about one vCPU, like one core here; the numbers are local proxies.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from functions.ingest.sandbox import CHILD_MODULE, ChildProcessExtraction, Confinement
from functions.ingest.settings import IngestSettings
from outlast.bench.stats import summary
from outlast.documents import long_document, numbered_pages, pdf
from shared.documents.extraction import MIB, Extracted, ExtractionLimits
from shared.documents.types import ContentType

# Words per generated page: a dense report page has some 400-500 words; these are short ones.
WORDS_PER_PAGE = 300


def _extraction() -> tuple[ChildProcessExtraction, float]:
    settings = IngestSettings.model_validate(
        {"DOCUMENTS_TABLE_NAME": "-", "DOCUMENTS_BUCKET_NAME": "-", "INGEST_DLQ_URL": "-"}
    )
    limits = ExtractionLimits(
        max_extracted_bytes=settings.max_extracted_bytes, max_pages=settings.max_document_pages
    )
    confinement = Confinement(
        memory_bytes=settings.extraction_memory_mb * MIB, cpu_seconds=settings.extraction_cpu_seconds
    )
    extraction = ChildProcessExtraction(limits, confinement, child_module=CHILD_MODULE)
    return extraction, settings.extraction_timeout_seconds


def _timed(
    extraction: ChildProcessExtraction, content_type: ContentType, data: bytes, timeout: float, repeats: int
) -> tuple[list[float], Extracted]:
    seconds: list[float] = []
    extracted: Extracted | None = None
    for _ in range(repeats):
        began = time.perf_counter()
        extracted = extraction.extract(content_type, data, timeout)
        seconds.append(time.perf_counter() - began)
    assert extracted is not None  # noqa: S101 - repeats >= 1
    return seconds, extracted


def run(*, pages: int, repeats: int, say: Callable[[str], None]) -> dict[str, Any]:
    """The section of the report."""
    extraction, timeout = _extraction()
    say(f"ingest: a {pages}-page PDF, {repeats} extractions")
    document = pdf(numbered_pages(pages, words_per_page=WORDS_PER_PAGE))
    pdf_seconds, extracted = _timed(extraction, ContentType.PDF, document, timeout, repeats)
    median = summary(pdf_seconds)["median"]
    megabytes = len(document) / MIB
    text = long_document(8 * MIB - 1024).encode("utf-8")
    say(f"ingest: a Markdown file of {len(text)} bytes, {repeats} extractions")
    text_seconds, _ = _timed(extraction, ContentType.MARKDOWN, text, timeout, repeats)
    return {
        "method": (
            f"The ingest's confined child (ChildProcessExtraction, its default limits), {repeats} runs "
            "each, the child's start included"
        ),
        "pdf": {
            "pages": extracted.pages,
            "bytes": len(document),
            "textBytes": len(extracted.text.encode("utf-8")),
            "seconds": summary(pdf_seconds),
            "msPerPage": round(median * 1000 / pages, 3),
            "msPerMegabyte": round(median * 1000 / megabytes, 1),
        },
        "markdown": {"bytes": len(text), "seconds": summary(text_seconds)},
    }
