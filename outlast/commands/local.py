"""`outlast local up` and `outlast local token`: the local stack and its sign-in."""

from __future__ import annotations

import argparse
import faulthandler
import os
import sys
import threading
from pathlib import Path
from typing import Any

import boto3

from outlast.chaos.spec import ChaosSpec

DEFAULT_PORT = 8000
STOP_TIMEOUT_SECONDS = 90


def _pairs(values: list[str] | None) -> dict[str, str]:
    pairs = {}
    for value in values or []:
        key, separator, item = value.partition("=")
        if not separator:
            raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {value!r}")
        pairs[key] = item
    return pairs


def register(commands: Any) -> None:
    """Add `local up` and `local token`."""
    group = commands.add_parser("local", help="run outlast on this machine").add_subparsers(
        dest="local_command", required=True, metavar="COMMAND"
    )
    up = group.add_parser("up", help="start the local stack (Ctrl-C stops it)")
    up.add_argument("--port", type=int, default=DEFAULT_PORT, help="HTTP API port (default 8000)")
    up.add_argument(
        "--ws-port", type=int, default=0, help="WebSocket API port (default: a free one, printed at start)"
    )
    up.add_argument(
        "--console-port",
        type=int,
        help="web console port (default: the API's port + 1 when free, else a free one; printed at start)",
    )
    up.add_argument("--cdk-out", type=Path, help="cloud assembly directory (default cdk.out.local)")
    up.add_argument("--context", "-c", action="append", metavar="KEY=VALUE", help="CDK context for the synth")
    up.add_argument(
        "--env", action="append", metavar="KEY=VALUE", help="override a function environment variable"
    )
    up.add_argument(
        "--schedule-seconds", type=float, help="run scheduled functions this often (default: their rate)"
    )
    up.add_argument("--verbose", "-v", action="store_true", help="print function logs")
    up.add_argument(
        "--chaos",
        metavar="SPEC",
        help="inject process faults (local only): a JSON object or file, see docs/chaos.md",
    )
    up.set_defaults(run=_up)

    token = group.add_parser("token", help="print an ID token for a local user (created if missing)")
    token.add_argument("--user", required=True, help="user name")
    token.add_argument("--tenant", help="the user's custom:tenant (admin-set)")
    token.add_argument("--port", type=int, default=DEFAULT_PORT, help="port of the running local stack")
    token.set_defaults(run=_token)


def _up(arguments: argparse.Namespace) -> int:
    # Local mode needs the `local` extra (moto, the CDK, awslambdaric); the client commands do not.
    from outlast.local.stack import STATE_DIR, LocalOptions, LocalStack  # noqa: PLC0415
    from outlast.local.stop_signals import StopSignals  # noqa: PLC0415

    options = LocalOptions(
        port=arguments.port,
        ws_port=arguments.ws_port,
        console_port=arguments.console_port,
        context=_pairs(arguments.context),
        environment=_pairs(arguments.env),
        schedule_seconds=arguments.schedule_seconds,
        verbose=arguments.verbose,
        log=lambda line: print(line, file=sys.stderr, flush=True),
    )
    if arguments.cdk_out is not None:
        options.cdk_out = arguments.cdk_out
    if arguments.chaos is not None:
        try:
            spec = ChaosSpec.load(arguments.chaos, STATE_DIR / "chaos" / str(arguments.port))
        except (OSError, TypeError, ValueError) as error:
            print(f"--chaos: {error}", file=sys.stderr)
            return 2
        options.chaos = spec.prepare()
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
    return 0


def _exit_despite_stray_threads() -> None:
    """Everything was stopped; a thread still running (a bug) must not keep the process alive."""
    stray = [t.name for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if stray:
        print(f"stopped; threads still running: {', '.join(stray)}", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(0)


def local_client(service: str, state: dict[str, Any]) -> Any:
    """A boto3 client for the local stack's moto, with its dummy credentials (never the caller's)."""
    return boto3.client(  # type: ignore[call-overload]
        service,
        endpoint_url=state["awsEndpoint"],
        region_name=state["region"],
        aws_access_key_id="local",
        aws_secret_access_key="local",  # noqa: S106 - moto's dummy credentials
    )


def issue_token(state: dict[str, Any], user: str, tenant: str | None) -> str:
    """An ID token from the local user pool; the user is created (or its tenant updated) first."""
    from outlast.local.users import sign_in  # noqa: PLC0415 - see _up

    cognito = local_client("cognito-idp", state)
    result = sign_in(cognito, state["userPoolId"], state["userPoolClientId"], user, tenant)
    return str(result["IdToken"])


def _token(arguments: argparse.Namespace) -> int:
    try:
        from outlast.local.stack import read_state  # noqa: PLC0415 - see _up

        state = read_state(arguments.port)
    except FileNotFoundError as error:
        print(error, file=sys.stderr)
        return 2
    print(issue_token(state, arguments.user, arguments.tenant))
    return 0
