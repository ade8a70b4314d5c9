"""Long inputs run as checkpointed steps (DESIGN.md, "Long inputs: jobs in checkpointed steps").

The stack plans with small chunks here (chunkTokens 1000, stepOutputTokens 100), and each test's
text is paragraphs of about 3 KB, so that every paragraph is one chunk: chunk N is paragraph N,
and a directive in a paragraph affects that chunk's map call only. Calls are counted per step from
the model server's own log (`part` for a map call, `kind` reduce for a reduce).
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest

from functions.worker.service import JobWorker
from outlast.local.model_server import ModelServer
from shared.contract import Operation
from shared.plan_parameters import PlanParameters
from shared.planner import StepKind, StepPlan, plan_job
from shared.prompts import template_for
from tests.support.faults import WorkerCrash
from tests.support.pipeline import Pipeline

pytestmark = pytest.mark.integration

PARAMETERS = PlanParameters(chunk_tokens=1000, step_output_tokens=100)
CHUNKS = 8


@pytest.fixture
def steps_pipeline(patient_pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch) -> Pipeline:
    """The pipeline, with submit planning in small chunks and two steps of a job at once."""
    monkeypatch.setenv("CHUNK_TOKENS", str(PARAMETERS.chunk_tokens))
    monkeypatch.setenv("STEP_OUTPUT_TOKENS", str(PARAMETERS.step_output_tokens))
    monkeypatch.setenv("STEP_CONCURRENCY", "2")
    return patient_pipeline


def document(marks: dict[int, str] | None = None, chunks: int = CHUNKS) -> str:
    """`chunks` paragraphs of about 3 KB, paragraph N (from 1) carrying `marks[N]` if given."""
    paragraphs = []
    for number in range(1, chunks + 1):
        sentences = [
            f"Section {number}, sentence {line}: the ledger of the quarter moved as planned."
            for line in range(40)
        ]
        mark = (marks or {}).get(number)
        if mark:
            sentences.insert(20, mark)
        paragraphs.append(" ".join(sentences))
    return "\n\n".join(paragraphs)


def planned(text: str) -> StepPlan:
    """The plan submit makes of `text` (a test's own copy, to know what to expect)."""
    plan = plan_job(
        text, Operation.SUMMARIZE, PARAMETERS, prompt_version=template_for(Operation.SUMMARIZE).version
    )
    assert len(plan.chunks) == CHUNKS  # one chunk per paragraph: the directives land where meant
    return plan


def body(text: str) -> dict[str, Any]:
    return {"operation": "summarize", "input": {"text": text}}


def calls_per_step(pipeline: Pipeline) -> Counter[str]:
    """Model calls by step: `m3` is the map call of chunk 3 (counted from 1), `reduce` every reduce."""
    counted: Counter[str] = Counter()
    for call in pipeline.model_calls():
        counted["reduce" if call["kind"] == "reduce" else f"m{call['part']}"] += 1
    return counted


def one_call_each(plan: StepPlan) -> Counter[str]:
    reduces = sum(step.kind is StepKind.REDUCE for step in plan.steps)
    return Counter({**{f"m{n}": 1 for n in range(1, CHUNKS + 1)}, "reduce": reduces})


def test_a_long_input_succeeds_in_its_planned_steps_with_one_call_each(steps_pipeline: Pipeline) -> None:
    pipeline = steps_pipeline
    # Given a long input, planned in steps at submit
    text = document()
    plan = planned(text)
    accepted = pipeline.submit(body(text), key="long")["body"]
    assert accepted["progress"] == {"completedSteps": 0, "totalSteps": plan.total_steps}

    # When it runs
    [final], history = pipeline.terminal_with_history(accepted["jobId"], timeout_seconds=60)

    # Then it succeeded with every step done, progress only ever moving forward
    assert final["status"] == "Succeeded"
    assert final["progress"] == {"completedSteps": plan.total_steps, "totalSteps": plan.total_steps}
    seen = [d["progress"]["completedSteps"] for d in history]
    assert seen == sorted(seen)
    # ... with one model call per step, its usage the sum of theirs, and the reduce's answer as result
    assert calls_per_step(pipeline) == one_call_each(plan)
    result = pipeline.result(accepted["jobId"])["body"]
    assert result["output"]
    assert final["usage"]["inputTokens"] > 0
    assert result["usage"] == final["usage"]
    assert final["attempts"] == 1


def test_a_rate_limit_in_chunk_3_costs_exactly_two_extra_calls_of_that_chunk(
    steps_pipeline: Pipeline,
) -> None:
    pipeline = steps_pipeline
    # Given a long input whose third chunk meets two 429s
    text = document({3: "[[fault:rate_limit*2]]"})
    plan = planned(text)
    job_id = pipeline.submit(body(text), key="long-429")["body"]["jobId"]

    # When it runs to the end (each 429 hands the job back with backoff)
    [final] = pipeline.terminal(job_id, timeout_seconds=90)

    # Then it succeeded, and the only extra calls are chunk 3's two refused ones
    assert final["status"] == "Succeeded"
    expected = one_call_each(plan)
    expected["m3"] += 2
    assert calls_per_step(pipeline) == expected
    outcomes = [c["outcome"] for c in pipeline.model_calls() if c["part"] == 3]
    assert sorted(outcomes) == ["ok", "rate_limit", "rate_limit"]


def test_a_job_released_many_more_times_than_the_redrive_policy_allows_receives_succeeds(
    steps_pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A healthy job handed back again and again is never dead-lettered: each hand-back is a fresh
    delayed message, so the queue's receive count (maxReceiveCount = maxAttempts + 3 = 6) counts
    crashes only. The crash loop it must still catch: tests/integration/pipeline/test_poison.py."""
    pipeline = steps_pipeline
    monkeypatch.setenv("STEP_CONCURRENCY", "1")
    monkeypatch.setenv("BACKOFF_CAP_SECONDS", "1")  # a second between claims, as Retry-After says
    chunks = 14
    # Given a long input each of whose chunks is refused once (429) before it is answered: the job
    # is handed back after every step, 14 times, each release after progress
    text = document(dict.fromkeys(range(1, chunks + 1), "[[fault:rate_limit*1]]"), chunks=chunks)
    job_id = pipeline.submit(body(text), key="long-releases")["body"]["jobId"]

    # When it runs (no sweeper: only the worker's own messages can carry it on), until it ends or
    # its message is dead-lettered
    def ended_or_dead_lettered() -> bool:
        ended = pipeline.status(job_id)["status"] in {"Succeeded", "Failed", "Canceled"}
        return ended or pipeline.queue_depth(pipeline.queues.dlq_url) > 0

    pipeline.pump(ended_or_dead_lettered, timeout_seconds=120)

    # Then it succeeded after more than twice maxReceiveCount hand-backs, and nothing reached the DLQ
    assert pipeline.queue_depth(pipeline.queues.dlq_url) == 0
    final = pipeline.status(job_id)
    assert final["status"] == "Succeeded"
    refused = [call for call in pipeline.model_calls() if call["outcome"] == "rate_limit"]
    assert len(refused) == chunks
    assert final["attempts"] == chunks + 1
    assert pipeline.queue_depth(pipeline.queues.jobs_url) == 0


def test_a_worker_killed_after_k_steps_resumes_with_only_the_missing_ones(
    steps_pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = steps_pipeline
    monkeypatch.setenv("STEP_CONCURRENCY", "1")  # one step at a time: the crash point is exact
    k = 3
    # Given a worker that dies while checkpointing the (k+1)-th step: k are written, one answer lost
    original = JobWorker._checkpoint_step
    before_crash: list[dict[str, Any]] = []

    async def dying(self: JobWorker, run: Any, step: Any, completion: Any) -> Any:
        if not before_crash and step.step_id == f"m{k:04d}":
            before_crash.extend(pipeline.model_calls())
            raise WorkerCrash("the worker dies between an answer and its checkpoint")
        return await original(self, run, step, completion)

    monkeypatch.setattr(JobWorker, "_checkpoint_step", dying)
    text = document()
    plan = planned(text)
    job_id = pipeline.submit(body(text), key="long-crash")["body"]["jobId"]

    # When the job runs, its worker dies, the sweeper expires the lease and the job runs again
    [final] = pipeline.terminal(job_id, sweep=True, timeout_seconds=90)

    # Then it succeeded: before the crash the first k + 1 map calls, after it exactly the n - k
    # steps that had no checkpoint, each once
    assert final["status"] == "Succeeded"
    assert (final["attempts"], final["crashes"]) == (2, 1)
    assert sorted(c["part"] for c in before_crash) == list(range(1, k + 2))
    after = pipeline.model_calls()[len(before_crash) :]
    missing = {f"m{n}" for n in range(k + 1, CHUNKS + 1)} | {"reduce"}
    counted = Counter("reduce" if c["kind"] == "reduce" else f"m{c['part']}" for c in after)
    assert set(counted) == missing
    assert counted["reduce"] == sum(step.kind is StepKind.REDUCE for step in plan.steps)
    assert all(counted[step] == 1 for step in missing - {"reduce"})


def test_a_content_policy_refusal_in_one_chunk_fails_the_job_with_that_code(steps_pipeline: Pipeline) -> None:
    pipeline = steps_pipeline
    text = document({5: "[[fault:content_policy]]"})
    planned(text)
    job_id = pipeline.submit(body(text), key="long-policy")["body"]["jobId"]

    [final] = pipeline.terminal(job_id, timeout_seconds=60)

    assert final["status"] == "Failed"
    assert final["error"]["code"] == "content_policy"
    # No reduce was ever called: the map phase stopped at the refusal
    assert calls_per_step(pipeline)["reduce"] == 0
    assert final["progress"]["completedSteps"] < final["progress"]["totalSteps"]


def test_a_claim_starts_no_step_it_cannot_finish_and_is_released_with_its_checkpoints(
    steps_pipeline: Pipeline, model_server: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = steps_pipeline
    monkeypatch.setenv("STEP_CONCURRENCY", "1")
    monkeypatch.setenv("PROVIDER_TIMEOUT_SECONDS", "3")
    # Given a job whose steps take a second each, and a worker invoked with an 8 s timeout: with
    # the 2 s release margin, a step may start only while 3 s (the provider's timeout) are left
    # before its release deadline, 6 s in
    text = document(dict.fromkeys(range(1, CHUNKS + 1), "[[delay:1]]"))
    plan = planned(text)
    job_id = pipeline.submit(body(text), key="long-release")["body"]["jobId"]
    assert pipeline.relay.poll() == 1
    pipeline.set_worker_timeout(8)

    # When that invocation runs
    assert pipeline.worker.poll() == 1

    # Then it handed the job back (Pending, never failed) with the steps it finished checkpointed
    released = pipeline.status(job_id)
    assert released["status"] == "Pending"
    assert 0 < released["progress"]["completedSteps"] < plan.total_steps

    # When it runs again with time enough
    pipeline.set_worker_timeout(30)
    [final] = pipeline.terminal(job_id, timeout_seconds=60)

    # Then every step was called once: none was started, abandoned at the deadline and paid again,
    # and no checkpointed step was called again
    assert final["status"] == "Succeeded"
    pipeline.wait_for(lambda: model_server.in_flight == 0)
    assert calls_per_step(pipeline) == one_call_each(plan)


def test_a_cancel_during_the_map_phase_ends_canceled_with_the_usage_kept(
    steps_pipeline: Pipeline, model_server: ModelServer
) -> None:
    pipeline = steps_pipeline
    # Given a long input whose map calls take a second each, running in the background
    text = document(dict.fromkeys(range(1, CHUNKS + 1), "[[delay:1]]"))
    planned(text)
    job_id = pipeline.submit(body(text), key="long-cancel")["body"]["jobId"]
    done = threading.Event()
    worker = pipeline.in_background(lambda: pipeline.pump(done.is_set, timeout_seconds=90))

    # When the owner cancels once some steps are checkpointed
    pipeline.wait_for(lambda: pipeline.status(job_id)["progress"]["completedSteps"] >= 2)
    assert pipeline.cancel(job_id)["statusCode"] == 202
    pipeline.wait_for(lambda: pipeline.status(job_id)["status"] == "Canceled", timeout_seconds=60)
    done.set()
    worker.join()

    # Then it ended Canceled, with the tokens of the steps it did, and no reduce was called
    final = pipeline.status(job_id)
    assert final["usage"] is not None
    assert final["usage"]["inputTokens"] > 0
    assert final["progress"]["completedSteps"] < final["progress"]["totalSteps"]
    assert calls_per_step(pipeline)["reduce"] == 0
    assert pipeline.result(job_id)["statusCode"] == 409
