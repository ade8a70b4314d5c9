"""Showing a streaming job's text as it arrives, for `outlast output --follow` and `submit --stream`.

The text goes to stdout as it grows, so `> file` keeps it and a terminal watches it being written;
when another attempt's text replaces the one shown (a stream cut, a retry, a redrive), the person
is told on stderr and the new attempt's text starts on a fresh line. With --json each event is one
JSON line instead (its API document), once, in the order it arrived.
"""

from __future__ import annotations

from outlast.api.http import TERMINAL_STATUSES
from outlast.api.models import StatusDocument
from outlast.cli.console import Console
from outlast.cli.errors import CliError
from outlast.cli.session import Session
from outlast.follow import TimeUpError
from outlast.output_follow import OutputFollower, OutputUnavailableError
from outlast.reassembly import Reassembly


class StreamPrinter:
    """An OutputSink that prints: the shown attempt's new text, or each event as a JSON line."""

    def __init__(self, console: Console, job_id: str) -> None:
        self._console = console
        self._job_id = job_id
        self._attempt: int | None = None
        self._printed = 0
        self.ended_line = True  # nothing printed, or a newline last

    def event(self, attempt: int, seq: int, text: str) -> None:
        """With --json, the event as the API documents it."""
        if self._console.json_mode:
            self._console.json_line({"jobId": self._job_id, "attempt": attempt, "seq": seq, "text": text})

    def changed(self, text: Reassembly) -> None:
        """Print what the shown attempt added since the last print (a fresh start for a new attempt)."""
        if self._console.json_mode:
            return
        attempt, shown = text.shown_attempt, text.text()
        if attempt != self._attempt:
            if self._attempt is not None:
                self.finish()
                self._console.note(
                    f"(the output starts over: attempt {attempt} replaces attempt {self._attempt})"
                )
            self._attempt, self._printed = attempt, 0
        if len(shown) > self._printed:
            self._console.write(shown[self._printed :])
            self.ended_line = shown.endswith("\n")
            self._printed = len(shown)

    def finish(self) -> None:
        """End the printed text with a newline (once)."""
        if not self.ended_line:
            self._console.write("\n")
            self.ended_line = True


def stream_output(session: Session, job_id: str, deadline: float | None = None) -> Reassembly:
    """Print the job's text as it is written until the job ends; the text as it ended.
    TimeUpError when `deadline` passes first; CliError when the API refuses to follow the job."""
    printer = StreamPrinter(session.console, job_id)
    text = Reassembly()
    try:
        OutputFollower(session.api, session.console.note).follow(job_id, text, printer, deadline)
    except OutputUnavailableError as error:
        raise CliError(f"the API refused to follow job {job_id}'s output ({error})") from None
    finally:
        printer.finish()
    return text


def print_output(session: Session, job_id: str) -> Reassembly:
    """Print the job's text as far as it is written now (all of it once the job has ended)."""
    printer = StreamPrinter(session.console, job_id)
    text = Reassembly()
    OutputFollower(session.api, session.console.note).catch_up(job_id, text, printer)
    printer.changed(text)
    printer.finish()
    return text


def ended_status(session: Session, job_id: str) -> StatusDocument:
    """The job as stored, once its output is complete."""
    document = session.call(lambda: session.api.get_job(job_id), "the status request").document
    if document.status not in TERMINAL_STATUSES:  # pragma: no cover - complete means ended
        raise TimeUpError
    return document
