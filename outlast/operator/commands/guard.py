"""Run an operator command body: target, AWS and usage errors become a message and exit code 2,
Ctrl-C becomes 130."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

from botocore.exceptions import ClientError

from outlast.cli.console import Console
from outlast.cli.errors import CliError, ExitCode
from outlast.operator.dispatch import AWS_ERRORS
from outlast.operator.targets import TargetError

Body = Callable[[SimpleNamespace, Console], int]


def run(body: Body, arguments: SimpleNamespace, console: Console) -> int:
    """The body's exit code, or the one its failure means."""
    try:
        return body(arguments, console)
    except (TargetError, CliError) as error:
        console.note(f"outlast: {error}")
    except ClientError as error:
        details = error.response.get("Error", {})
        console.note(f"outlast: AWS error {details.get('Code')}: {details.get('Message')}")
    except AWS_ERRORS as error:
        console.note(f"outlast: AWS error: {error}")
    except KeyboardInterrupt:
        console.note("outlast: interrupted")
        return ExitCode.INTERRUPTED
    return ExitCode.ERROR
