"""`python -m outlast.local.orphan_guard PARENT_PID -- COMMAND...`: run COMMAND, and end it with its parent.

On Linux, PR_SET_PDEATHSIG makes the kernel send SIGTERM when the parent dies, and the setting
survives exec; setting it here (rather than in a preexec_fn, which is unsafe in a threaded
parent) means even a killed `outlast local up` leaves no function or moto process behind.
Elsewhere it simply runs COMMAND.
"""

from __future__ import annotations

import os
import signal
import sys


def main() -> None:
    """Arm the parent-death signal, check the parent is still there, then become COMMAND."""
    parent, separator, *command = sys.argv[1:]
    if separator != "--" or not command:
        raise SystemExit("usage: python -m outlast.local.orphan_guard PARENT_PID -- COMMAND...")
    if sys.platform.startswith("linux"):
        import ctypes  # noqa: PLC0415 - Linux only

        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
        if os.getppid() != int(parent):  # the parent died before the signal was armed
            raise SystemExit(1)
    os.execvp(command[0], command)  # noqa: S606 - our own interpreter and arguments


if __name__ == "__main__":
    main()
