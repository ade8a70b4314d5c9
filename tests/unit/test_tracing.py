"""The tracer: botocore patched when tracing is on; off, a provider that imports nothing of X-Ray."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest

from shared.observability import NoTracing, tracing_disabled

# What a fresh interpreter made of the tracer once the module was imported: a new process per
# question, because Powertools' tracer keeps its configuration on the class.
PROBE = """
import json, sys
from shared import observability
from aws_xray_sdk.core import patcher
print(json.dumps({
    "provider": type(observability.tracer.provider).__name__,
    "disabled": observability.tracer.disabled,
    "recorder_imported_first": RECORDER,
    "patched": sorted(patcher._PATCHED_MODULES),
}))
"""


def _probe(**environment: str) -> dict[str, object]:
    # Whether the X-Ray recorder was imported by the module itself is read before the probe's
    # own import of the patcher brings it in.
    code = PROBE.replace(
        "from aws_xray_sdk.core import patcher",
        "RECORDER = 'aws_xray_sdk.core' in sys.modules\nfrom aws_xray_sdk.core import patcher",
    )
    env = {k: v for k, v in os.environ.items() if k != "POWERTOOLS_TRACE_DISABLED"}
    completed = subprocess.run(  # noqa: S603 - our own interpreter and a fixed probe
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**env, "AWS_REGION": "us-east-1", **environment},
    )
    result: dict[str, object] = json.loads(completed.stdout)
    return result


def test_with_tracing_off_nothing_of_xray_is_imported_or_patched() -> None:
    # Given a function deployed without tracing (the API functions, unless apiTracing)
    probe = _probe(POWERTOOLS_TRACE_DISABLED="true", LAMBDA_TASK_ROOT="/var/task")

    # Then its tracer records nothing and its import loaded no X-Ray recorder and patched nothing
    assert probe == {
        "provider": "NoTracing",
        "disabled": True,
        "recorder_imported_first": False,
        "patched": [],
    }


def test_with_tracing_on_only_botocore_is_patched() -> None:
    # Given a traced function in Lambda (the relay, the worker, the sweeper)
    probe = _probe(LAMBDA_TASK_ROOT="/var/task")

    # Then its tracer is X-Ray's recorder, and it patched the AWS SDK and nothing else
    assert probe["provider"] == "AsyncAWSXRayRecorder"
    assert probe["disabled"] is False
    assert probe["patched"] == ["botocore"]


@pytest.mark.parametrize(("value", "disabled"), [("true", True), ("1", True), ("False", False), ("", False)])
def test_the_variable_reads_as_powertools_reads_it(
    monkeypatch: pytest.MonkeyPatch, value: str, disabled: bool
) -> None:
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", value)

    assert tracing_disabled() is disabled


def test_the_provider_that_records_nothing_still_runs_the_traced_code() -> None:
    provider = NoTracing()
    ran: list[str] = []

    with provider.in_subsegment(name="## handler") as segment:
        segment.put_annotation(key="ColdStart", value=True)
        segment.put_metadata(key="response", value={"ok": True})
        ran.append("sync")

    async def traced() -> None:
        async with provider.in_subsegment_async(name="## call") as segment:
            segment.put_annotation(key="Service", value="status")
            ran.append("async")

    asyncio.run(traced())

    assert ran == ["sync", "async"]
