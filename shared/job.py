"""The job as stored: the record each transition rewrites, and the items beside it."""

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from shared.contract import ErrorDocument, Operation, ProgressDocument, StatusDocument, UsageDocument
from shared.lifecycle import JobStatus, is_terminal
from shared.plan_parameters import PlanParameters
from shared.tiers import Tier

# Where an input or a result is: inside the job item (small ones), an item beside it, or S3.
BlobLocation = Literal["job", "item", "s3"]


class JobError(BaseModel):
    """A terminal failure: a stable code from DESIGN.md and a message safe to show callers."""

    model_config = ConfigDict(frozen=True)

    code: str
    message: str


class Usage(BaseModel):
    """Token counts a provider reported (or, `estimated`, outlast's estimate of what it billed)."""

    model_config = ConfigDict(frozen=True)

    input_tokens: int
    output_tokens: int
    # A streamed call that ended without the provider's usage chunk (cut, canceled) is counted by
    # estimate (DESIGN.md, "Streaming output"); a sum that holds one is an estimate too.
    estimated: bool = False
    # Of input_tokens, those the provider read from its prompt cache (DESIGN.md, "Cost tiers").
    cached_input_tokens: int = 0
    # The tiers the counted calls ran at (what the provider said it served them at).
    tiers: frozenset[Tier] = frozenset()

    def document(self) -> UsageDocument:
        """The caller's view of these counts."""
        return UsageDocument(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            estimated=self.estimated,
            cached_input_tokens=self.cached_input_tokens,
            tiers=[tier for tier in Tier if tier in self.tiers],
        )


def add_usage(*usages: Usage | None) -> Usage | None:
    """The tokens of every call that reported them (None when none did); estimated if any part is."""
    known = [usage for usage in usages if usage is not None]
    if not known:
        return None
    return Usage(
        input_tokens=sum(usage.input_tokens for usage in known),
        output_tokens=sum(usage.output_tokens for usage in known),
        estimated=any(usage.estimated for usage in known),
        cached_input_tokens=sum(usage.cached_input_tokens for usage in known),
        tiers=frozenset().union(*(usage.tiers for usage in known)),
    )


