"""Every exit code a command's help lists is one it can return: a scenario per (command, code).

The commands' help lists only the codes the command declares (tests/unit/test_cli_help.py); here
each declared code is reached, against the fake API (user commands), moto (operator commands) or
the local authorization server (login); a scenario's parameters name the fixtures it needs. The
few that need a whole local stack are proven by the end-to-end test named in ELSEWHERE, which must
exist.
"""

from __future__ import annotations

import inspect
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest

from outlast.cli.app import cli
from outlast.cli.errors import ExitCode
from outlast.operator import webhooks as operator_webhooks
from outlast.operator.dlq import Redrive
from outlast.operator.job_redrive import JobsRedrive
from tests.integration.test_cli_client import FakeApi
from tests.integration.test_operator_dlq import World, create_world
from tests.support.aws import REGION, create_batches_table, create_webhooks_queues, create_webhooks_table
from tests.support.cli import run
from tests.unit.test_cli_help import _verbs

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
NO_STACK = ("--local", "--port", "1")  # no local stack answers there: a target error
UNKNOWN_JOB = str(uuid.uuid4())
UNKNOWN_ENDPOINT = "ep_0000000000000000"
PUBLIC_URL = "https://93.184.216.34/hook"  # a global address literal: the egress guard resolves nothing

Scenario = Callable[..., tuple[int, str, str]]
SCENARIOS: dict[tuple[str, int], Scenario] = {}
# Reached by an end-to-end test with a whole local stack (file, test function).
ELSEWHERE: dict[tuple[str, int], tuple[str, str]] = {
    ("local up", ExitCode.OK): (
        "tests/e2e/test_local_settings.py",
        "test_stopping_the_stack_leaves_nothing_behind",
    ),
    ("local token", ExitCode.OK): (
        "tests/e2e/test_cli_login.py",
        "test_local_token_prints_one_id_token_for_scripts",
    ),
    # A document's upload and ingest need the upload front, the notification and the ingest.
    **{
        (command, code): ("tests/e2e/test_cli_documents.py", test)
        for command, code, test in (
            ("documents upload", ExitCode.OK, "test_upload_then_summarize_the_document_then_delete_it"),
            ("documents upload", ExitCode.FAILED, "test_a_rejected_upload_exits_1_with_its_code"),
            ("documents upload", ExitCode.ERROR, "test_an_unknown_type_is_a_usage_error"),
            ("documents show", ExitCode.OK, "test_upload_then_summarize_the_document_then_delete_it"),
            ("documents show", ExitCode.ERROR, "test_upload_then_summarize_the_document_then_delete_it"),
            ("documents list", ExitCode.OK, "test_upload_then_summarize_the_document_then_delete_it"),
            ("documents list", ExitCode.ERROR, "test_a_foreign_cursor_or_document_is_an_error"),
            ("documents delete", ExitCode.OK, "test_upload_then_summarize_the_document_then_delete_it"),
            ("documents delete", ExitCode.ERROR, "test_a_foreign_cursor_or_document_is_an_error"),
        )
    },
}


def reaches(command: str, code: ExitCode) -> Callable[[Scenario], Scenario]:
    def register(scenario: Scenario) -> Scenario:
        SCENARIOS[(command, int(code))] = scenario
        return scenario

    return register


def _submitted(api: FakeApi, text: str) -> str:
    code, out, err = run("submit", "summarize", "--text", text, "--json")
    assert code == ExitCode.OK, err
    job_id: str = json.loads(out)["jobId"]
    return job_id


def _read_until(api: FakeApi, job_id: str, status: str) -> None:
    while api.jobs[job_id].state() != status:
        api.jobs[job_id].read()


# --- the user's commands ---------------------------------------------------------------------

reaches("completion", ExitCode.OK)(lambda: run("completion", "bash"))
reaches("submit", ExitCode.OK)(lambda api: run("submit", "summarize", "--text", "hi"))
reaches("submit", ExitCode.FAILED)(
    lambda api, fake_time: run("submit", "summarize", "--text", "fail", "--wait")
)
reaches("submit", ExitCode.ERROR)(lambda: run("submit", "summarize", "--text", "no token anywhere"))
reaches("submit", ExitCode.CANCELED)(
    lambda api, fake_time: run("submit", "summarize", "--text", "cancel", "--wait")
)
reaches("submit", ExitCode.STILL_RUNNING)(
    lambda api, fake_time: run("submit", "summarize", "--text", "slow", "--wait", "--timeout", "5")
)


@reaches("status", ExitCode.OK)
def _status_running(api: FakeApi) -> tuple[int, str, str]:
    return run("status", _submitted(api, "slow"))


