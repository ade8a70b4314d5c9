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
import uuid
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


def freshen_idempotency_key(case: Case) -> None:
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


def load_schema() -> BaseSchema:
    """The committed document, configured for the authenticated stack and the checks above."""
    import schemathesis  # noqa: PLC0415 - a dev dependency; the CLI must import without it

    schema = schemathesis.openapi.from_path(DOCUMENT)
    configure(schema.config)
    return schema


def configure(config: Any) -> None:
    """Checks and generation settings shared by the short and the long run."""
    # The document's security scheme would make schemathesis generate (and drop) Authorization
    # values of its own; every request carries the real token instead.
    config.generation.update(with_security_parameters=False)
    config.checks.update(included_check_names=list(CHECKS))


# --- the long run: `python -m outlast.fuzz` -----------------------------------------------------


def before_call(context: HookContext, case: Case, kwargs: dict[str, Any]) -> None:
    """schemathesis hook (registered by `run`): a fresh key for every submit it sends."""
    del context, kwargs
    freshen_idempotency_key(case)


def _accepts(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def run(api_url: str, token: str, examples: int, seed: int, phases: str, report_dir: Path | None) -> int:
    """schemathesis' `st run` in this process against `api_url`; its exit code (0: no failures)."""
    import schemathesis  # noqa: PLC0415
    from schemathesis.cli import schemathesis as cli  # noqa: PLC0415

    schemathesis.hook(before_call)
    arguments = [
        "run",
        str(DOCUMENT),
        "--url",
        api_url,
        "--header",
        f"Authorization: Bearer {token}",
        "--checks",
        ",".join(CHECKS),
        "--generation-with-security-parameters",
        "false",
        "--max-examples",
        str(examples),
        "--seed",
        str(seed),
        "--phases",
        phases,
        # moto breaks under concurrent writers on stream-enabled tables (DESIGN.md): one at a time.
        "--workers",
        "1",
        "--request-timeout",
        "30",
        "--continue-on-failure",
    ]
    if report_dir is not None:
        arguments += ["--report", "junit,ndjson", "--report-dir", str(report_dir)]
    code = cli.main(arguments, prog_name="st", standalone_mode=False)
    return int(code or 0)


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m outlast.fuzz", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help="the local stack's port: attach when it runs, else start"
    )
    parser.add_argument(
        "--examples", type=int, default=DEFAULT_EXAMPLES, help="examples per operation and phase"
    )
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="the generation seed (reproducible runs)")
    parser.add_argument(
        "--phases", default="examples,coverage,fuzzing,stateful", help="schemathesis phases, comma-separated"
    )
    parser.add_argument("--report-dir", type=Path, help="write JUnit and NDJSON reports here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Attach to (or start) the local stack, fuzz it, print the summary; exit 0 when nothing failed."""
    from outlast.commands.local import issue_token  # noqa: PLC0415
    from outlast.local.stack import LocalOptions, LocalStack, read_state  # noqa: PLC0415

    arguments = _arguments(argv)
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731, T201
    stack: LocalStack | None = None
    try:
        if _accepts(arguments.port):
            state = read_state(arguments.port)
            log(f"attached to the local stack at {state['apiUrl']}")
        else:
            options = LocalOptions(port=arguments.port, cdk_out=FUZZ_CDK_OUT, context=dict(FUZZ_CONTEXT), log=log)
            stack = LocalStack(options)
            stack.start()
            state = stack.describe()
            log(f"started the local stack at {state['apiUrl']}")
        token = issue_token(state, FUZZ_USER, FUZZ_TENANT)
        return run(
            str(state["apiUrl"]), token, arguments.examples, arguments.seed, arguments.phases, arguments.report_dir
        )
    finally:
        if stack is not None:
            log("stopping the local stack...")
            stack.stop()


if __name__ == "__main__":
    sys.exit(main())
