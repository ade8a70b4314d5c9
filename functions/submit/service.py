"""The submit use case: one idempotent acceptance of a job, as DESIGN.md's write order describes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from functions.submit.dependencies import SubmitDependencies
from shared import resources as r
from shared.budgets import (
    BudgetState,
    ReservationRef,
    ReserveOutcome,
    effective_limit,
    exceeded_detail,
    new_reservation,
    period_of,
    record_refusal,
    record_reservation,
    reservation_tokens,
)
from shared.clock import truncate_to_millis
from shared.contract import SubmitRequest
from shared.documents.job_input import DocumentText, pin_document, read_document_text
from shared.documents.ports import DocumentPin
from shared.errors import (
    BudgetExceededError,
    DocumentNotFoundError,
    DocumentNotReadyError,
    IdempotencyKeyReusedError,
    InvalidSchemaError,
    ModelNotAllowedError,
    RateLimitedError,
    TierUnavailableError,
)
from shared.extraction.schema_subset import schema_problem
from shared.idempotency import fingerprint, scope_hash
from shared.ids import new_job_id, new_sequence_id
from shared.job import BlobLocation, BudgetHold, Caller, IdempotencyRecord, JobInput, JobRecord
from shared.lifecycle import JobStatus
from shared.observability import bind_job, logger, metrics
from shared.planner import StepPlan, plan_job
from shared.prompts import template_for
from shared.retention import input_expiry
from shared.slots import effective_cap
from shared.tiers import Tier


@dataclass(frozen=True)
class SubmitOutcome:
    """The job the caller gets, and whether this answer replays an earlier submit."""

    job: JobRecord
    replayed: bool


def submit_job(deps: SubmitDependencies, caller: Caller, request: SubmitRequest, key: str) -> SubmitOutcome:
    """Accept a job exactly once per (caller, key, fingerprint).

    Order, no transaction across them (DESIGN.md, "Lifecycle": submit order): (1) the
    idempotency claim, the unique constraint, and a replay when its job exists, before any quota
    or budget is spent, so a client retrying after a lost answer always learns its job; (2) the
    per-owner rate and (3) the tenant's budget reservation, whose refusals delete this submit's
    own claim; (4) the input; (5) the job item, whose stream INSERT starts the work, so it comes
    last. A crash between steps leaves what a retry with the same key completes (the reservation
    is keyed by the job, so the retry finds it made); a reservation no retry completes is
    released by the sweeper once the claim has expired.
    """
    settings = deps.settings
    _check_schema(request)
    now = truncate_to_millis(deps.clock.now())
    job_fingerprint = fingerprint(request.client_fields())
    scope = scope_hash(caller, key)
    try:
        model = _model_for(request, settings.default_model, settings.allowed_models)
        _check_tier(request.tier, model, settings.tiers_for(model))
    except (ModelNotAllowedError, TierUnavailableError):
        # A deploy may have narrowed the allowlist (of models or tiers) since this key's first
        # submit: an identical retry still replays its job (DESIGN.md, "Idempotency"). Only this
        # refusal pays the read.
        replay = _replay_of_accepted(deps, scope, job_fingerprint, now)
        if replay is None:
            raise
        return replay

    proposed = IdempotencyRecord(
        scope_hash=scope,
        fingerprint=job_fingerprint,
        job_id=new_job_id(),
        created_at=now,
        expires_at=now + timedelta(hours=settings.idempotency_ttl_hours),
        sequence_id=new_sequence_id(),
        model=model,
        prompt_version=template_for(request.operation).version,
        max_attempts=settings.max_attempts,
        job_expires_at=now + timedelta(days=settings.job_retention_days),
        plan=settings.plan_for(request.operation),
    )
    existing = deps.repository.claim_idempotency_key(proposed, now)
    if existing is not None and existing.fingerprint != job_fingerprint:
        raise IdempotencyKeyReusedError("This Idempotency-Key was already used with a different request.")
    claim = existing or proposed
    bind_job(claim.job_id)
    if existing is not None:
        current = deps.repository.get_job(claim.job_id)
        if current is not None:
            logger.info("job replayed")
            return SubmitOutcome(job=current, replayed=True)
        # The claim exists but the job does not: the first submit stopped between its writes (or
        # is still writing them). Completing it is this submit's work now, and it is paid for.
    _take_quota(deps, caller, now, claim if existing is None else None)
    document = _document_text(deps, caller, request, now, own_claim=claim if existing is None else None)

    job_input = JobInput(
        job_id=claim.job_id,
        text=document.text if document else str(request.input.text),
        max_output_tokens=request.options.max_output_tokens if request.options else None,
        labels=tuple(request.options.labels) if request.options and request.options.labels else None,
        output_schema=request.options.output_schema if request.options else None,
    )
    plan = plan_job(
        job_input.text,
        request.operation,
        claim.plan,
        prompt_version=claim.prompt_version,
        labels=job_input.labels,
        max_output_tokens=job_input.max_output_tokens,
        schema=job_input.output_schema,
    )
    # The one budget read: the limit, this month's counter and the tenant's running cap.
    state = deps.budgets.state(caller.tenant, period_of(claim.created_at))
    hold = _reserve_budget(
        deps, caller, claim, plan, state, now=now, own_claim=claim if existing is None else None
    )
    max_running = effective_cap(state.configured_max_running, settings.default_max_running_per_tenant)
    job = _job_from_claim(
        claim, caller, request, "item", plan.total_steps, hold=hold, max_running=max_running
    )
    if document is not None:
        # Pinned before the job is written: the job's terminal write unpins it (the notifier). The
        # pin keeps the document as long as the job can exist: a job is gone at its expiresAt.
        pin = DocumentPin(
            owner=caller,
            document_id=document.document_id,
            job_id=claim.job_id,
            now=now,
            check_at=now + timedelta(seconds=settings.dispatch_grace_seconds),
            keep_until=claim.job_expires_at,
        )
        pin_document(deps.documents, pin)
        job = job.model_copy(update={"document_id": document.document_id, "document_sha256": document.sha256})
    if deps.repository.fits_in_job_item(job, input_body=job_input.body()):
        # A small input rides in the job item: one write fewer now and at the end (DESIGN.md,
        # "Cost discipline"), and the claim hands it to the worker with no read of its own.
        job = job.model_copy(update={"input_location": "job", "input_body": job_input.body()})
    else:
        job = job.model_copy(update={"input_location": _location_for(job_input)})
        # Steps 4-5, also when completing a crashed submit: same id, same content, both
        # conditional. Until the job ends and says otherwise, the input lives as long as it would
        # after an end: if no job item ever follows (a crash, no retry), it goes with its claim.
        input_expires_at = input_expiry(claim.created_at, settings.input_retention_hours)
        deps.payloads.put_input(job_input, job.input_location, expires_at=input_expires_at)
    location = job.input_location
    sweep_at = job.dispatch_at + timedelta(seconds=settings.sweep_look_seconds)
    if deps.repository.create_job(job, sweep_at):
        logger.info("job accepted", extra={"replayed": existing is not None, "input_location": location})
        metrics.add_metric(name="JobsAccepted", unit="Count", value=1)
        return SubmitOutcome(job=job, replayed=existing is not None)
    # A concurrent identical submit wrote the job first: answer with where it stands now.
    current = deps.repository.get_job(job.job_id)
    logger.info("job replayed")
    return SubmitOutcome(job=current or job, replayed=True)


def _document_text(
    deps: SubmitDependencies,
    caller: Caller,
    request: SubmitRequest,
    now: datetime,
    *,
    own_claim: IdempotencyRecord | None,
) -> DocumentText | None:
    """The text of the document the input names (None for input.text); refused, it leaves no
    claim of ours behind, so a retry once the document is Ready starts fresh."""
    document_id = request.input.document_id
    if document_id is None:
        return None
    try:
        return read_document_text(
            deps.documents,
            deps.document_objects,
            caller,
            document_id,
            now=now,
            retry_after=deps.settings.poll_after_seconds,
        )
    except (DocumentNotFoundError, DocumentNotReadyError):
        if own_claim is not None:
            deps.repository.release_idempotency_claim(own_claim)
        raise


def _check_schema(request: SubmitRequest) -> None:
    """extract's schema must be in the strict subset: refused before anything is written, with
    where it first leaves it (no validator library: shared.extraction.schema_subset walks it)."""
    schema = request.options.output_schema if request.options else None
    if schema is None:
        return
    problem = schema_problem(schema)
    if problem is not None:
        raise InvalidSchemaError(
            f"options.schema is outside the supported subset at {problem.pointer}: {problem.reason}."
        )


def _replay_of_accepted(
    deps: SubmitDependencies, scope: str, job_fingerprint: str, now: datetime
) -> SubmitOutcome | None:
    """The job an identical earlier submit created under this key, if there is one (read only)."""
    claim = deps.repository.find_idempotency_claim(scope, now)
    if claim is None or claim.fingerprint != job_fingerprint:
        return None
    current = deps.repository.get_job(claim.job_id)
    if current is None:  # its submit stopped between writes: not completed under today's allowlist
        return None
    bind_job(current.job_id)
    logger.info("job replayed", extra={"model_no_longer_allowed": True})
    return SubmitOutcome(job=current, replayed=True)


def _model_for(request: SubmitRequest, default_model: str, allowed: tuple[str, ...]) -> str:
    requested = request.options.model if request.options else None
    if requested is None:
        return default_model
    if requested not in allowed:
        raise ModelNotAllowedError(f"options.model must be one of: {', '.join(allowed)}.")
    return requested


def _check_tier(tier: Tier, model: str, offered: tuple[Tier, ...]) -> None:
    if tier not in offered:
        available = ", ".join(t.value for t in offered) or "none"
        raise TierUnavailableError(
            f"{model} is not available at the {tier.value} tier here (available: {available})."
        )


def _take_quota(
    deps: SubmitDependencies, caller: Caller, now: datetime, own_claim: IdempotencyRecord | None
) -> None:
    """Count this submit in the owner's minute; over the rate, leave no claim of ours behind."""
    window = now.replace(second=0, microsecond=0)
    if deps.repository.take_submit_quota(caller.owner_key, window, deps.settings.submits_per_minute):
        return
    if own_claim is not None:
        deps.repository.release_idempotency_claim(own_claim)
    retry_after = max(1, 60 - now.second)
    raise RateLimitedError(
        f"At most {deps.settings.submits_per_minute} submits per minute; retry in {retry_after} s.",
        retry_after=retry_after,
    )


