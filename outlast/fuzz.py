"""API fuzzing: schemathesis against the committed OpenAPI document on the authenticated local stack.

`make fuzz` runs `python -m outlast.fuzz`: it attaches to the local stack on `--port` (or starts
one), signs a fuzz user in and runs every schemathesis phase (examples, coverage, fuzzing and
stateful sequences over the links it infers) with the checks below, then prints schemathesis'
summary. tests/e2e/test_fuzz.py is the short, derandomized run of the same setup in the suite.

What both runs hold the API to: no 5xx, and every answer (status, media type, headers, body)
is one the document declares. Every request carries a real ID token, so API Gateway's own
plain-JSON answers (authorizer 401, 404 outside the routes, 413, 429) stay out of the way; a
generated Idempotency-Key the API would accept is replaced by a fresh one.
"""

from __future__ import annotations

import argparse
import socket
import sys
import urllib.parse
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shared.errors import OutlastError
from shared.idempotency import parse_idempotency_key

if TYPE_CHECKING:
    from schemathesis import BaseSchema, Case, HookContext

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DOCUMENT = PROJECT_ROOT / "docs" / "openapi.json"
# The issue's contract, all of them response checks: no 5xx, only declared statuses, media types,
# headers and bodies. The library's other default checks judge the API by conventions DESIGN.md
# does not follow (positive_data_acceptance wants 2xx for a schema-valid, unknown job id; it is 404).
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
)
SUBMIT_OPERATION_ID = "submitJob"
IDEMPOTENCY_KEY = "idempotency-key"
FUZZ_USER = "fuzz"
FUZZ_TENANT = "fuzz"
DEFAULT_PORT = 8000
DEFAULT_EXAMPLES = 100
DEFAULT_SEED = 20260101
# A stack started for the long run gets its own assembly (ignored by git, removed by `make clean`)
# and a submit rate the run cannot exhaust, so that valid submits keep reaching the 202 path.
FUZZ_CDK_OUT = PROJECT_ROOT / "cdk.out.e2e-fuzz"
FUZZ_CONTEXT = {"submitsPerMinute": "100000"}


def auth_headers(token: str) -> dict[str, str]:
    """The headers every fuzz request carries."""
    return {"Authorization": f"Bearer {token}"}


def freshen_idempotency_key(case: Case[Any]) -> None:
    """Give a submit whose generated Idempotency-Key the API would accept a fresh key.

    Generated keys repeat ("0", "00"...): replayed or 409 answers would hide the 202 path. Keys the
    API refuses (empty, too long, not visible ASCII) stay as generated, to exercise the 400s.
    """
    if case.operation.definition.raw.get("operationId") != SUBMIT_OPERATION_ID or case.headers is None:
        return
    try:
        parse_idempotency_key(case.headers.get(IDEMPOTENCY_KEY))
    except OutlastError:
        return
    case.headers[IDEMPOTENCY_KEY] = f"fuzz-{uuid.uuid4()}"


def reaches_a_route(case: Case[Any]) -> bool:
    """False for a request API Gateway answers itself (plain JSON, outside the document): a method
    the path does not declare, or a path parameter that is empty or holds a '/' once decoded (the
    routes' `{job_id}` is one path segment, so such a path matches no route)."""
    if case.method.upper() != case.operation.method.upper():
        return False
    # Generated path parameters arrive percent-encoded; the front decodes the path before routing.
    decoded = [urllib.parse.unquote(str(value)) for value in (case.path_parameters or {}).values()]
    return all(value and "/" not in value for value in decoded)


def filter_case(context: HookContext, case: Case[Any]) -> bool:
    """schemathesis hook: generate only requests that reach a function."""
    del context
    return reaches_a_route(case)


def load_schema() -> BaseSchema:
    """The committed document, configured for the authenticated stack and the checks above."""
    import schemathesis  # noqa: PLC0415 - a dev dependency; the CLI must import without it

    schema = schemathesis.openapi.from_path(DOCUMENT)
    # The document's security scheme would make schemathesis generate (and drop) Authorization
    # values of its own; every request carries the real token instead.
    schema.config.generation.update(with_security_parameters=False)
    schema.config.checks.update(included_check_names=list(CHECKS))
    schema.hook(filter_case)
    return schema