@reaches("status", ExitCode.FAILED)
def _status_failed(api: FakeApi) -> tuple[int, str, str]:
    job_id = _submitted(api, "fail")
    _read_until(api, job_id, "Failed")
    return run("status", job_id)


reaches("status", ExitCode.ERROR)(lambda api: run("status", UNKNOWN_JOB))


@reaches("status", ExitCode.CANCELED)
def _status_canceled(api: FakeApi) -> tuple[int, str, str]:
    job_id = _submitted(api, "cancel")
    _read_until(api, job_id, "Canceled")
    return run("status", job_id)


@reaches("status", ExitCode.STILL_RUNNING)
def _status_waits_too_long(api: FakeApi, fake_time: Any) -> tuple[int, str, str]:
    return run("status", _submitted(api, "slow"), "--wait", "--timeout", "5")


@reaches("result", ExitCode.OK)
def _result(api: FakeApi) -> tuple[int, str, str]:
    job_id = _submitted(api, "done")
    _read_until(api, job_id, "Succeeded")
    return run("result", job_id)


reaches("result", ExitCode.ERROR)(lambda api: run("result", _submitted(api, "slow")))  # 409: not Succeeded
reaches("cancel", ExitCode.OK)(lambda api: run("cancel", _submitted(api, "slow")))


@reaches("cancel", ExitCode.ERROR)
def _cancel_ended(api: FakeApi) -> tuple[int, str, str]:
    job_id = _submitted(api, "fail")
    _read_until(api, job_id, "Failed")
    return run("cancel", job_id)  # 409: it already ended


def _streaming(api: FakeApi, *script: str) -> str:
    job_id = api.add_job(*script)
    api.jobs[job_id].stream = True
    return job_id


reaches("output", ExitCode.OK)(lambda api: run("output", _streaming(api, "Succeeded")))
reaches("output", ExitCode.FAILED)(
    lambda api, fake_time: run("output", _streaming(api, "Running", "Failed"), "--follow")
)
reaches("output", ExitCode.ERROR)(lambda api: run("output", api.add_job("Succeeded")))  # does not stream
reaches("output", ExitCode.CANCELED)(
    lambda api, fake_time: run("output", _streaming(api, "Running", "Canceled"), "--follow")
)
reaches("list", ExitCode.OK)(lambda api: run("list"))
reaches("list", ExitCode.ERROR)(lambda: run("list"))
reaches("budget", ExitCode.OK)(lambda api: run("budget"))
reaches("budget", ExitCode.ERROR)(lambda: run("budget"))
reaches("watch", ExitCode.OK)(lambda api, fake_time: run("watch", _submitted(api, "done")))
reaches("watch", ExitCode.FAILED)(lambda api, fake_time: run("watch", _submitted(api, "fail")))
reaches("watch", ExitCode.ERROR)(lambda api: run("watch"))  # the fake has no live updates
reaches("watch", ExitCode.CANCELED)(lambda api, fake_time: run("watch", _submitted(api, "cancel")))
reaches("login", ExitCode.OK)(lambda signin_server, browser: run(*signin_server.login_args()))
reaches("login", ExitCode.ERROR)(lambda: run("login"))
reaches("logout", ExitCode.OK)(lambda: run("logout"))


@reaches("logout", ExitCode.ERROR)
def _logout_unrevoked(
    signin_server: Any, browser: Any, monkeypatch: pytest.MonkeyPatch
) -> tuple[int, str, str]:
    assert run(*signin_server.login_args())[0] == ExitCode.OK
    monkeypatch.setattr("outlast.auth.oauth.AuthServer.revoke", _unreachable)
    return run("logout")


def _unreachable(*_: Any) -> None:
    from outlast.api.http import ApiUnreachableError  # noqa: PLC0415

    raise ApiUnreachableError("http://127.0.0.1:1", "Connection refused")


reaches("local up", ExitCode.ERROR)(lambda: run("local", "up", "--port", "1", "--chaos", "{not json"))
reaches("local token", ExitCode.ERROR)(lambda: run("local", "token", "--user", "u", "--port", "1"))


# --- the operator's commands -----------------------------------------------------------------


@pytest.fixture
def ops_world(moto_endpoint: str, resources: Any, capsys: pytest.CaptureFixture[str]) -> World:
    queue_url, dlq_url = create_webhooks_queues(moto_endpoint)
    outputs = {
        "BudgetsTableName": resources.budgets_table,
        "WebhooksTableName": create_webhooks_table(moto_endpoint),
        "WebhooksQueueUrl": queue_url,
        "WebhooksDlqUrl": dlq_url,
    }
    return create_world(moto_endpoint, resources, capsys, outputs)