def _reserve_budget(
    deps: SubmitDependencies,
    caller: Caller,
    claim: IdempotencyRecord,
    plan: StepPlan,
    state: BudgetState,
    *,
    now: datetime,
    own_claim: IdempotencyRecord | None,
) -> BudgetHold | None:
    """Reserve the job's true upper bound of tokens in its tenant's month; over the limit, leave no
    claim of ours behind and refuse. None (and no write) when the tenant has no limit.

    The period is the claim's month, so a retry that completes this submit later reserves (and
    finds the reservation) in the same one, and the job settles there whenever it ends.
    """
    settings = deps.settings
    period = state.period
    limit = effective_limit(state.configured_limit, settings.default_monthly_tokens)
    if limit is None:
        return None
    reservation = new_reservation(
        caller.tenant,
        ReservationRef(claim.job_id, 0),
        reservation_tokens(plan),
        now=now,
        period=period,
        held_until=claim.expires_at,
        grace=timedelta(seconds=settings.dispatch_grace_seconds),
    )
    result = deps.budgets.reserve(reservation, limit)
    if result.outcome is ReserveOutcome.EXCEEDED:
        committed = result.committed if result.committed is not None else state.committed
        record_refusal(caller.tenant, period, limit, committed, reservation.tokens)
        if own_claim is not None:
            deps.repository.release_idempotency_claim(own_claim)
        raise BudgetExceededError(exceeded_detail(limit, committed, reservation.tokens, period))
    if result.outcome is ReserveOutcome.RESERVED:
        record_reservation(state, limit, reservation)
    # A retry that completes a crashed submit holds what that submit reserved (a deploy between
    # them may compute another bound): the settlement's condition is on the stored tokens.
    return result.hold(reservation)


def _location_for(job_input: JobInput) -> BlobLocation:
    size = len(job_input.model_dump_json().encode("utf-8"))
    return "s3" if size > r.INLINE_PAYLOAD_LIMIT_BYTES else "item"


def _job_from_claim(
    claim: IdempotencyRecord,
    caller: Caller,
    request: SubmitRequest,
    location: BlobLocation,
    total_steps: int,
    *,
    hold: BudgetHold | None,
    max_running: int,
) -> JobRecord:
    """The job item is a pure function of the claim and the request (its plan and its reservation
    too): a replay rebuilds it exactly."""
    return JobRecord(
        job_id=claim.job_id,
        tenant=caller.tenant,
        owner=caller.sub,
        operation=request.operation,
        status=JobStatus.PENDING,
        created_at=claim.created_at,
        updated_at=claim.created_at,
        expires_at=claim.job_expires_at,
        sequence_id=claim.sequence_id,
        model=claim.model,
        prompt_version=claim.prompt_version,
        input_location=location,
        max_attempts=claim.max_attempts,
        dispatch_at=claim.created_at,
        plan=claim.plan,
        total_steps=total_steps,
        budget=hold,
        stream=request.stream,
        max_running=max_running,
        tier=request.tier,
    )
