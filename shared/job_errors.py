"""The job error codes of DESIGN.md and the one message each, safe to show any caller."""

from __future__ import annotations

from shared.job import JobError

ERROR_MESSAGES: dict[str, str] = {
    "invalid_input": "The provider rejected the request as invalid.",
    "context_length_exceeded": "The input is too long for the model's context window.",
    "content_policy": "The provider declined the input under its content policy.",
    "provider_auth": "The provider refused the service's credentials; operators have been alerted.",
    # Attempts end for more than provider failures (a worker that died, a lease that expired),
    # so the message does not blame the provider.
    "retries_exhausted": "The job did not complete within its attempts.",
    "input_missing": "The job's input is no longer available.",
    "worker_crashed": "The job stopped the worker running it each time it ran alone, so it was not retried.",
    # Structured extraction (DESIGN.md): the answer must match the job's schema.
    "invalid_output": "The model's answer did not match the schema, also when asked again.",
    "output_truncated": "The model's answer was cut by its token limit before it was complete.",
}


def job_error(code: str) -> JobError:
    """The error a Failed job shows for a code."""
    return JobError(code=code, message=ERROR_MESSAGES[code])
