"""`outlast watch [JOB_ID]`: the caller's job updates as the API pushes them.

Without JOB_ID: every update of every job of the caller, until Ctrl-C (exit 0). The connection
is renewed with a fresh ticket before API Gateway's 2-hour limit, and after a drop (with
backoff); updates pushed while it was down are not replayed (`outlast list` shows the state).
With JOB_ID: the job as it is now, then its updates until it ends; exit code as for
`status --wait` (0 Succeeded, 1 Failed, 3 Canceled). When the socket cannot be had, the job is
polled instead. With --json each update is one JSON status document on its own line (JSON Lines).
"""

from __future__ import annotations

import argparse
import json
import time

from outlast.client import StatusDocument
from outlast.commands.jobs import (
    EXIT_ERROR,
    EXIT_OK,
    Followed,
    Session,
    exit_code_for,
    follow_socket,
    format_update,
    open_live_or_note,
    poll_until_ended,
    with_retries,
)
from outlast.live import LiveUpdates, LiveUpdatesError, open_live

RECONNECT_BACKOFF_SECONDS = (1, 2, 4, 8, 15, 30)
IDLE_WAIT_SECONDS = 60.0


class UpdatePrinter:
    """Prints each new revision of a job once: a line, or a JSON document per line with --json."""

    def __init__(self, session: Session) -> None:
        self._console = session.console
        self._seen: dict[str, int] = {}

    def update(self, document: StatusDocument) -> None:
        """Print the document unless this revision of the job was printed already."""
        revision = document.get("revision", 0)
        if self._seen.get(document["jobId"], -1) >= revision and revision:
            return
        self._seen[document["jobId"]] = revision
        text = (
            json.dumps(document, separators=(",", ":"))
            if self._console.json_mode
            else format_update(document)
        )
        print(text, file=self._console.out, flush=True)

    def tick(self) -> None:
        """Nothing to redraw."""

    def pause(self, seconds: float) -> None:
        """Sleep."""
        time.sleep(seconds)


def run(arguments: argparse.Namespace, session: Session) -> int:
    """Watch one job (JOB_ID) or all of the caller's."""
    try:
        if arguments.job_id:
            return _watch_job(session, arguments.job_id)
        return _watch_all(session)
    except KeyboardInterrupt:
        session.console.note("stopped watching")
        return EXIT_OK


def _watch_job(session: Session, job_id: str) -> int:
    printer = UpdatePrinter(session)
    answer = with_retries(session.console, lambda: session.client.get_job(job_id), "the status request")
    followed = Followed(answer.document, answer.retry_after)
    printer.update(followed.document)
    if not followed.terminal:
        live = open_live_or_note(session)
        finished = False
        if live is not None:
            with live:
                finished = follow_socket(session, followed, live, None, printer)
        if not finished:
            poll_until_ended(session, followed, None, printer)
    return exit_code_for(followed.document["status"])


def _watch_all(session: Session) -> int:
    printer = UpdatePrinter(session)
    console = session.console
    try:
        live = open_live(session.client)
    except LiveUpdatesError as error:
        console.note(f"error: live updates unavailable ({error})")
        return EXIT_ERROR
    console.note("watching your jobs' updates (Ctrl-C stops)")
    while True:
        with live:
            try:
                while not live.due_for_renewal:
                    pushed = live.next_update(IDLE_WAIT_SECONDS)
                    if pushed is not None:
                        printer.update(pushed)
            except LiveUpdatesError as error:
                console.note(f"live connection lost ({error}); updates meanwhile are not replayed")
        live = _reconnect(session)


def _reconnect(session: Session) -> LiveUpdates:
    """A new connection with a fresh ticket, trying again with backoff until one opens."""
    failures = 0
    while True:
        try:
            return open_live(session.client)
        except LiveUpdatesError as error:
            delay = RECONNECT_BACKOFF_SECONDS[min(failures, len(RECONNECT_BACKOFF_SECONDS) - 1)]
            failures += 1
            session.console.note(f"cannot reconnect ({error}): trying again in {delay} s")
            time.sleep(delay)
