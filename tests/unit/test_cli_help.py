"""The command tree as a person meets it: gh-shaped help, --version, completion, the old spellings."""

from __future__ import annotations

import click
import click.testing
import pytest

from outlast import __version__
from outlast.cli.app import cli
from outlast.cli.errors import ExitCode
from outlast.cli.framework import Alias, Verb
from tests.support.cli import run

pytestmark = pytest.mark.unit


def _verbs(group: click.Group, path: str = "outlast") -> list[tuple[str, Verb]]:
    found: list[tuple[str, Verb]] = []
    for name, command in group.commands.items():
        if isinstance(command, Alias):
            continue
        if isinstance(command, click.Group):
            found += _verbs(command, f"{path} {name}")
        else:
            assert isinstance(command, Verb), f"{path} {name} is not a Verb"
            found.append((f"{path} {name}", command))
    return found


def test_the_top_level_help_reads_like_ghs():
    code, out, _ = run("--help")

    assert code == 0
    lines = out.splitlines()
    headings = [line for line in lines if line and line == line.upper() and not line.startswith(" ")]
    assert headings == [
        "USAGE",
        "JOB COMMANDS",
        "ACCOUNT COMMANDS",
        "OPERATOR COMMANDS",
        "LOCAL MODE",
        "MORE",
        "FLAGS",
        "EXAMPLES",
        "LEARN MORE",
    ]
    job_commands = out.split("JOB COMMANDS")[1].split("ACCOUNT COMMANDS")[0]
    assert [line.split(":")[0].strip() for line in job_commands.strip().splitlines()] == [
        "submit",
        "status",
        "result",
        "output",
        "cancel",
        "list",
        "watch",
        "budget",
        "documents",
    ]
    # The old operator spellings work but are not advertised
    listed = {line.split(":")[0].strip() for line in lines if line.startswith("  ") and ":" in line}
    assert not listed & {"dlq", "jobs", "budgets", "webhooks"}


def test_every_group_lists_its_commands_with_usage_and_flags():
    groups = (["ops"], ["ops", "dlq"], ["ops", "jobs"], ["ops", "budgets"], ["ops", "webhooks"], ["local"])
    for argv in groups:
        code, out, _ = run(*argv, "--help")

        assert code == 0, argv
        assert "USAGE" in out
        assert "COMMANDS" in out
        assert "FLAGS" in out


def _name(value: object) -> str:
    return value if isinstance(value, str) else ""


@pytest.mark.parametrize(("path", "verb"), _verbs(cli), ids=_name)
def test_every_command_documents_only_its_own_exit_codes(path, verb):
    code, out, _ = run(*path.split()[1:], "--help")

    assert code == 0
    section = out.split("EXIT CODES")[1].split("\n\n")[0]
    listed = [int(line.split()[0]) for line in section.strip().splitlines() if line.strip()[:1].isdigit()]
    assert listed == sorted(int(c) for c in verb.exit_codes)
    assert ExitCode.OK in verb.exit_codes


def test_list_does_not_claim_the_codes_of_a_wait():
    _, out, _ = run("list", "--help")

    section = out.split("EXIT CODES")[1]
    assert "\n  1  " not in section
    assert "\n  3  " not in section


def test_version():
    code, out, _ = run("--version")

    assert (code, out) == (0, f"outlast {__version__}\n")


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts_come_from_click(shell):
    code, out, _ = run("completion", shell)

    assert code == 0
    assert "_OUTLAST_COMPLETE" in out


def test_completion_offers_the_commands():
    result = click.testing.CliRunner().invoke(
        cli, [], env={"_OUTLAST_COMPLETE": "bash_complete", "COMP_WORDS": "outlast s", "COMP_CWORD": "1"}
    )

    assert "submit" in result.stdout
    assert "status" in result.stdout


def test_an_old_spelling_runs_the_new_command_and_says_so():
    code, _, err = run("dlq", "list", "--local", "--port", "1")

    assert "`outlast dlq` is now `outlast ops dlq`" in err
    assert code == ExitCode.ERROR  # the moved command ran: there is no local stack on port 1
    assert "no local stack on port 1" in err


def test_the_dlq_defaults_the_help_shows_are_the_readers_own():
    from outlast.cli.ops import common  # noqa: PLC0415
    from outlast.operator import dlq  # noqa: PLC0415 - the operator code runs from the checkout

    assert (common.DEFAULT_MAX_MESSAGES, common.DEFAULT_HOLD_SECONDS) == (
        dlq.DEFAULT_MAX_MESSAGES,
        dlq.DEFAULT_HOLD_SECONDS,
    )
