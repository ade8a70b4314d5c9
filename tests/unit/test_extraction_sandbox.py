"""The extraction child and its sandbox: real child processes, real limits.

A misbehaving child (tests/support/misbehaving_child.py) loops, allocates, hangs, crashes or
answers nonsense; each ends as a verdict on the document, never as a hang or an error of the
function. The real child gives the verdicts the in-process extractors give.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from dataclasses import replace

import pytest

from functions.ingest.child import answer
from functions.ingest.sandbox import CHILD_MODULE, ChildProcessExtraction, Confinement
from shared.documents.extraction import Extracted, ExtractionLimits
from shared.documents.types import ContentType, RejectCode
from shared.errors import DocumentRejectedError
from tests.document_fakes import InProcessExtraction
from tests.support import documents as files

MIB = 1024 * 1024
LIMITS = ExtractionLimits(max_extracted_bytes=8 * MIB, max_pages=500)
MISBEHAVING = "tests.support.misbehaving_child"
# Enough for the interpreter and pypdf (about 50 MB), small enough to hit on purpose.
CONFINED = Confinement(memory_bytes=256 * MIB, cpu_seconds=1)


def sandbox(module: str = CHILD_MODULE, limits: ExtractionLimits = LIMITS) -> ChildProcessExtraction:
    return ChildProcessExtraction(limits, CONFINED, child_module=module)


def verdict(extraction: ChildProcessExtraction, data: bytes, timeout: float = 30) -> RejectCode:
    with pytest.raises(DocumentRejectedError) as raised:
        extraction.extract(ContentType.TEXT, data, timeout)
    return raised.value.code


# --- the contract: the child's verdicts are the extractors' ---------------------------------------

CASES = {
    "multi-page-pdf": (ContentType.PDF, files.pdf(["One", "Two", "Three"])),
    "encrypted-pdf": (ContentType.PDF, files.pdf(["secret"], password="pw")),
    "pdf-without-text": (ContentType.PDF, files.pdf([None, None])),
    "docx": (ContentType.DOCX, files.docx(["Para one", "Para two"])),
    "markdown": (ContentType.MARKDOWN, files.MARKDOWN.encode()),
    "pdf-declared-as-text": (ContentType.TEXT, files.pdf(["x"])),
    "docx-declared-as-pdf": (ContentType.PDF, files.docx(["x"])),
    "docx-zip-bomb": (ContentType.DOCX, files.docx_bomb(100 * MIB)),
    "damaged-pdf": (ContentType.PDF, files.pdf(["x"])[:200]),
}


def _outcome(extract: object, content_type: ContentType, data: bytes) -> object:
    try:
        return extract(content_type, data, 30)  # type: ignore[operator]
    except DocumentRejectedError as rejected:
        return rejected.code
    except Exception:  # noqa: BLE001 - in-process, a parser's exception is what the child calls unreadable
        return RejectCode.DOCUMENT_UNREADABLE


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_the_child_gives_the_verdict_the_extractor_gives_in_process(case):
    content_type, data = CASES[case]

    in_child = _outcome(sandbox().extract, content_type, data)
    in_process = _outcome(InProcessExtraction(LIMITS).extract, content_type, data)

    assert in_child == in_process


def test_a_300_page_pdf_comes_back_whole_through_the_pipe():
    data = files.pdf(files.numbered_pages(300))

    extracted = sandbox().extract(ContentType.PDF, data, 60)

    assert extracted == InProcessExtraction(LIMITS).extract(ContentType.PDF, data, 60)
    assert extracted.pages == 300


def test_the_child_has_no_credentials_and_no_environment(monkeypatch):
    # Given a secret in the function's environment (as Lambda puts its role's credentials there)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "the-functions-secret")

    # When the child echoes its environment back as the document's text
    extracted = sandbox(MISBEHAVING).extract(ContentType.TEXT, b"environment", 30)

    # Then it saw only the path it imports from
    assert json.loads(extracted.text).keys() <= {"PYTHONPATH", "LC_CTYPE"}
    assert "the-functions-secret" not in extracted.text


# --- misbehaviour ends as a verdict --------------------------------------------------------------


def test_an_answer_comes_back_as_the_text():
    assert sandbox(MISBEHAVING).extract(ContentType.TEXT, b"echo hello", 30) == Extracted("echo hello", None)


def test_a_child_that_allocates_without_end_is_stopped_by_its_memory_limit():
    # CPU time to spare: touching 256 MiB page by page can take a loaded machine past one CPU
    # second, and this is about the memory limit, not which limit comes first.
    memory_only = ChildProcessExtraction(LIMITS, replace(CONFINED, cpu_seconds=30), child_module=MISBEHAVING)

    assert verdict(memory_only, b"allocate") is RejectCode.DOCUMENT_TOO_LARGE


def test_a_child_that_spins_is_stopped_by_its_cpu_limit():
    assert verdict(sandbox(MISBEHAVING), b"spin") is RejectCode.DOCUMENT_UNREADABLE


def test_a_child_that_hangs_is_killed_at_the_deadline():
    with pytest.raises(DocumentRejectedError) as raised:
        sandbox(MISBEHAVING).extract(ContentType.TEXT, b"sleep", 0.5)

    assert raised.value.code is RejectCode.DOCUMENT_UNREADABLE
    assert "0.5 seconds" in raised.value.message


@pytest.mark.parametrize("behaviour", [b"exit", b"nonsense", b"short"])
def test_a_child_that_crashes_or_answers_nonsense_means_unreadable(behaviour):
    assert verdict(sandbox(MISBEHAVING), behaviour) is RejectCode.DOCUMENT_UNREADABLE


def test_a_parsers_exception_text_never_reaches_the_message():
    with pytest.raises(DocumentRejectedError) as raised:
        sandbox(MISBEHAVING).extract(ContentType.TEXT, b"raise", 30)

    assert raised.value.code is RejectCode.DOCUMENT_UNREADABLE
    assert "secret-in-the-file" not in raised.value.message


def test_a_child_that_writes_without_end_is_stopped_by_its_file_size_limit():
    # Its stdout is a file, not a pipe: the kernel ends the writes (before its CPU limit would),
    # and the parent reads a bounded file
    with pytest.raises(DocumentRejectedError) as raised:
        sandbox(MISBEHAVING).extract(ContentType.TEXT, b"flood", 30)

    assert raised.value.code is RejectCode.DOCUMENT_UNREADABLE
    assert raised.value.message == "The document could not be read."


def test_text_over_the_limit_from_a_child_is_refused_by_the_parent():
    # A child that got around its own limit (an exploited parser) cannot hand over more text
    limits = ExtractionLimits(max_extracted_bytes=8, max_pages=1)

    assert verdict(sandbox(MISBEHAVING, limits), b"echo more than eight") is RejectCode.DOCUMENT_UNREADABLE


# --- the child's answers --------------------------------------------------------------------------


def _answer_of(extract: object) -> tuple[dict[str, object], bytes]:
    out = io.BytesIO()
    answer(extract, b"file", out)  # type: ignore[arg-type]
    header, _, body = out.getvalue().partition(b"\n")
    return json.loads(header), body


def test_the_answer_carries_the_text_after_its_length():
    header, body = _answer_of(lambda _: Extracted(text="Grüße", pages=2))

    assert header == {"outcome": "extracted", "pages": 2, "textBytes": 7}
    assert body.decode() == "Grüße"


def test_a_memory_error_is_an_answer_too_large_and_an_exception_one_unreadable():
    def out_of_memory(_: bytes) -> Extracted:
        raise MemoryError

    def broken(_: bytes) -> Extracted:
        raise KeyError("/Root of the file")

    assert _answer_of(out_of_memory)[0]["code"] == "document_too_large"
    header, _ = _answer_of(broken)
    assert (header["code"], header["cause"]) == ("document_unreadable", "KeyError")
    assert "/Root" not in json.dumps(header)


def test_the_child_imports_neither_pydantic_nor_an_aws_sdk():
    # Its start-up is paid per file, and a parser exploited in it should find no AWS client.
    program = (
        "import sys, functions.ingest.child, functions.ingest.formats.text, functions.ingest.formats.docx;"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pydantic', 'boto3', 'botocore'}))"
    )
    completed = subprocess.run(  # noqa: S603 - our interpreter, our program
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )

    assert completed.stdout.strip() == "[]"
