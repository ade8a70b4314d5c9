"""TextExtraction in a child process: memory and CPU limits, a wall-clock kill, no credentials.

A parser bug that a hostile file finds (a loop, an allocation, a crash in C) then costs the
child, never the function: the child is killed at the deadline, and a kill, a crash or an answer
that is not one are all the same verdict, document_unreadable (document_too_large when the
child ran out of memory, which is the truth of it). The child's answer is parsed as strictly as
any other untrusted input.
"""

import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import BinaryIO, NoReturn

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from functions.ingest.child import ChildRequest, output_limit
from shared.documents.extraction import Extracted, ExtractionLimits
from shared.documents.types import ContentType, RejectCode
from shared.errors import DocumentRejectedError
from shared.observability import logger

CHILD_MODULE = "functions.ingest.child"
_MAX_MESSAGE_CHARS = 500
_STDERR_TAIL_BYTES = 2000


@dataclass(frozen=True)
class Confinement:
    """The child's own limits: its address space and its CPU seconds (the wall clock's kill is
    the caller's timeout, as only the caller knows how much of its invocation is left)."""

    memory_bytes: int
    cpu_seconds: int


class _Answer(BaseModel):
    """The child's JSON line."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    outcome: str = Field(pattern="^(extracted|rejected)$")
    pages: int | None = Field(default=None, ge=0)
    text_bytes: int | None = Field(default=None, alias="textBytes", ge=0)
    code: RejectCode | None = None
    message: str | None = Field(default=None, max_length=_MAX_MESSAGE_CHARS)
    cause: str | None = Field(default=None, max_length=200)


class ChildProcessExtraction:
    """Runs `python -m <child_module>` per file (CHILD_MODULE: functions.ingest.child)."""

    def __init__(self, limits: ExtractionLimits, confinement: Confinement, *, child_module: str) -> None:
        self._limits = limits
        self._confinement = confinement
        self._module = child_module

    def extract(self, content_type: ContentType, data: bytes, timeout_seconds: float) -> Extracted:
        """The file's text, or DocumentRejectedError; never hangs past `timeout_seconds`."""
        request = ChildRequest(
            content_type=content_type,
            limits=self._limits,
            memory_bytes=self._confinement.memory_bytes,
            cpu_seconds=self._confinement.cpu_seconds,
        )
        # -P: the working directory is not put on the path; -s: no user site-packages. The
        # path is the parent's (in Lambda, the code and the layers); the environment nothing more.
        command = [sys.executable, "-P", "-s", "-m", self._module, request.encode()]
        environment = {"PYTHONPATH": os.pathsep.join(path for path in sys.path if path)}
        # Files, not pipes, for what the child writes: its file-size limit then bounds what is
        # read back here, whatever the child does (communicate() would buffer pipes unbounded).
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            with subprocess.Popen(  # noqa: S603 - our interpreter and module, our arguments
                command, stdin=subprocess.PIPE, stdout=out, stderr=err, env=environment
            ) as child:
                try:
                    child.communicate(data, timeout=timeout_seconds)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
                    logger.warning(
                        "extraction child killed at its deadline", extra={"seconds": timeout_seconds}
                    )
                    raise _unreadable(
                        f"Reading the document took longer than {timeout_seconds:g} seconds, the most it may."
                    ) from None
            return self._verdict(child.returncode, _read(out, output_limit(self._limits)), _tail(err))

    def _verdict(self, returncode: int, out: bytes, err: str) -> Extracted:
        if returncode != 0:
            _failed(returncode, err)
        header, _, body = out.partition(b"\n")
        try:
            answer = _Answer.model_validate_json(header)
        except ValidationError:
            logger.warning("extraction child answered nonsense", extra={"stderr": err})
            raise _unreadable("The document could not be read.") from None
        if answer.outcome == "rejected":
            if answer.cause is not None:
                logger.info("extraction failed in the child", extra={"cause": answer.cause})
            raise DocumentRejectedError(
                answer.code or RejectCode.DOCUMENT_UNREADABLE,
                answer.message or "The document could not be read.",
            )
        if answer.text_bytes != len(body) or len(body) > self._limits.max_extracted_bytes:
            raise _unreadable("The document could not be read.")
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise _unreadable("The document could not be read.") from None
        return Extracted(text=text, pages=answer.pages)


def _failed(returncode: int, err: str) -> NoReturn:
    """A child that gave no answer: stopped by its CPU limit (SIGXCPU), killed, or crashed."""
    if returncode == -signal.SIGXCPU:
        logger.warning("extraction child ran out of CPU time", extra={"signal": -returncode})
        raise _unreadable("Reading the document took more computing time than a document may.")
    logger.warning("extraction child crashed", extra={"returncode": returncode, "stderr": err})
    raise _unreadable("The document could not be read.")


def _read(file: BinaryIO, limit: int) -> bytes:
    file.seek(0)
    return file.read(limit)


def _tail(file: BinaryIO) -> str:
    """The end of what the child wrote to stderr, for the log (a traceback's last lines)."""
    size = file.seek(0, os.SEEK_END)
    file.seek(max(0, size - _STDERR_TAIL_BYTES))
    return file.read().decode("utf-8", "replace")


def _unreadable(message: str) -> DocumentRejectedError:
    return DocumentRejectedError(RejectCode.DOCUMENT_UNREADABLE, message)
