"""Running the `outlast` command line in-process, as a test would type it."""

from __future__ import annotations

import pytest

from outlast.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """The exit code, stdout and stderr of `outlast ARGV...`."""
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err
