"""Running the `outlast` command line in-process through click's test runner, as a person would type it."""

from __future__ import annotations

from click.testing import CliRunner

from outlast.cli.app import cli


def run(*argv: str, stdin: str | None = None, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """The exit code, stdout and stderr of `outlast ARGV...`."""
    result = CliRunner().invoke(cli, list(argv), input=stdin, env=env, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr
