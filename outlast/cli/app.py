"""`outlast`: one command line for users and operators, shaped like gh (DESIGN.md, "The command line").

The user's verbs sit at the top; operator tools under `outlast ops`; local mode under `outlast
local`. `--version`, `outlast completion SHELL`, and every command's help lists the exit codes it
can return.
"""

from __future__ import annotations

from collections.abc import Sequence

import click
from click.shell_completion import get_completion_class

from outlast import __version__
from outlast.cli.account import login, logout
from outlast.cli.documents import documents
from outlast.cli.errors import ExitCode
from outlast.cli.framework import Section, Verb
from outlast.cli.jobs import budget, cancel, list_jobs, result, status, submit
from outlast.cli.local import local
from outlast.cli.ops import aliases, ops
from outlast.cli.output import output
from outlast.cli.watch import watch

PROG = "outlast"
COMPLETE_VARIABLE = "_OUTLAST_COMPLETE"
SHELLS = ("bash", "zsh", "fish")

cli = Section(
    PROG,
    help="Durable LLM jobs: submit work, and let the service, not your connection, own it.",
    sections=("JOB COMMANDS", "ACCOUNT COMMANDS", "OPERATOR COMMANDS", "LOCAL MODE", "MORE"),
    examples=(
        "outlast login",
        "outlast submit summarize --file report.txt --wait > summary.txt",
        "outlast list --status Failed",
        "outlast ops dlq list --stack-name outlast-prod",
    ),
    learn_more="Use `outlast <command> --help` for more about a command; each lists the exit codes it can "
    "return (and 130 after Ctrl-C). Scripts and CI: set $OUTLAST_TOKEN instead of signing in, and add "
    "--json for one JSON document on stdout. README.md and docs/ have the rest.",
)
cli = click.version_option(__version__, "--version", prog_name=PROG, message="%(prog)s %(version)s")(cli)


@cli.command(
    "completion",
    cls=Verb,
    section="MORE",
    exit_codes={ExitCode.OK: "the script was printed"},
    examples=(
        "outlast completion bash >> ~/.bashrc",
        'outlast completion zsh > "${fpath[1]}/_outlast"',
        "outlast completion fish > ~/.config/fish/completions/outlast.fish",
    ),
)
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell: str) -> None:
    """Print a shell completion script (bash, zsh or fish)."""
    completer = get_completion_class(shell)
    assert completer is not None  # noqa: S101 - click ships all three
    click.echo(completer(cli, {}, PROG, COMPLETE_VARIABLE).source())


for command in (
    submit,
    status,
    result,
    output,
    cancel,
    list_jobs,
    watch,
    budget,
    documents,
    login,
    logout,
    ops,
    local,
):
    cli.add_command(command)
for alias in aliases():
    cli.add_command(alias)


def main(argv: Sequence[str] | None = None) -> None:
    """The `outlast` script: run one command and exit with its code."""
    cli.main(args=list(argv) if argv is not None else None, prog_name=PROG)