# --- the long run: `python -m outlast.fuzz` -----------------------------------------------------


@dataclass(frozen=True)
class LongRun:
    """What `make fuzz` asks of schemathesis."""

    examples: int = DEFAULT_EXAMPLES
    seed: int = DEFAULT_SEED
    phases: str = "examples,coverage,fuzzing,stateful"
    report_dir: Path | None = None


def before_call(context: HookContext, case: Case[Any], kwargs: dict[str, Any]) -> None:
    """schemathesis hook (registered by `run`): a fresh key for every valid submit it sends."""
    del context, kwargs
    freshen_idempotency_key(case)


def cli_arguments(api_url: str, token: str, plan: LongRun) -> list[str]:
    """`st run` arguments for the plan (the token goes in a header schemathesis never prints)."""
    arguments = [
        "run",
        str(DOCUMENT),
        f"--url={api_url}",
        f"--header=Authorization: Bearer {token}",
        f"--checks={','.join(CHECKS)}",
        "--generation-with-security-parameters=false",
        f"--max-examples={plan.examples}",
        f"--seed={plan.seed}",
        f"--phases={plan.phases}",
        # moto breaks under concurrent writers on stream-enabled tables (DESIGN.md): one at a time.
        "--workers=1",
        "--request-timeout=30",
        "--continue-on-failure",
    ]
    if plan.report_dir is not None:
        arguments += ["--report=junit,ndjson", f"--report-dir={plan.report_dir}"]
    return arguments


def run(api_url: str, token: str, plan: LongRun) -> int:
    """schemathesis' `st run` in this process against `api_url`; its exit code (0: no failures)."""
    import schemathesis  # noqa: PLC0415
    from schemathesis.cli import schemathesis as cli  # noqa: PLC0415

    schemathesis.hook(filter_case)
    schemathesis.hook(before_call)
    try:
        cli.main(cli_arguments(api_url, token, plan), prog_name="st", standalone_mode=False)
    except SystemExit as finished:  # the run command ends with sys.exit(its exit code)
        return finished.code if isinstance(finished.code, int) else 1
    return 0


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)  # noqa: T201 - progress of a command-line tool


def _accepts(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _arguments(argv: list[str] | None) -> tuple[int, LongRun]:
    parser = argparse.ArgumentParser(prog="python -m outlast.fuzz", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help="the local stack's port: attach when it runs, else start",
    )
    parser.add_argument("--examples", type=int, default=DEFAULT_EXAMPLES, help="examples per operation")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="generation seed (reproducible)")
    parser.add_argument("--phases", default=LongRun.phases, help="schemathesis phases, comma-separated")
    parser.add_argument("--report-dir", type=Path, help="also write JUnit and NDJSON reports here")
    parsed = parser.parse_args(argv)
    return parsed.port, LongRun(parsed.examples, parsed.seed, parsed.phases, parsed.report_dir)


def main(argv: list[str] | None = None) -> int:
    """Attach to (or start) the local stack, fuzz it, print the summary; exit 0 when nothing failed."""
    from outlast.local.access import issue_token  # noqa: PLC0415
    from outlast.local.stack import LocalOptions, LocalStack, read_state  # noqa: PLC0415

    port, plan = _arguments(argv)
    stack: LocalStack | None = None
    try:
        if _accepts(port):
            state = read_state(port)
            _log(f"attached to the local stack at {state['apiUrl']}")
        else:
            stack = LocalStack(
                LocalOptions(port=port, cdk_out=FUZZ_CDK_OUT, context=dict(FUZZ_CONTEXT), log=_log)
            )
            stack.start()
            state = stack.describe()
            _log(f"started a local stack at {state['apiUrl']}")
        code = run(str(state["apiUrl"]), issue_token(state, FUZZ_USER, FUZZ_TENANT), plan)
        verdict = "no failures" if code == 0 else f"FAILURES (exit code {code})"
        _log(
            f"fuzz: {plan.examples} examples per operation, seed {plan.seed}, phases {plan.phases}: {verdict}"
        )
        return code
    finally:
        if stack is not None:
            _log("stopping the local stack...")
            stack.stop()


if __name__ == "__main__":
    sys.exit(main())
