"""One set of exit codes and errors for every command, and the guard that turns an expected
failure into a message on stderr and its exit code (never a traceback)."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """What a command's exit status means; each command's help lists the ones it can return."""

    OK = 0
    FAILED = 1  # the job Failed; an operator run left something to look at; nothing found
    ERROR = 2  # usage, sign-in, connection or HTTP error; an AWS error
    CANCELED = 3  # the job was Canceled
    STILL_RUNNING = 4  # a wait ended (timeout, Ctrl-C) before the job did; the job goes on
    INTERRUPTED = 130  # Ctrl-C (the shell's own convention for SIGINT)


class CliError(Exception):
    """The command cannot do what was asked; the message says why (exit code 2 unless given)."""

    def __init__(self, message: str, code: ExitCode = ExitCode.ERROR) -> None:
        super().__init__(message)
        self.code = code
