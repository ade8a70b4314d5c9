"""The extraction child: `python -m functions.ingest.child REQUEST`, the file on stdin.

It confines itself before it reads a byte of the file: an address-space limit (a parser that
allocates past it gets MemoryError), a CPU-time limit (past it the kernel sends SIGXCPU, then
SIGKILL), no core dumps, and no file (its answer included) larger than the text may be. Its
environment holds no credentials (the parent passes none), so a parser exploited by a file has
nothing to reach AWS with.

The answer on stdout is one JSON line, then (for extracted text) exactly `textBytes` bytes of
UTF-8. Whatever happens inside an extractor ends as such an answer; only a kill or a crash of
the interpreter itself leaves none, which the parent reads as an unreadable document.
"""

from __future__ import annotations

import json
import logging
import resource
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

from shared.documents.extraction import Extracted, ExtractionLimits
from shared.documents.types import ContentType, RejectCode
from shared.errors import DocumentRejectedError


@dataclass(frozen=True)
class ChildRequest:
    """What the parent asks: the declared type, the extraction's limits and the child's own."""

    content_type: ContentType
    limits: ExtractionLimits
    memory_bytes: int
    cpu_seconds: int

    def encode(self) -> str:
        """The request as the child's argument."""
        return json.dumps(
            {
                "contentType": self.content_type.value,
                "limits": vars(self.limits),
                "memoryBytes": self.memory_bytes,
                "cpuSeconds": self.cpu_seconds,
            }
        )

    @classmethod
    def decode(cls, text: str) -> ChildRequest:
        """Parse the child's argument (the parent wrote it)."""
        fields: dict[str, Any] = json.loads(text)
        return cls(
            content_type=ContentType(fields["contentType"]),
            limits=ExtractionLimits(**fields["limits"]),
            memory_bytes=int(fields["memoryBytes"]),
            cpu_seconds=int(fields["cpuSeconds"]),
        )


# Room for the answer's JSON line on top of the text.
ANSWER_HEADER_BYTES = 64 * 1024


def output_limit(limits: ExtractionLimits) -> int:
    """The most the child may write to one file (its answer, its stderr): the text and a header."""
    return limits.max_extracted_bytes + ANSWER_HEADER_BYTES


def confine(memory_bytes: int, cpu_seconds: int, output_bytes: int) -> None:
    """Limit this process: address space, CPU seconds (SIGXCPU, then SIGKILL a second later),
    no core file, and at most `output_bytes` in any file it writes. The parent hands it files,
    not pipes, for stdout and stderr, so that this limit bounds what the parent reads back
    (Python ignores SIGXFSZ: a write past the limit raises OSError, and the child exits 1)."""
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (output_bytes, output_bytes))


def answer(extract: Callable[[bytes], Extracted], data: bytes, out: BinaryIO) -> None:
    """Run `extract` on `data` and write the answer; every exception it raises becomes one."""
    try:
        extracted = extract(data)
    except DocumentRejectedError as rejected:
        _write(out, {"outcome": "rejected", "code": rejected.code.value, "message": rejected.message})
    except MemoryError:
        message = "Reading the document needs more memory than a document may."
        _write(out, _rejected(RejectCode.DOCUMENT_TOO_LARGE, message, "MemoryError"))
    except Exception as error:  # noqa: BLE001 - any failure of a parser on a hostile file: unreadable
        message = "The document is damaged or in a form that cannot be read."
        _write(out, _rejected(RejectCode.DOCUMENT_UNREADABLE, message, type(error).__name__))
    else:
        text = extracted.text.encode("utf-8")
        _write(out, {"outcome": "extracted", "pages": extracted.pages, "textBytes": len(text)}, text)


def _rejected(code: RejectCode, message: str, cause: str) -> dict[str, Any]:
    # `cause` names the exception's type for the parent's log; its text (which may quote the
    # file) goes nowhere.
    return {"outcome": "rejected", "code": code.value, "message": message, "cause": cause}


def _write(out: BinaryIO, header: dict[str, Any], body: bytes = b"") -> None:
    out.write(json.dumps(header).encode() + b"\n" + body)
    out.flush()


def read_confined(argv: list[str] | None = None) -> tuple[ChildRequest, bytes]:
    """Parse the request, confine this process, then (only then) read the file from stdin."""
    request = ChildRequest.decode((argv if argv is not None else sys.argv[1:])[0])
    confine(request.memory_bytes, request.cpu_seconds, output_limit(request.limits))
    # pypdf warns (on stderr, through logging) about every oddity of a damaged file: noise here.
    logging.disable(logging.WARNING)
    return request, sys.stdin.buffer.read()


def main(argv: list[str] | None = None) -> int:
    """Confine, read the file, answer on stdout."""
    request, data = read_confined(argv)
    # Imported under the limits: a format's parser is imported only for a file of its type.
    from functions.ingest.formats import extractor_for  # noqa: PLC0415

    extractor = extractor_for(request.content_type)
    answer(lambda file: extractor.extract(file, request.limits), data, sys.stdout.buffer)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
