"""click, shaped like gh: grouped help with USAGE / COMMANDS / FLAGS / EXIT CODES / EXAMPLES
sections, exit codes declared per command (only those it can return), and the old operator
spellings kept as hidden aliases that say where the command went.

Every command is a `Verb` (or a `Section` of verbs): `exit_codes` maps each code the command can
return to what it means there; tests/integration/test_cli_exit_codes.py reaches every one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import click

from outlast.cli.errors import ExitCode

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def _heading(formatter: click.HelpFormatter, title: str) -> None:
    formatter.write_paragraph()
    formatter.write(f"{title}\n")


def _flags(command: click.Command, ctx: click.Context) -> list[tuple[str, str]]:
    # Arguments are named in the usage line and described in the help text, as gh does.
    records = [
        param.get_help_record(ctx) for param in command.get_params(ctx) if isinstance(param, click.Option)
    ]
    return [record for record in records if record is not None]


class Verb(click.Command):
    """A command with its exit codes and examples in its help."""

    def __init__(
        self,
        *args: Any,
        exit_codes: Mapping[ExitCode, str],
        examples: Sequence[str] = (),
        section: str = "",
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("context_settings", CONTEXT)
        kwargs.setdefault("options_metavar", "[flags]")
        super().__init__(*args, **kwargs)
        self.exit_codes = dict(exit_codes)
        self.examples = tuple(examples)
        self.section = section

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Description, USAGE, FLAGS, EXIT CODES, EXAMPLES."""
        self.format_help_text(ctx, formatter)
        _heading(formatter, "USAGE")
        with formatter.indentation():
            formatter.write_text(f"{ctx.command_path} {' '.join(self.collect_usage_pieces(ctx))}")
        flags = _flags(self, ctx)
        if flags:
            _heading(formatter, "FLAGS")
            with formatter.indentation():
                formatter.write_dl(flags)
        _heading(formatter, "EXIT CODES")
        with formatter.indentation():
            formatter.write_dl([(str(int(code)), text) for code, text in sorted(self.exit_codes.items())])
        if self.examples:
            _heading(formatter, "EXAMPLES")
            with formatter.indentation():
                for example in self.examples:
                    formatter.write(f"{' ' * formatter.current_indent}$ {example}\n")
        if self.epilog:
            formatter.write_paragraph()
            with formatter.indentation():
                formatter.write_text(self.epilog)


class Section(click.Group):
    """A group whose help lists its commands under headings (each command's `section`)."""

    command_class = Verb

    def __init__(
        self,
        *args: Any,
        sections: Sequence[str] = (),
        examples: Sequence[str] = (),
        learn_more: str = "",
        section: str = "",
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("context_settings", CONTEXT)
        super().__init__(*args, **kwargs)
        self.sections = tuple(sections)
        self.examples = tuple(examples)
        self.learn_more = learn_more
        self.section = section

    def list_commands(self, ctx: click.Context) -> list[str]:
        """In the order they were added (the order a reader needs them), not alphabetical."""
        return list(self.commands)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Description, USAGE, one heading per section of commands, FLAGS, EXAMPLES, LEARN MORE."""
        self.format_help_text(ctx, formatter)
        _heading(formatter, "USAGE")
        with formatter.indentation():
            formatter.write_text(f"{ctx.command_path} <command> [flags]")
        grouped: dict[str, list[tuple[str, str]]] = {}
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is None or command.hidden:
                continue
            heading = getattr(command, "section", "") or "COMMANDS"
            grouped.setdefault(heading, []).append(
                (name + ":", command.get_short_help_str(limit=100).removesuffix("."))
            )
        for heading in [*self.sections, *[h for h in grouped if h not in self.sections]]:
            if heading in grouped:
                _heading(formatter, heading)
                with formatter.indentation():
                    formatter.write_dl(grouped[heading])
        _heading(formatter, "FLAGS")
        with formatter.indentation():
            formatter.write_dl(_flags(self, ctx))
        if self.examples:
            _heading(formatter, "EXAMPLES")
            with formatter.indentation():
                for example in self.examples:
                    formatter.write(f"{' ' * formatter.current_indent}$ {example}\n")
        if self.learn_more:
            _heading(formatter, "LEARN MORE")
            with formatter.indentation():
                formatter.write_text(self.learn_more)


class Alias(Section):
    """An old spelling of a moved group (`outlast dlq` -> `outlast ops dlq`): hidden, same commands,
    and it says where the group went. Kept for one release."""

    def __init__(self, name: str, target: click.Group, new_path: str) -> None:
        super().__init__(name, commands=target.commands, hidden=True, help=f"Moved: now `{new_path}`.")
        self.new_path = new_path

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command, after a note on stderr."""
        click.echo(
            f"note: `outlast {self.name}` is now `{self.new_path}`; "
            "the old spelling goes in the next release",
            err=True,
        )
        return super().invoke(ctx)


def verb(
    group: click.Group,
    name: str,
    *,
    exit_codes: Mapping[ExitCode, str],
    examples: Sequence[str] = (),
    section: str = "",
    **kwargs: Any,
) -> Callable[[Callable[..., Any]], Verb]:
    """`@verb(group, "name", exit_codes=...)`: add a Verb to a group."""

    def decorate(function: Callable[..., Any]) -> Verb:
        command = group.command(
            name, cls=Verb, exit_codes=exit_codes, examples=examples, section=section, **kwargs
        )(function)
        assert isinstance(command, Verb)  # noqa: S101 - cls=Verb
        return command

    return decorate
