"""A job's input and result wherever they are stored: in the job item itself when small (DESIGN.md,
"Cost discipline"), else in an item of their own or S3, through the payload store."""

from __future__ import annotations

from shared.job import JobInput, JobRecord, JobResult
from shared.ports import PayloadStore


def input_of(job: JobRecord, payloads: PayloadStore) -> JobInput | None:
    """The job's input, or None when it is gone (expired, or removed by the terminal write)."""
    if job.input_location == "job":
        return job.inline_input()
    return payloads.get_input(job.job_id, job.input_location)


def result_of(job: JobRecord, payloads: PayloadStore) -> JobResult | None:
    """The job's result, or None when it has none (or it is missing)."""
    if job.result_location is None:
        return None
    if job.result_location == "job":
        return job.inline_result()
    return payloads.get_result(job.job_id, job.result_location)
