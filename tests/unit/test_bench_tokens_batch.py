"""The token bill's batch run: its arithmetic (handler time per job, the two aims) and its report
(the numbers come from `make bench`)."""

from __future__ import annotations

from typing import Any

import pytest

from outlast.bench.harness import Invocation
from outlast.bench.tokens import distinct_document
from outlast.bench.tokens_batch import (
    BatchLifecycle,
    BatchMeasured,
    calls_during,
    compare,
    handler_seconds,
    verdict,
)
from outlast.bench.tokens_report import markdown_section
from outlast.documents import long_document


def _invocation(phase: str, function: str, seconds: float, *, started: float = 0.0) -> Invocation:
    return Invocation(
        phase=f"{phase}/{function}/0",
        function=function,
        started=started,
        finished=started + seconds,
        duration_seconds=seconds,
        response=None,
    )


def test_a_verdict_is_the_ratio_to_four_places_against_the_aim() -> None:
    assert verdict(0.5, 1.0, 0.5) == {"ratio": 0.5, "aim": 0.5, "verdict": "met"}
    # Prices halved in floating point are half to the places the report shows
    assert verdict(0.075 * 3, 0.15 * 3, 0.5)["verdict"] == "met"
    assert verdict(0.06, 1.0, 0.05) == {"ratio": 0.06, "aim": 0.05, "verdict": "missed"}
    assert verdict(1.0, 0.0, 0.05)["verdict"] == "missed"


def test_compare_holds_tokens_and_lambda_time_to_the_issues_aims() -> None:
    aims = compare(
        batch_token_usd=1.0,
        standard_token_usd=2.0,
        batch_wait_gb_seconds=0.0,
        batch_worker_gb_seconds=0.04,
        batch_all_gb_seconds=0.08,
        standard_wait_gb_seconds=1.0,
    )

    assert aims["tokenUsd"] == {"ratio": 0.5, "aim": 0.5, "verdict": "met"}
    assert aims["modelWaitGbSeconds"] == {"ratio": 0.0, "aim": 0.05, "verdict": "met"}
    assert aims["waitGbSeconds"] == {"ratio": 0.04, "aim": 0.05, "verdict": "met"}
    assert aims["waitGbSecondsWithBatcherAndPoller"] == {"ratio": 0.08, "aim": 0.05, "verdict": "missed"}


def test_handler_time_counts_only_the_runs_invocations_of_the_measured_functions() -> None:
    invocations = [
        _invocation("tokens-batch-a-1", "worker", 0.2),
        _invocation("tokens-batch-a-1", "worker", 0.4),
        _invocation("tokens-batch-a-1", "batcher", 0.1),
        _invocation("tokens-batch-a-1", "batch_poller", 0.3),
        _invocation("tokens-batch-a-1", "status", 5.0),  # not a batch job's Lambda bill
        _invocation("tokens-batch-a-10", "worker", 9.0),  # another pass
        _invocation("tokens-standard-a-1", "worker", 7.0),
    ]
    measured = BatchMeasured(jobs=2)

    measured.time(invocations, "tokens-batch-a-1")

    assert measured.handlers["worker"].invocations == 2
    assert measured.gb_seconds("worker", 0.5) == pytest.approx(0.6 / 2 * 0.5)
    assert measured.gb_seconds("batcher", 0.5) == pytest.approx(0.1 / 2 * 0.5)
    assert measured.gb_seconds("batch_poller", 1.0) == pytest.approx(0.3 / 2)
    assert "status" not in measured.handlers
    assert handler_seconds(invocations, "worker", "tokens-standard-") == pytest.approx(7.0)


def test_the_batch_runs_usage_is_added_per_job_with_the_tiers_it_names() -> None:
    usage = {"inputTokens": 100, "cachedInputTokens": 40, "outputTokens": 10, "tiers": ["batch"]}
    lifecycle = BatchLifecycle("p", ["a", "b"], [{"usage": usage}, {"usage": usage}], 3, 1, 2, 2)
    measured = BatchMeasured()

    measured.add_lifecycle(lifecycle)

    assert (measured.jobs, measured.input_tokens, measured.cached_input_tokens) == (2, 200, 80)
    assert (measured.output_tokens, measured.model_calls, measured.rounds) == (20, 3, 2)
    assert measured.tiers == {"batch": 2}
    assert measured.worker_calls == 1


def test_each_runs_documents_are_distinct_on_every_line_and_keep_their_size() -> None:
    standard, batch = distinct_document(20_000, "S"), distinct_document(20_000, "B")
    first, second = standard.replace("{index}", "0"), standard.replace("{index}", "1")

    assert len(first.encode()) == len(second.encode()) == len(batch.replace("{index}", "0").encode())
    assert len(first.encode()) == len("Document S0. ") + len(long_document(20_000).encode())
    paragraphs = first.split("\n\n")
    assert all(line.count("Sec S0: ") == 12 for line in paragraphs)
    assert not set(first.split(". ")) & set(second.split(". "))
    with pytest.raises(ValueError, match="one letter"):
        distinct_document(20_000, "SB")


