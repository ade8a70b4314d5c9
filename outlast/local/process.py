"""`outlast local up` as a child process: started until it says `ready:`, stopped with Ctrl-C.

The test fixtures, the chaos run and the pipeline benchmark all drive a local stack this way.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def start_until_ready(
    arguments: Sequence[str],
    *,
    cwd: Path,
    stderr: IO[str] | None,
    timeout_seconds: float,
    log_hint: str = "",
) -> subprocess.Popen[str]:
    """Run our own CLI and return once it printed `ready: URL` on stdout.

    If it exits first, or is not ready within `timeout_seconds`, it is killed and RuntimeError
    says which (`log_hint`, e.g. "; see .local/x.log", is appended). Its stdout stays a pipe that
    nobody reads after `ready:`; the stack writes everything else to stderr.
    """
    process = subprocess.Popen(  # noqa: S603 - our own interpreter and CLI
        list(arguments),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    stdout = process.stdout
    if stdout is None:  # pragma: no cover - Popen with stdout=PIPE always has one
        raise RuntimeError("no pipe to the local stack")
    deadline = time.monotonic() + timeout_seconds
    while True:
        line = stdout.readline()
        if line.startswith("ready: "):
            return process
        if not line and process.poll() is not None:
            raise RuntimeError(f"outlast local up exited with {process.returncode}{log_hint}")
        if time.monotonic() > deadline:
            process.kill()
            process.wait(timeout=10)
            raise RuntimeError(f"outlast local up was not ready within {timeout_seconds:.0f} s{log_hint}")


def interrupt(process: subprocess.Popen[str], timeout_seconds: float) -> None:
    """Ctrl-C, as a user would: the stack stops everything it started. Killed if it hangs."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=timeout_seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
