"""The cold-start benchmark's child looks like Lambda to the libraries the functions import."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from outlast.bench.coldstart import FLOOR_LIBRARIES, lambda_variables, library_versions
from outlast.bench.harness import FunctionSpec
from outlast.local.lambda_runtime import host_environment

pytestmark = pytest.mark.integration

# What aws-xray-sdk's global recorder chose at import: a fresh interpreter per question.
PROBE = "from aws_xray_sdk.core import xray_recorder; print(type(xray_recorder.sampler).__name__)"


def _spec(code_dir: Path) -> FunctionSpec:
    return FunctionSpec(
        name="status",
        logical_id="ApiStatusFunction98D15A9A",
        module="functions.status.handler",
        memory_mb=512,
        timeout_seconds=10,
        environment={},
        handler="functions.status.handler.lambda_handler",
        code_dir=code_dir,
        log_format="JSON",
        log_level="INFO",
        system_log_level="WARN",
        traced=False,
    )


def _sampler(environment: dict[str, str], cwd: Path) -> str:
    completed = subprocess.run(  # noqa: S603 - our own interpreter and a fixed probe
        [sys.executable, "-c", PROBE],
        cwd=cwd,
        env={**host_environment(), "AWS_REGION": "us-east-1", **environment},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return completed.stdout.strip()


def test_the_lambda_variables_are_the_runtimes(tmp_path):
    variables = lambda_variables(_spec(tmp_path))

    assert variables["LAMBDA_TASK_ROOT"] == str(tmp_path)
    assert variables["AWS_EXECUTION_ENV"] == "AWS_Lambda_python3.13"
    assert variables["AWS_LAMBDA_FUNCTION_NAME"] == "outlast-ApiStatusFunction98D15A9A"
    assert variables["_HANDLER"] == "functions.status.handler.lambda_handler"
    assert variables["_X_AMZN_TRACE_ID"].startswith("Root=1-")
    assert (variables["AWS_LAMBDA_LOG_FORMAT"], variables["AWS_LAMBDA_LOG_LEVEL"]) == ("JSON", "INFO")
    assert variables["AWS_LAMBDA_RUNTIME_API"].startswith("127.0.0.1:")


def test_with_them_aws_xray_sdk_builds_no_centralized_sampler(tmp_path):
    # Given a fresh interpreter without and with the Lambda runtime's variables
    outside = _sampler({}, tmp_path)
    inside = _sampler(lambda_variables(_spec(tmp_path)), tmp_path)

    # Then outside Lambda the SDK builds its centralized sampler (and its X-Ray client) at import,
    # and inside it keeps to the local one, as in Lambda
    assert outside == "DefaultSampler"
    assert inside == "LocalSampler"


# Which distributions a fresh interpreter has loaded once the given code ran.
LOADED = (
    "import json, sys\n"
    "from importlib import metadata\n"
    "exec(sys.argv[1])\n"
    "owners = metadata.packages_distributions()\n"
    "top = {name.split('.')[0] for name in list(sys.modules)}\n"
    "print(json.dumps(sorted({d.lower().replace('_', '-') for t in top for d in owners.get(t, [])})))\n"
)
# What each design's functions load up to their first answer: the handler, and for the worker what
# its first job adds (the provider's openai client; Powertools' Parameters for the key).
DESIGN_LOADS = {
    "apiFloor": ["import functions.status.handler", "import functions.submit.handler"],
    "workerFloor": [
        "import functions.worker.handler\n"
        "from aws_lambda_powertools.utilities.parameters import SecretsProvider\n"
        "from functions.worker.provider import build_openai_client\n"
        "build_openai_client('sk-probe', 'http://127.0.0.1:9/v1', 1.0)"
    ],
}


def _loaded(code: str) -> set[str]:
    completed = subprocess.run(  # noqa: S603 - our own interpreter and a fixed probe
        [sys.executable, "-c", LOADED, code],
        env={**host_environment(), "AWS_REGION": "us-east-1", "POWERTOOLS_TRACE_DISABLED": "false"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return set(json.loads(completed.stdout))


def _pins() -> dict[str, str]:
    lock = Path(__file__).resolve().parents[2] / "requirements" / "dev.txt"
    found = re.findall(r"^([A-Za-z0-9_.-]+)==([^\s\\]+)", lock.read_text(), flags=re.MULTILINE)
    return {name.lower().replace("_", "-"): version for name, version in found}


@pytest.mark.parametrize("floor", sorted(FLOOR_LIBRARIES))
def test_a_floor_loads_only_libraries_its_functions_load_at_the_locked_versions(floor: str) -> None:
    # Given the libraries a floor is measured with (fixed in the bench, not read from the functions)
    libraries = set(FLOOR_LIBRARIES[floor])

    # Then every function of its design loads each of them today (a floor is never above them) ...
    for code in DESIGN_LOADS[floor]:
        assert libraries <= _loaded(code), code
    # ... and the floor runs them at the versions the lock pins
    pins = _pins()
    assert library_versions(floor) == {library: pins[library] for library in FLOOR_LIBRARIES[floor]}