_PER_JOB = {"inputTokens": 5000.0, "cachedInputTokens": 0.0, "outputTokens": 100.0, "modelCalls": 1.0}


def _section() -> dict[str, Any]:
    handler = {"invocations": 4, "secondsPerJob": 0.05, "memoryGb": 0.5, "gbSecondsPerJob": 0.025}
    return {
        "method": "m",
        "workload": [{"name": "summary-20kb", "jobs": 8, "document_bytes": 20_000, "runs": 1}],
        "jobs": 8,
        "perJob": _PER_JOB,
        "cachedShare": 0.0,
        "callSecondsAssumed": {"standard": 4.0, "flex": 8.0},
        "workerMemoryGb": 0.5,
        "tiers": [
            {
                "model": "gpt-4o-mini",
                "tier": tier,
                "tokensFrom": f"{tier} run" if tier == "batch" else "standard run",
                "waitFrom": "measured worker time" if tier == "batch" else "assumed",
                "tokenUsdPer1000Jobs": 1.0,
                "tokenUsdPer1000JobsWithoutCache": 1.0,
                "waitGbSecondsPerJob": 0.2,
                "waitUsdPer1000Jobs": 0.001,
            }
            for tier in ("standard", "batch")
        ],
        "batch": {
            "model": "gpt-4o-mini",
            "batchSecondsLocal": 1.0,
            "jobs": 8,
            "perJob": {
                "inputTokens": 5000.0,
                "cachedInputTokens": 0.0,
                "outputTokens": 100.0,
                "modelCalls": 1.0,
            },
            "cachedShare": 0.0,
            "usageTiers": {"batch": 8},
            "rounds": 1,
            "waitingForSeen": 8,
            "tokenUsdPer1000Jobs": 0.5,
            "standardTokenUsdPer1000Jobs": 1.0,
            "handlers": {"batch_poller": handler, "batcher": handler, "worker": handler},
            "gbSecondsPerJobAll": 0.075,
            "standardWaitGbSecondsPerJob": 0.2,
            "standardWorkerGbSecondsPerJob": 0.03,
            "workerModelCalls": 1,
            "waitCallSeconds": 4.0,
            "modelWaitGbSecondsPerJob": 0.025,
            "aims": compare(
                batch_token_usd=0.5,
                standard_token_usd=1.0,
                batch_wait_gb_seconds=0.025,
                batch_worker_gb_seconds=0.025,
                batch_all_gb_seconds=0.075,
                standard_wait_gb_seconds=0.2,
            ),
        },
    }


def test_the_report_says_which_rows_are_measured_and_gives_each_aims_verdict() -> None:
    text = markdown_section(_section(), "*stamp*")

    assert "| gpt-4o-mini | standard | standard run's | 1.0000 |" in text
    assert "| 0.200 | assumed |" in text
    assert "| gpt-4o-mini | batch | batch run's |" in text
    assert "| 0.200 | measured |" in text
    assert "the flex rows are priced from the standard run's tokens (flex was not run)" in text
    assert "| token $ / 1,000 jobs (gpt-4o-mini) | 0.5000 | 1.0000 | 50.0% | <= 50% | met |" in text
    assert (
        "| model-wait GB-s / job (calls a worker waited on: 1 in the batch run, x the assumed 4 s) "
        "| 0.0250 | 0.2000 | 12.5% | <= 5% | missed |" in text
    )
    assert (
        "| stricter: Lambda GB-s / job a batch job costs instead (worker handler time) "
        "| 0.0250 | 0.2000 | 12.5% | <= 5% | missed |" in text
    )
    assert "its model wait is priced, not measured" in text
    assert "the tiers batch on 8 jobs" in text


def test_a_section_from_before_the_batch_run_still_renders() -> None:
    section = _section()
    del section["batch"]
    for row in section["tiers"]:
        del row["tokensFrom"], row["waitFrom"]

    text = markdown_section(section, "*stamp*")

    assert "Every row prices the standard run's tokens." in text
    assert "### The batch tier, measured" not in text


def test_a_model_call_counts_as_waited_on_only_inside_a_worker_invocation_of_the_pass() -> None:
    invocations = [
        _invocation("tokens-batch-a-1", "worker", 1.0, started=10.0),
        _invocation("tokens-batch-a-1", "batch_poller", 1.0, started=20.0),
        _invocation("tokens-standard-a-1", "worker", 1.0, started=30.0),
    ]
    log = [
        {"started": 10.5, "finished": 10.8},  # a fallback call the batch run's worker made
        {"started": 20.1, "finished": 20.2},  # a batch line the local Batch API ran in a retrieve
        {"started": 30.1, "finished": 30.2},  # another pass's worker
        {"started": 40.0, "finished": 41.0},  # no invocation at all
    ]

    assert calls_during(log, invocations, "worker", "tokens-batch-a-1/") == 1