class BudgetHold(BaseModel):
    """What one run of a job holds of its tenant's monthly token budget (DESIGN.md, "Token budgets").

    Written on the job when the run's reservation is made (at submit for the first run, by the
    operator's redrive for a later one), so that settlement reads everything it needs from the
    job as the stream shows it: the period the tokens were reserved in (settlement goes there even
    when the job ends in the next month), how many, the job's usage before this run (what earlier
    runs already settled), and which run it is (the reservation's key with the job id).
    """

    model_config = ConfigDict(frozen=True)

    period: str
    tokens: int
    base_tokens: int = 0
    run: int = 0


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
    # The current run's share of its tenant's token budget; None when the tenant has no limit.
    budget: BudgetHold | None = None
    # The client asked for the output as it is written (options.stream, DESIGN.md "Streaming output").
    stream: bool = False
    # What a Running job waits on when no worker holds it: "provider_batch" while its calls are in a
    # provider batch (DESIGN.md, "Cost tiers"); None otherwise.
    waiting_for: Literal["provider_batch"] | None = None

    def reserved_tokens(self, settled: bool | None = None) -> int | None:
        """The tokens the run still holds: all of its reservation until it is settled.

        A job that has not ended holds its reservation for certain. Whether an ended job's run is
        settled yet only the budget ledger knows: `settled` is its answer, and without one (None)
        an ended job shows none, as its settlement follows the terminal write within moments.
        """
        if self.budget is None or settled is True:
            return None
        if settled is None and is_terminal(self.status):
            return None
        return self.budget.tokens

    def status_document(self, settled: bool | None = None) -> StatusDocument:
        """The caller's view: no lease, fingerprint, model internals or storage locations.

        `settled`: whether the budget ledger has settled this run (see `reserved_tokens`).
        """
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
            usage=self.usage.document() if self.usage else None,
            reserved_tokens=self.reserved_tokens(settled),
            stream=self.stream,
            waiting_for=self.waiting_for,
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
    # What the plan was made from at submit (shared.plan_parameters): every worker plans the
    # same steps from them, whatever a later deploy's defaults are.
    plan: PlanParameters = PlanParameters()
    # A small input (until the job ends) or result, as JSON, when its location is "job".
    input_body: str | None = None
    result_body: str | None = None
    # A multi-step job's tokens of calls whose answers are not its checkpoints (a refused call
    # that reported usage, a second call of a step another claim checkpointed first): its usage
    # is the checkpoints' sum plus these, so a redrive that re-sums the checkpoints keeps them.
    extra_usage: Usage | None = None
    # The usage already counts the stored result's tokens (a Failed write after the Succeeded one
    # failed): a later claim that adopts that result must not add them again.
    result_usage_counted: bool = False
    # A streaming job's output attempts so far: each claim that streams takes the next one, and
    # nothing resets it (redrives and lost leases included), so attempts never collide.
    output_attempt: int = 0
    # The output attempt whose text the result holds (set by the Succeeded write; results are
    # write-once and adopted, so it may be older than `output_attempt`).
    result_attempt: int | None = None
    # A job on a document (input.documentId): which one, and the SHA-256 of the text it read. The
    # document is pinned from the submit until the job ends (DESIGN.md, "Documents").
    document_id: str | None = None
    document_sha256: str | None = None
    # Its tenant's running cap, copied at submit (DESIGN.md, "Fairness between tenants"; 0: none,
    # so a claim takes no slot), and the slot the current claim holds (set by a capped claim).
    max_running: int = 0
    slot: int | None = None
    # The tier the client asked for (options.tier): its calls go out at it until flex falls back.
    tier: Tier = Tier.STANDARD
    # A batch job: the provider batch its ready calls are in (set by the batcher), and whether a
    # batch of it expired or failed, so its later calls run as a flex job's (shared.tiers).
    batch_id: str | None = None
    batch_fallback: bool = False
    # The batches the poller saw this job through: `{id}:back` handed back (its answers kept),
    # `{id}:late` its discarded answers' usage counted (handed_back_marker, late_marker).
    batches_seen: frozenset[str] = frozenset()
    # Of its usage, the tokens of late answers (the poller's count, once per (job, batch)): they
    # come into the budget by shared.budgets.settle_late, so a run's settlement leaves them out,
    # whichever of the two is made first (shared.budgets.run_usage_tokens).
    late_tokens: int = 0

    def inline_input(self) -> "JobInput | None":
        """The input this job item carries itself, if it does."""
        if self.input_body is None:
            return None
        return JobInput.model_validate({**json.loads(self.input_body), "job_id": self.job_id})

    def inline_result(self) -> "JobResult | None":
        """The result this job item carries itself, if it does."""
        if self.result_body is None:
            return None
        return JobResult.model_validate({**json.loads(self.result_body), "job_id": self.job_id})

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
    # extract's JSON Schema (DESIGN.md, "Structured extraction"): it shapes every call of the job,
    # so it lives with the input, in the job item when both are small, else beside it or in S3.
    output_schema: dict[str, Any] | None = None

    def body(self) -> str:
        """The JSON a job item carries inline: no job id (the item's key says it), no empty options."""
        return self.model_dump_json(exclude={"job_id"}, exclude_none=True)


class JobResult(BaseModel):
    """What the model produced for a job, with what producing it cost: written once, never apart.

    Whoever holds the job next adopts a result that is already written (its output and its
    usage), so a worker that lost its lease after the answer never costs a second call.
    """

    model_config = ConfigDict(frozen=True)

    job_id: str
    output: str
    usage: Usage | None = None
    # A streamed result: the output attempt whose events hold its text, gapless (DESIGN.md).
    output_attempt: int | None = None

    def body(self) -> str:
        """The JSON a job item carries inline: no job id (the item's key says it), no default values
        (every byte of the job item is paid for at each of its writes)."""
        return self.model_dump_json(exclude={"job_id"}, exclude_none=True, exclude_defaults=True)


class StepOutput(BaseModel):
    """One step's checkpoint: its output and what the call cost, written once, before progress moves.

    Every later claim adopts it: a step whose output was written is never sent to the model again.
    """

    model_config = ConfigDict(frozen=True)

    job_id: str
    step_id: str
    output: str
    usage: Usage | None = None
    # The final step of a streaming job: the output attempt that streamed it (its result's).
    output_attempt: int | None = None


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


def handed_back_marker(batch_id: str) -> str:
    """JobRecord.batches_seen's entry for a job handed back from a batch: its answers were kept."""
    return f"{batch_id}:back"


def late_marker(batch_id: str) -> str:
    """JobRecord.batches_seen's entry for a job whose discarded answers' usage is counted."""
    return f"{batch_id}:late"
