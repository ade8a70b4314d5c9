"""`outlast watch [JOB_ID]`: the caller's job updates as the API pushes them.

Without JOB_ID: every update of every job of the caller, until Ctrl-C (exit 0). The connection
is renewed with a fresh ticket before API Gateway's 2-hour limit, and after a drop (with
backoff); updates pushed while it was down are not replayed (`outlast list` shows the state).
With JOB_ID: the job as it is now, then its updates until it ends (polled when the socket cannot
be had). With --json each update is one status document on its own line (JSON Lines).
"""

from __future__ import annotations

import time

import click

from outlast.api.http import JsonObject
from outlast.api.models import StatusDocument
from outlast.cli.console import Console
from outlast.cli.errors import ExitCode
from outlast.cli.formats import format_update
from outlast.cli.framework import Verb
from outlast.cli.jobs import ERROR, SECTION, exit_code_for
from outlast.cli.session import Session, api_options, guarded, json_option, open_session
from outlast.follow import Followed
from outlast.live import LiveUpdates, LiveUpdatesError, open_live

RECONNECT_BACKOFF_SECONDS = (1, 2, 4, 8, 15, 30)
IDLE_WAIT_SECONDS = 60.0


class UpdatePrinter:
    """Prints each new revision of a job once: a line, or a JSON document per line with --json."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self._seen: dict[str, int] = {}

    def update(self, document: StatusDocument, body: JsonObject) -> None:
        """Print the document unless this revision of the job was printed already."""
        if self._seen.get(document.job_id, -1) >= document.revision:
            return
        self._seen[document.job_id] = document.revision
        if self._console.json_mode:
            self._console.json_line(body)
        else:
            self._console.line(format_update(document))

    def tick(self) -> None:
        """Nothing to redraw."""

    def pause(self, seconds: float) -> None:
        """Sleep."""
        time.sleep(seconds)


@click.command(
    "watch",
    cls=Verb,
    section=SECTION,
    exit_codes={
        ExitCode.OK: "Ctrl-C ended the watch (or, with JOB_ID, the job Succeeded)",
        ExitCode.FAILED: "with JOB_ID: the job Failed",
        ExitCode.ERROR: ERROR + "; without JOB_ID, no live connection could be opened",
        ExitCode.CANCELED: "with JOB_ID: the job was Canceled",
    },
    examples=("outlast watch", "outlast watch 3f0c... --json"),
)
@click.argument("job_id", required=False)
@api_options
@json_option
@guarded
def watch(
    job_id: str | None, api_url: str | None, profile: str | None, token_env: str, json_mode: bool
) -> int:
    """Print your jobs' updates as they happen.

    With JOB_ID, that job's only, until it ends.
    """
    session = open_session(Console(json_mode), api_url, profile, token_env)
    try:
        if job_id:
            return _watch_job(session, job_id)
        return _watch_all(session)
    except KeyboardInterrupt:
        session.console.note("stopped watching")
        return ExitCode.OK


def _watch_job(session: Session, job_id: str) -> ExitCode:
    answer = session.call(lambda: session.api.get_job(job_id), "the status request")
    followed = Followed.of(answer)
    session.follower.until_ended(followed, None, UpdatePrinter(session.console))
    return exit_code_for(followed.document.status)


def _watch_all(session: Session) -> ExitCode:
    printer = UpdatePrinter(session.console)
    console = session.console
    try:
        live = open_live(session.api)
    except LiveUpdatesError as error:
        console.note(f"error: live updates unavailable ({error})")
        return ExitCode.ERROR
    console.note("watching your jobs' updates (Ctrl-C stops)")
    while True:
        with live:
            try:
                while not live.due_for_renewal:
                    pushed = live.next_update(IDLE_WAIT_SECONDS)
                    if pushed is not None:
                        printer.update(pushed.document, pushed.body)
            except LiveUpdatesError as error:
                console.note(f"live connection lost ({error}); updates meanwhile are not replayed")
        live = _reconnect(session)


def _reconnect(session: Session) -> LiveUpdates:
    """A new connection with a fresh ticket, trying again with backoff until one opens."""
    failures = 0
    while True:
        try:
            return open_live(session.api)
        except LiveUpdatesError as error:
            delay = RECONNECT_BACKOFF_SECONDS[min(failures, len(RECONNECT_BACKOFF_SECONDS) - 1)]
            failures += 1
            session.console.note(f"cannot reconnect ({error}): trying again in {delay} s")
            time.sleep(delay)
