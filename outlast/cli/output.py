"""`outlast output JOB_ID [--follow]`: a streaming job's output, as far as it is written or as it grows.

Without --follow: the text as far as it is written now (the result's attempt once the job has
ended). With --follow: that text, then the rest as it is written, until the job ends (the live
connection when it can be had, else polling); after a dropped connection it goes on from the last
event received. With --json, each output event is one JSON line (JSON Lines).
"""

from __future__ import annotations

import click

from outlast.cli.console import Console
from outlast.cli.errors import CliError, ExitCode
from outlast.cli.framework import Verb
from outlast.cli.jobs import ERROR, SECTION, exit_code_for
from outlast.cli.session import api_options, guarded, json_option, open_session
from outlast.cli.stream_output import ended_status, print_output, stream_output


@click.command(
    "output",
    cls=Verb,
    section=SECTION,
    exit_codes={
        ExitCode.OK: "the output was printed (with --follow: the job Succeeded, or Ctrl-C stopped following)",
        ExitCode.FAILED: "with --follow: the job Failed (its output so far was printed)",
        ExitCode.ERROR: ERROR + "; the job does not stream its output",
        ExitCode.CANCELED: "with --follow: the job was Canceled (its output so far was printed)",
    },
    examples=("outlast output 3f0c... --follow", "outlast output 3f0c... --json | jq -r .text"),
)
@click.argument("job_id")
@click.option("--follow", is_flag=True, help="print the output as it is written, until the job ends")
@api_options
@json_option
@guarded
def output(
    job_id: str, *, follow: bool, api_url: str | None, profile: str | None, token_env: str, json_mode: bool
) -> int:
    """Print a streaming job's output (submitted with --stream)."""
    session = open_session(Console(json_mode), api_url, profile, token_env)
    document = session.call(lambda: session.api.get_job(job_id), "the status request").document
    if not document.stream:
        raise CliError(f"job {job_id} does not stream its output: read it with `outlast result {job_id}`")
    if not follow:
        print_output(session, job_id)
        return ExitCode.OK
    try:
        stream_output(session, job_id)
    except KeyboardInterrupt:
        session.console.note("stopped following")
        return ExitCode.OK
    return exit_code_for(ended_status(session, job_id).status)
