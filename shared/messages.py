"""Queue message bodies parsed into domain messages before any logic runs."""

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared.ids import normalize_job_id
from shared.ports import JobMessage


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    job_id: str = Field(alias="jobId", min_length=36, max_length=36)
    trace_id: str = Field(alias="traceId", min_length=1, max_length=128)


def parse_job_message(body: str) -> JobMessage | None:
    """The message a body carries, or None when it is not one of ours (poison)."""
    try:
        parsed = _Body.model_validate_json(body)
    except ValidationError:
        return None
    job_id = normalize_job_id(parsed.job_id)
    return JobMessage(job_id=job_id, trace_id=parsed.trace_id) if job_id else None
