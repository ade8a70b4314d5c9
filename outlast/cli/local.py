"""`outlast local up` and `outlast local token`: the whole system on this machine, and its sign-in.

Local mode runs the functions' own code from the synthesized template, so it runs from a checkout
of the repository with the `local` extra (moto, the CDK, awslambdaric): `make up` does both.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import threading
from pathlib import Path
from typing import Any

import click

from outlast.cli.checkout import use_checkout
from outlast.cli.errors import CliError, ExitCode
from outlast.cli.framework import Section, Verb
from outlast.cli.session import guarded

DEFAULT_PORT = 8000
STOP_TIMEOUT_SECONDS = 90


def _pairs(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    pairs = {}
    for value in values:
        key, separator, item = value.partition("=")
        if not separator:
            raise click.BadParameter(f"expected KEY=VALUE, got {value!r}")
        pairs[key] = item
    return pairs


local = Section(
    "local",
    help="Run outlast on this machine.\n\nNo AWS account, no internet; it runs from a checkout.",
    section="LOCAL MODE",
    examples=("outlast local up", "outlast login --local", "outlast submit summarize --text 'hello' --wait"),
)


@local.command(
    "up",
    cls=Verb,
    exit_codes={
        ExitCode.OK: "stopped by Ctrl-C (or SIGTERM) after a clean start",
        ExitCode.ERROR: "not a checkout, a bad --chaos spec, or the stack could not start",
    },
    examples=("outlast local up --port 8100", "outlast local up -c submitsPerMinute=600 --verbose"),
)
@click.option("--port", type=int, default=DEFAULT_PORT, show_default=True, help="HTTP API port")
@click.option(
    "--ws-port", type=int, default=0, help="WebSocket API port (default: a free one, printed at start)"
)
@click.option(
    "--console-port",
    type=int,
    help="web console port (default: the API's port + 1 when free, else a free one; printed at start)",
)
@click.option(
    "--cdk-out", type=click.Path(path_type=Path), help="cloud assembly directory (default cdk.out.local)"
)
@click.option(
    "--context", "-c", multiple=True, metavar="KEY=VALUE", callback=_pairs, help="CDK context for the synth"
)
@click.option(
    "--env",
    multiple=True,
    metavar="KEY=VALUE",
    callback=_pairs,
    help="override a function environment variable",
)
@click.option(
    "--schedule-seconds", type=float, help="run scheduled functions this often (default: their rate)"
)
@click.option(
    "--batch-seconds",
    type=click.FloatRange(min=0),
    help="the local model server completes a provider batch this long after its creation (default 3)",
)
@click.option("--verbose", "-v", is_flag=True, help="print function logs")
@click.option(
    "--chaos",
    metavar="SPEC",
    help="inject process faults (local only): a JSON object or file, see docs/chaos.md",
)
@guarded
def up(
    *,
    port: int,
    ws_port: int,
    console_port: int | None,
    cdk_out: Path | None,
    context: dict[str, str],
    env: dict[str, str],
    schedule_seconds: float | None,
    batch_seconds: float | None,
    verbose: bool,
    chaos: str | None,
) -> int:
    """Start the local stack; it prints `ready: URL` and runs until Ctrl-C."""
    use_checkout("`outlast local up`")
    from outlast.chaos.shim import fault_hook  # noqa: PLC0415 - a repository tool, loaded only when asked for
    from outlast.chaos.spec import ChaosSpec  # noqa: PLC0415
    from outlast.local.stack import STATE_DIR, LocalOptions, LocalStack  # noqa: PLC0415 - the `local` extra
    from outlast.local.stop_signals import StopSignals  # noqa: PLC0415

    options = LocalOptions(
        port=port,
        ws_port=ws_port,
        console_port=console_port,
        context=context,
        environment=env,
        schedule_seconds=schedule_seconds,
        batch_seconds=batch_seconds,
        verbose=verbose,
        log=lambda line: print(line, file=sys.stderr, flush=True),
    )
    if cdk_out is not None:
        options.cdk_out = cdk_out
    if chaos is not None:
        try:
            spec = ChaosSpec.load(chaos, STATE_DIR / "chaos" / str(port))
        except (OSError, TypeError, ValueError) as error:
            raise CliError(f"--chaos: {error}") from None
        options.fault_hook = fault_hook(spec.prepare())  # local mode's own hook, set to chaos's shim
    # Installed before the start: a Ctrl-C during a long first synth stops the stack once it is up.
    stop = StopSignals().install()
    stack = LocalStack(options)
    try:
        stack.start()
        if stack.websocket_url is not None:
            # Before `ready:`: whoever waits for that line reads this one too, and nothing after it.
            print(f"websocket: {stack.websocket_url}", flush=True)
        if stack.console_url is not None:
            print(f"console: {stack.console_url}", flush=True)
        print(f"ready: {stack.front.url}", flush=True)
        stop.wait()
    finally:
        print("stopping...", file=sys.stderr, flush=True)
        # A stop that hangs prints every thread's stack and exits 1; the children still end,
        # since each is started with a parent-death signal.
        faulthandler.dump_traceback_later(STOP_TIMEOUT_SECONDS, exit=True)
        stack.stop()
        faulthandler.cancel_dump_traceback_later()
    _exit_despite_stray_threads()
    return ExitCode.OK


def _exit_despite_stray_threads() -> None:
    """Everything was stopped; a thread still running (a bug) must not keep the process alive."""
    stray = [t.name for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if stray:
        print(f"stopped; threads still running: {', '.join(stray)}", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(0)


@local.command(
    "token",
    cls=Verb,
    exit_codes={
        ExitCode.OK: "the token was printed",
        ExitCode.ERROR: "no local stack on that port, or not a checkout",
    },
    examples=("export OUTLAST_TOKEN=$(outlast local token --user alice --tenant acme)",),
)
@click.option("--user", required=True, help="user name (created when missing)")
@click.option("--tenant", help="the user's custom:tenant (set as an admin would)")
@click.option(
    "--port", type=int, default=DEFAULT_PORT, show_default=True, help="port of the running local stack"
)
@guarded
def token(user: str, tenant: str | None, port: int) -> int:
    """Print an ID token of a local user (one line), for scripts: `outlast login --local` signs you in."""
    use_checkout("`outlast local token`")
    from outlast.local.access import issue_token  # noqa: PLC0415 - the `local` extra
    from outlast.local.stack import read_state  # noqa: PLC0415

    try:
        state: dict[str, Any] = read_state(port)
    except FileNotFoundError as error:
        raise CliError(str(error)) from None
    print(issue_token(state, user, tenant))
    return ExitCode.OK