def _ops(world: World, *argv: str) -> tuple[int, str, str]:
    return run("ops", *argv, "--stack-name", world.stack_name, "--region", REGION)


def _endpoint(world: World) -> str:
    code, out, err = _ops(world, "webhooks", "add", "--tenant", "acme", "--url", PUBLIC_URL, "--json")
    assert code == ExitCode.OK, err
    endpoint_id: str = json.loads(out)["endpointId"]
    return endpoint_id


def _interrupt(*_: Any, **__: Any) -> None:
    raise KeyboardInterrupt  # fault injection: Ctrl-C while the run acts


for command in (
    "dlq list",
    "dlq redrive --all",
    "jobs inspect " + UNKNOWN_JOB,
    "jobs redrive " + UNKNOWN_JOB,
    "budgets set --tenant acme --unlimited",
    "budgets show",
    "tenants set --tenant acme --max-running 3",
    "tenants show --tenant acme",
    "webhooks add --tenant acme --url " + PUBLIC_URL,
    "webhooks list",
    "webhooks remove " + UNKNOWN_ENDPOINT,
    "webhooks enable " + UNKNOWN_ENDPOINT,
    "webhooks rotate " + UNKNOWN_ENDPOINT,
    "webhooks deliveries",
    "webhooks redrive --all",
):
    words = command.split()
    reaches("ops " + " ".join(words[:2]), ExitCode.ERROR)(lambda words=words: run("ops", *words, *NO_STACK))

reaches("ops dlq list", ExitCode.OK)(lambda ops_world: _ops(ops_world, "dlq", "list"))


@reaches("ops dlq redrive", ExitCode.OK)
def _dlq_redrive(ops_world: World) -> tuple[int, str, str]:
    failed = ops_world.failed()
    ops_world.to_dlq(failed)
    return _ops(ops_world, "dlq", "redrive", "--job-id", failed.job_id)


reaches("ops dlq redrive", ExitCode.FAILED)(
    lambda ops_world: _ops(ops_world, "dlq", "redrive", "--job-id", UNKNOWN_JOB)
)


