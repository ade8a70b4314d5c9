"""One module per format behind shared.documents.extraction.Extractor, chosen by declared type.

The modules are imported on demand: the extraction child reads one file, and a text file's
child should not pay for importing pypdf.
"""

from __future__ import annotations

import importlib

from shared.documents.extraction import Extractor
from shared.documents.types import ContentType

_MODULES = {
    ContentType.TEXT: "functions.ingest.formats.text",
    ContentType.MARKDOWN: "functions.ingest.formats.text",
    ContentType.PDF: "functions.ingest.formats.pdf",
    ContentType.DOCX: "functions.ingest.formats.docx",
}


def extractor_for(content_type: ContentType) -> Extractor:
    """The extractor of a declared content type (every allowed type has one)."""
    extractor: Extractor = importlib.import_module(_MODULES[content_type]).extractor(content_type)
    return extractor
