"""One contract for the step checkpoints: the in-memory fake and the DynamoDB adapter (on moto)
agree, so the worker's unit tests with the fake say what the worker does against DynamoDB."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from shared.adapters.step_checkpoints import DynamoStepStore
from shared.ids import new_job_id
from shared.job import StepOutput, Usage
from shared.ports import StepStore
from tests.fakes import InMemoryStepStore
from tests.support.storage import Storage

if TYPE_CHECKING:
    from tests.support.aws import TestResources

pytestmark = pytest.mark.integration

NOW = datetime.now(UTC).replace(microsecond=0)
LATER = NOW + timedelta(hours=24)


@pytest.fixture(params=["fake", "dynamodb"])
def store(request: pytest.FixtureRequest) -> StepStore:
    if request.param == "fake":
        return InMemoryStepStore()
    resources: TestResources = request.getfixturevalue("resources")
    storage = Storage(resources)
    return DynamoStepStore(storage.dynamodb, resources.jobs_table)


def _step(job_id: str, step_id: str, output: str, tokens: int = 5) -> StepOutput:
    return StepOutput(
        job_id=job_id, step_id=step_id, output=output, usage=Usage(input_tokens=tokens, output_tokens=1)
    )


def test_a_checkpoint_is_written_once_and_the_first_one_comes_back(store: StepStore) -> None:
    job_id = new_job_id()
    first, second = _step(job_id, "m0000", "first", 5), _step(job_id, "m0000", "second", 9)

    assert store.put_step(first, LATER) == first
    assert store.put_step(second, LATER) == first
    assert store.get_steps(job_id, NOW) == {"m0000": first}


def test_the_checkpoints_of_a_job_are_its_own(store: StepStore) -> None:
    mine, theirs = new_job_id(), new_job_id()
    steps = [_step(mine, f"m{n:04d}", f"part {n}") for n in range(3)]
    for step in steps:
        store.put_step(step, LATER)
    store.put_step(_step(theirs, "m0000", "not mine"), LATER)

    assert store.get_steps(mine, NOW) == {step.step_id: step for step in steps}


def test_an_expired_checkpoint_is_gone_and_a_renewed_one_is_not(store: StepStore) -> None:
    job_id = new_job_id()
    soon = NOW + timedelta(seconds=30)
    store.put_step(_step(job_id, "m0000", "a"), soon)
    store.put_step(_step(job_id, "m0001", "b"), soon)

    store.set_steps_expiry(job_id, ["m0001", "m0404"], LATER)

    assert set(store.get_steps(job_id, soon + timedelta(seconds=1))) == {"m0001"}
    assert store.get_steps(new_job_id(), NOW) == {}
