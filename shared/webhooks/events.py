"""Webhook event types and the event id every attempt of one delivery carries."""

from __future__ import annotations

from enum import StrEnum

from shared.ids import normalize_job_id
from shared.lifecycle import JobStatus


class EventType(StrEnum):
    """The events an endpoint can subscribe to: one per terminal status."""

    JOB_SUCCEEDED = "job.succeeded"
    JOB_FAILED = "job.failed"
    JOB_CANCELED = "job.canceled"


_BY_STATUS = {
    JobStatus.SUCCEEDED: EventType.JOB_SUCCEEDED,
    JobStatus.FAILED: EventType.JOB_FAILED,
    JobStatus.CANCELED: EventType.JOB_CANCELED,
}


def event_type_for(status: JobStatus) -> EventType | None:
    """The event a transition into `status` raises, or None for a status that is not terminal."""
    return _BY_STATUS.get(status)


def event_id(job_id: str, redrive_count: int, event_type: EventType) -> str:
    """`{jobId}.{redriveCount}.{type}`: the `webhook-id`, the same across every retry of a delivery.

    A redriven job ends again with a higher count, so a receiver that deduplicates on the id
    still hears about it. Standard Webhooks asks that the id hold no `.` unless no part of it
    is user-controlled: here the job id is a UUID we generated, the count an integer and the
    type one of three constants, so the signed string `id.timestamp.body` stays unambiguous.
    """
    if normalize_job_id(job_id) != job_id:
        raise ValueError("a job id is a lowercase UUID")
    if isinstance(redrive_count, bool) or redrive_count < 0:
        raise ValueError("a redrive count is a non-negative integer")
    return f"{job_id}.{redrive_count}.{EventType(event_type).value}"
