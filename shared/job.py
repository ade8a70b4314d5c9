"""The job as stored: the record each transition rewrites, and the items beside it."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from shared.contract import ErrorDocument, Operation, ProgressDocument, StatusDocument, UsageDocument
from shared.lifecycle import JobStatus, is_terminal
from shared.planner import PlanParameters

BlobLocation = Literal["item", "s3"]


class JobError(BaseModel):
    """A terminal failure: a stable code from DESIGN.md and a message safe to show callers."""

    model_config = ConfigDict(frozen=True)

    code: str
    message: str


class Usage(BaseModel):
    """Token counts a provider reported."""

    model_config = ConfigDict(frozen=True)

    input_tokens: int
    output_tokens: int


class Caller(BaseModel):
    """Who is asking: ownership is tenant + sub, nothing less."""

    model_config = ConfigDict(frozen=True)

    tenant: str
    sub: str

    @property
    def owner_key(self) -> str:
        """The partition of this caller's jobs in the list index."""
        return f"{self.tenant}#{self.sub}"


class JobSummary(BaseModel):
    """What a caller may see of a job: the list index holds exactly this, the job item more."""

    model_config = ConfigDict(frozen=True)

    job_id: str
    status: JobStatus
    operation: Operation
    created_at: datetime
    updated_at: datetime
    expires_at: datetime
    attempts: int = 0
    crashes: int = 0  # leases that expired on a claim that ran alone (DESIGN.md, crash isolation)
    # Steps checkpointed and planned (DESIGN.md, "Long inputs"): 0/1 for a one-step job until it ends.
    completed_steps: int = 0
    total_steps: int = 1
    cancel_requested_at: datetime | None = None
    error: JobError | None = None
    usage: Usage | None = None
    # +1 on every write of the job item: a job as submit first writes it is revision 1.
    revision: int = 1

    def status_document(self) -> StatusDocument:
        """The caller's view: no lease, fingerprint, model internals or storage locations."""
        return StatusDocument(
            job_id=self.job_id,
            status=self.status,
            operation=self.operation,
            created_at=self.created_at,
            updated_at=self.updated_at,
            expires_at=self.expires_at,
            attempts=self.attempts,
            crashes=self.crashes,
            revision=self.revision,
            # A one-step job's only step is its final call, which writes no checkpoint: Succeeded
            # means every step is done (DESIGN.md: a one-step job shows 0/1, then 1/1).
            progress=ProgressDocument(
                completed_steps=self.total_steps
                if self.status is JobStatus.SUCCEEDED
                else self.completed_steps,
                total_steps=self.total_steps,
            ),
            cancel_requested_at=self.cancel_requested_at,
            result_url=f"/v1/jobs/{self.job_id}/result" if self.status is JobStatus.SUCCEEDED else None,
            error=ErrorDocument(code=self.error.code, message=self.error.message) if self.error else None,
            usage=(
                UsageDocument(input_tokens=self.usage.input_tokens, output_tokens=self.usage.output_tokens)
                if self.usage
                else None
            ),
        )


class JobRecord(JobSummary):
    """Everything outlast keeps about a job, except its input and result (kept under 1 KB)."""

    tenant: str
    owner: str
    sequence_id: str
    model: str
    prompt_version: str
    input_location: BlobLocation
    max_attempts: int
    dispatch_at: datetime
    lease_token: str | None = None
    lease_expires_at: datetime | None = None
    redrive_count: int = 0
    result_location: BlobLocation | None = None
    # The retry budget: claims in a row that made no progress, capped by max_attempts. A claim
    # adds one; a lease lost to another job's crash gives it back (DESIGN.md, "Lifecycle").
    stalls: int = 0
    # The last claim's invocation held this job alone, so a crash under it was this job's doing.
    solo: bool = False
    # Runs only from the isolation queue, one job per invocation, since a batch it was in crashed.
    isolated: bool = False
    # What the plan was made from at submit (shared.planner.PlanParameters): every worker plans the
    # same steps from them, whatever a later deploy's defaults are.
    plan: PlanParameters = PlanParameters()

    @property
    def owner_key(self) -> str:
        """The partition of the owner's jobs in the list index."""
        return Caller(tenant=self.tenant, sub=self.owner).owner_key

    def is_owned_by(self, caller: Caller) -> bool:
        """True when the caller is this job's owner (tenant and sub both match)."""
        return self.tenant == caller.tenant and self.owner == caller.sub

    def is_expired(self, now: datetime) -> bool:
        """Expired jobs are gone, whether or not TTL has deleted the item yet."""
        return self.expires_at <= now

    @property
    def is_terminal(self) -> bool:
        """True once the job reached Succeeded, Failed or Canceled."""
        return is_terminal(self.status)


class JobInput(BaseModel):
    """The client's material for one job: text plus the options that shape the prompt."""

    model_config = ConfigDict(frozen=True)

    job_id: str
    text: str
    max_output_tokens: int | None = None
    labels: tuple[str, ...] | None = None


class JobResult(BaseModel):
    """What the model produced for a job, with what producing it cost: written once, never apart.

    Whoever holds the job next adopts a result that is already written (its output and its
    usage), so a worker that lost its lease after the answer never costs a second call.
    """

    model_config = ConfigDict(frozen=True)

    job_id: str
    output: str
    usage: Usage | None = None


class StepOutput(BaseModel):
    """One step's checkpoint: its output and what the call cost, written once, before progress moves.

    Every later claim adopts it: a step whose output was written is never sent to the model again.
    """

    model_config = ConfigDict(frozen=True)

    job_id: str
    step_id: str
    output: str
    usage: Usage | None = None


class IdempotencyRecord(BaseModel):
    """The unique claim on (tenant, owner, route, key) and what a replay needs to rebuild the job.

    Everything that shapes the job item is here, so a retry writes the same job with the same
    content even after a deploy changed a default.
    """

    model_config = ConfigDict(frozen=True)

    scope_hash: str
    fingerprint: str
    job_id: str
    created_at: datetime
    expires_at: datetime
    sequence_id: str
    model: str
    prompt_version: str
    max_attempts: int
    job_expires_at: datetime
    plan: PlanParameters = PlanParameters()