@reaches("ops dlq redrive", ExitCode.INTERRUPTED)
def _dlq_redrive_interrupted(ops_world: World, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    ops_world.to_dlq(ops_world.failed())
    monkeypatch.setattr(Redrive, "run", _interrupt)
    return _ops(ops_world, "dlq", "redrive", "--all")


reaches("ops jobs inspect", ExitCode.OK)(
    lambda ops_world: _ops(ops_world, "jobs", "inspect", ops_world.failed().job_id)
)
reaches("ops jobs inspect", ExitCode.FAILED)(
    lambda ops_world: _ops(ops_world, "jobs", "inspect", UNKNOWN_JOB)
)
reaches("ops jobs redrive", ExitCode.OK)(
    lambda ops_world: _ops(ops_world, "jobs", "redrive", ops_world.failed().job_id)
)
reaches("ops jobs redrive", ExitCode.FAILED)(
    lambda ops_world: _ops(ops_world, "jobs", "redrive", UNKNOWN_JOB)
)


@reaches("ops jobs redrive", ExitCode.INTERRUPTED)
def _jobs_redrive_interrupted(ops_world: World, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    monkeypatch.setattr(JobsRedrive, "run", _interrupt)
    return _ops(ops_world, "jobs", "redrive", ops_world.failed().job_id)


reaches("ops budgets set", ExitCode.OK)(
    lambda ops_world: _ops(ops_world, "budgets", "set", "--tenant", "acme", "--monthly-tokens", "1000")
)
reaches("ops budgets show", ExitCode.OK)(
    lambda ops_world: _ops(ops_world, "budgets", "show", "--tenant", "acme")
)
reaches("ops tenants set", ExitCode.OK)(
    lambda ops_world: _ops(ops_world, "tenants", "set", "--tenant", "acme", "--max-running", "3")
)
reaches("ops tenants show", ExitCode.OK)(
    lambda ops_world: _ops(ops_world, "tenants", "show", "--tenant", "acme")
)
reaches("ops batches list", ExitCode.ERROR)(
    lambda ops_world: _ops(ops_world, "batches", "list")
)  # no batch tier


@reaches("ops batches list", ExitCode.OK)
def _batches_listed(
    moto_endpoint: str, resources: Any, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    outputs = {"BatchesTableName": create_batches_table(moto_endpoint)}
    return _ops(create_world(moto_endpoint, resources, capsys, outputs), "batches", "list")


reaches("ops webhooks add", ExitCode.OK)(
    lambda ops_world: _ops(ops_world, "webhooks", "add", "--tenant", "acme", "--url", PUBLIC_URL)
)
reaches("ops webhooks list", ExitCode.OK)(lambda ops_world: _ops(ops_world, "webhooks", "list"))
reaches("ops webhooks remove", ExitCode.OK)(
    lambda ops_world: _ops(ops_world, "webhooks", "remove", _endpoint(ops_world))
)
reaches("ops webhooks remove", ExitCode.FAILED)(
    lambda ops_world: _ops(ops_world, "webhooks", "remove", UNKNOWN_ENDPOINT)
)
reaches("ops webhooks enable", ExitCode.OK)(
    lambda ops_world: _ops(ops_world, "webhooks", "enable", _endpoint(ops_world))
)
reaches("ops webhooks enable", ExitCode.FAILED)(
    lambda ops_world: _ops(ops_world, "webhooks", "enable", UNKNOWN_ENDPOINT)
)
reaches("ops webhooks rotate", ExitCode.OK)(
    lambda ops_world: _ops(ops_world, "webhooks", "rotate", _endpoint(ops_world))
)


@reaches("ops webhooks rotate", ExitCode.FAILED)
def _rotate_during_an_overlap(ops_world: World) -> tuple[int, str, str]:
    endpoint_id = _endpoint(ops_world)
    assert _ops(ops_world, "webhooks", "rotate", endpoint_id)[0] == ExitCode.OK
    return _ops(ops_world, "webhooks", "rotate", endpoint_id)  # the previous secret still signs: --force


reaches("ops webhooks deliveries", ExitCode.OK)(lambda ops_world: _ops(ops_world, "webhooks", "deliveries"))
reaches("ops webhooks deliveries", ExitCode.FAILED)(
    lambda ops_world: _ops(ops_world, "webhooks", "deliveries", UNKNOWN_ENDPOINT)
)
reaches("ops webhooks redrive", ExitCode.OK)(
    lambda ops_world: _ops(ops_world, "webhooks", "redrive", "--all")
)


@reaches("ops webhooks redrive", ExitCode.FAILED)
def _webhooks_redrive_keeps_the_unreadable(ops_world: World, moto_endpoint: str) -> tuple[int, str, str]:
    _webhooks_dlq_message(ops_world, moto_endpoint)
    return _ops(ops_world, "webhooks", "redrive", "--all")  # keep-unreadable


@reaches("ops webhooks redrive", ExitCode.INTERRUPTED)
def _webhooks_redrive_interrupted(
    ops_world: World, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[int, str, str]:
    _webhooks_dlq_message(ops_world, moto_endpoint)
    monkeypatch.setattr(operator_webhooks, "run", _interrupt)
    return _ops(ops_world, "webhooks", "redrive", "--all")


def _webhooks_dlq_message(world: World, moto_endpoint: str) -> None:
    outputs = boto3.client("cloudformation", endpoint_url=moto_endpoint, region_name=REGION).describe_stacks(
        StackName=world.stack_name
    )["Stacks"][0]["Outputs"]
    dlq_url = next(o["OutputValue"] for o in outputs if o["OutputKey"] == "WebhooksDlqUrl")
    boto3.client("sqs", endpoint_url=moto_endpoint, region_name=REGION).send_message(
        QueueUrl=dlq_url, MessageBody="not a webhook delivery"
    )


# --- the proof -------------------------------------------------------------------------------


def _declared() -> set[tuple[str, int]]:
    return {
        (path.removeprefix("outlast "), int(code)) for path, verb in _verbs(cli) for code in verb.exit_codes
    }


def test_every_listed_exit_code_has_a_scenario_and_nothing_else_does():
    assert set(SCENARIOS) | set(ELSEWHERE) == _declared()
    assert not set(SCENARIOS) & set(ELSEWHERE)


@pytest.mark.parametrize("reached", sorted(ELSEWHERE), ids=lambda key: f"{key[0]} -> {key[1]}")
def test_the_end_to_end_proofs_exist(reached):
    path, function = ELSEWHERE[reached]
    assert f"def {function}(" in (ROOT / path).read_text()


@pytest.mark.parametrize("reached", sorted(SCENARIOS), ids=lambda key: f"{key[0]} -> {key[1]}")
def test_the_command_returns_the_code(reached, request: pytest.FixtureRequest):
    scenario = SCENARIOS[reached]
    # Its parameters name the fixtures it needs (those with a default are its own: the loop's `words`).
    parameters = inspect.signature(scenario).parameters.values()
    fixtures = {
        p.name: request.getfixturevalue(p.name) for p in parameters if p.default is inspect.Parameter.empty
    }

    code, out, err = scenario(**fixtures)

    assert code == reached[1], (out, err)
