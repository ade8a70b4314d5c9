"""Local mode enforces each function's role, and it bites (DESIGN.md, "Deploy fidelity").

A stack of its own runs a copy of the session's cloud assembly whose template lacks one grant:
the worker's `secretsmanager:GetSecretValue` on the OpenAI key. The worker's read of its key then
fails as it would in AWS (AccessDeniedException), the job's contract holds (it is handed back for
a retry, not lost and not failed for a reason of its own), and once the grant is back in the
template (the stack re-reads its roles when the template changes) the next attempt succeeds.
The worker's backoff base is raised to 8 s on this stack, so the grant is surely back in time.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from infra.names import OPENAI_SECRET, WORKER, FunctionName
from outlast.local.iam.denials import Denial
from outlast.local.synth import STACK_TEMPLATE, synthesize
from tests.e2e.conftest import E2E_CONTEXT
from tests.support.local_stack import (
    PROJECT_ROOT,
    RunningStack,
    request_hash,
    start_stack,
    stop_stack,
    unique,
)

SOURCE = PROJECT_ROOT / "cdk.out.e2e"  # the session stack's assembly (synthesized if stale)
REVOKED_ACTION = "secretsmanager:GetSecretValue"
BACKOFF_BASE_SECONDS = 8


@dataclass
class Revoked:
    """The stack whose template lacks the grant, and how to put the grant back."""

    stack: RunningStack
    template: Path
    original: str

    def restore(self) -> None:
        """Write the original template back in one step (the stack must never read half of it)."""
        handle, temporary = tempfile.mkstemp(dir=self.template.parent)
        with os.fdopen(handle, "w") as out:
            out.write(self.original)
        Path(temporary).replace(self.template)


def _without_grant(template: dict[str, Any], handler: str, action: str) -> int:
    """Remove `action` from every statement of the role of the function running `handler`."""
    resources = template["Resources"]
    (role,) = (
        r["Properties"]["Role"]["Fn::GetAtt"][0]
        for r in resources.values()
        if r["Type"] == "AWS::Lambda::Function" and r["Properties"].get("Handler") == handler
    )
    removed = 0
    for resource in resources.values():
        if resource["Type"] != "AWS::IAM::Policy" or {"Ref": role} not in resource["Properties"]["Roles"]:
            continue
        document = resource["Properties"]["PolicyDocument"]
        kept = []
        for statement in document["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            if action in actions:
                removed += 1
                actions = [a for a in actions if a != action]
            if actions:
                kept.append({**statement, "Action": actions})
        document["Statement"] = kept
    return removed


@pytest.fixture(scope="module")
def revoked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Revoked]:
    synthesize(SOURCE, E2E_CONTEXT)
    copy = tmp_path_factory.mktemp("iam") / "cdk.out"
    shutil.copytree(SOURCE, copy)
    template = copy / STACK_TEMPLATE
    original = template.read_text()
    body = json.loads(original)
    assert _without_grant(body, FunctionName.WORKER.handler, REVOKED_ACTION) == 1
    template.write_text(json.dumps(body))
    running = start_stack(
        copy,
        E2E_CONTEXT,
        ["--schedule-seconds", "2", "--env", f"BACKOFF_BASE_SECONDS={BACKOFF_BASE_SECONDS}"],
    )
    yield Revoked(running, template, original)
    stop_stack(running)  # its denials are this test's point: not checked like the others' stacks


def _first_denial(stack: RunningStack, timeout_seconds: float = 90) -> Denial:
    deadline = time.monotonic() + timeout_seconds
    while not (denials := stack.denials()):
        assert time.monotonic() < deadline, "nothing was denied"
        time.sleep(0.1)
    return denials[0]


def _handed_back(stack: RunningStack, job_id: str, token: str, timeout_seconds: float = 60) -> dict[str, Any]:
    """The job's document once it is Pending again after its first attempt."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        document: dict[str, Any] = stack.call("GET", f"/v1/jobs/{job_id}", token=token).body
        if document["status"] == "Pending" and document["attempts"] >= 1:
            return document
        assert document["status"] in {"Pending", "Running"}, document
        assert time.monotonic() < deadline, f"job {job_id} was never handed back: {document}"
        time.sleep(0.1)


def test_a_missing_grant_denies_the_call_and_the_job_succeeds_once_it_is_back(revoked: Revoked) -> None:
    stack = revoked.stack
    token = stack.token(unique("iam"))
    text = f"{unique('iam')}. The worker may not read its key yet."

    # When a job is submitted to a stack whose worker may not read the OpenAI key
    job_id = stack.submit(token, {"operation": "summarize", "input": {"text": text}}).body["jobId"]

    # Then the worker's read of its key is denied, as AWS would deny it, and recorded
    denial = _first_denial(stack)
    secrets = stack.state["secrets"].items()
    (secret,) = (arn for logical_id, arn in secrets if logical_id.startswith(WORKER + OPENAI_SECRET))
    assert denial.function in stack.state["functions"]
    assert denial.function.startswith(WORKER + FunctionName.WORKER.construct_id)
    assert (denial.action, denial.resource, denial.call) == (
        REVOKED_ACTION,
        secret,
        "secretsmanager.GetSecretValue",
    )
    # And the job is handed back for another attempt: not lost, not failed, no model call paid
    released = _handed_back(stack, job_id, token)
    assert released["error"] is None, released
    assert stack.model_calls(request_hash("summarize", text)) == []

    # When the grant is back in the template
    revoked.restore()

    # Then a later attempt reads the key and the job succeeds, with one model call
    document = stack.wait_terminal(job_id, token, timeout_seconds=120)
    assert document["status"] == "Succeeded", document
    assert document["attempts"] >= 2
    assert len(stack.model_calls(request_hash("summarize", text), at_least=1)) == 1
    assert stack.call("GET", f"/v1/jobs/{job_id}/result", token=token).status == 200
    # And every denial was that read, by the worker, before the grant came back
    assert {(d.action, d.resource) for d in stack.denials()} == {(REVOKED_ACTION, secret)}
