"""Process-level fault injection for local mode only: chaos's module for local mode's fault hook.

`outlast local up --chaos SPEC` (or a chaos run, which starts one) sets local mode's fault hook
(outlast/local/fault_hook.py) to this module, with the spec in `OUTLAST_CHAOS_SPEC`. Local mode
then runs every function's handler through `wrap`, once per process, on its first event: the
real handler is imported, a few adapter and use-case methods of that function are wrapped in
this process only, and every event is delegated to the real handler. Production code carries
no hook: what runs is the deployed code, with faults added around it from the outside.

- `submit_death_after_claim`: exit (137) right after `DynamoJobRepository.claim_idempotency_key`
  returns having won the claim;
- `submit_death_after_input`: exit right after `DynamoS3PayloadStore.put_input`, when the same
  invocation won the claim (a retry that completes the submit goes through);
- `relay_failure`: `SqsJobQueue.send_batch` reports the job's entry failed, its first send only;
- `relay_outage`: the same, every send (the stream gives up, the sweeper must dispatch it);
- `worker_death_after_claim`: exit right after `JobWorker._claim` returns a run (the lease is held);
- `worker_death_after_model_call`: exit right after `JobWorker._call_under_lease` (or, for a
  streaming job, `_stream_under_lease`) returns the answer, before anything is recorded. A worker
  death takes the whole batch with it;
- `batcher_death_after_create`: exit right after `OpenAIBatchApi.create` returns, for a batch that
  holds the job's call: the provider batch exists, nothing recorded it (the SQS messages come back);
- `poller_death_after_answers`: exit right before the poller hands the job back from its ended
  batch, its answers written (the batch stays open for the next run).

An exit makes the local runtime report a failed invocation, as Lambda does when a runtime
dies: API Gateway answers 500 to the client, the SQS poller leaves the batch on the queue.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import threading
from collections.abc import Callable
from typing import Any

from outlast.chaos.spec import (
    DEATH_EXIT_CODE,
    ENV_SPEC,
    ChaosSpec,
    ChaosState,
    ProcessFault,
    seeded_fraction,
    tagged_fault,
)
from outlast.local.fault_hook import FaultHook, Handler


def fault_hook(spec: ChaosSpec) -> FaultHook:
    """Local mode's fault hook set to this module, with `spec` (the state file shows the spec)."""
    return FaultHook(module=__name__, environment={ENV_SPEC: spec.to_json()}, description=spec.to_dict())


class Injector:
    """Decides, records and injects the faults of one function process."""

    def __init__(self, spec: ChaosSpec, function: str) -> None:
        self.spec = spec
        self.state = ChaosState(spec)
        self.function = function
        self._lock = threading.Lock()
        self._injected = 0
        # One event at a time per process (as in Lambda): what the current event is about.
        self.submit_tag: ProcessFault | None = None
        self.claim_won_for: str | None = None
        self.batch: list[str] = []

    def begin(self, event: dict[str, Any]) -> None:
        """Note what the faults of this event need to know before any method runs."""
        self.submit_tag, self.claim_won_for = _submit_tag(event), None
        self.batch = _batch_job_ids(event)

    def wanted(self, fault: ProcessFault, job_id: str, tagged: ProcessFault | None = None) -> bool:
        """True when `fault` fires now for `job_id`; the firing is recorded before it happens."""
        tagged = tagged or self.state.fault_of(job_id)
        if tagged is not None:
            hit = self.spec.tags and tagged is fault  # a tagged job gets its own fault, nothing else
        else:
            hit = seeded_fraction(self.spec.seed, fault.value, job_id) < self.spec.rates.get(fault, 0.0)
        if not hit:
            return False
        with self._lock:
            if self.spec.budget is not None and self._injected >= self.spec.budget:
                return False
            if fault.once and not self.state.first_time(fault, job_id):
                return False
            self._injected += 1
        self.state.record(fault, job_id, self.function, self.batch)
        return True

    def die_if(self, fault: ProcessFault, job_id: str, tagged: ProcessFault | None = None) -> None:
        """Exit the process at once, as a crash would: no cleanup, no answer, no flush."""
        if self.wanted(fault, job_id, tagged):
            os._exit(DEATH_EXIT_CODE)


def _submit_tag(event: dict[str, Any]) -> ProcessFault | None:
    body = event.get("body")
    if not isinstance(body, str) or "routeKey" not in event:
        return None
    try:
        raw = base64.b64decode(body) if event.get("isBase64Encoded") else body.encode()
        document = json.loads(raw)
        text = document["input"]["text"]
    except (ValueError, KeyError, TypeError):
        return None
    return tagged_fault(text) if isinstance(text, str) else None


def _batch_job_ids(event: dict[str, Any]) -> list[str]:
    found = []
    for record in event.get("Records") or []:
        if not isinstance(record, dict) or record.get("eventSource") != "aws:sqs":
            continue
        try:
            job_id = json.loads(record.get("body", ""))["jobId"]
        except (ValueError, KeyError, TypeError):
            continue
        if isinstance(job_id, str):
            found.append(job_id)
    return found


# --- the wrappers, per function --------------------------------------------------------------


def _wrap(owner: type, name: str, make: Callable[[Any], Any]) -> None:
    setattr(owner, name, make(getattr(owner, name)))


def _patch_submit(injector: Injector) -> None:
    from shared.adapters.dynamodb_jobs import DynamoJobRepository  # noqa: PLC0415 - the function's own code
    from shared.adapters.payloads import DynamoS3PayloadStore  # noqa: PLC0415

    def claim(original: Any) -> Any:
        def claim_idempotency_key(self: Any, record: Any, now: Any) -> Any:
            existing = original(self, record, now)
            job_id = str((existing or record).job_id)
            if injector.submit_tag is not None:
                injector.state.remember(job_id, injector.submit_tag)
            if existing is None:
                injector.claim_won_for = job_id
                injector.die_if(ProcessFault.SUBMIT_DEATH_AFTER_CLAIM, job_id, injector.submit_tag)
            return existing

        return claim_idempotency_key

    def put(original: Any) -> Any:
        def put_input(self: Any, job_input: Any, location: Any, expires_at: Any) -> None:
            original(self, job_input, location, expires_at)
            job_id = str(job_input.job_id)
            # Only the first submit dies here: the retry that completes it must get through.
            if injector.claim_won_for == job_id:
                injector.die_if(ProcessFault.SUBMIT_DEATH_AFTER_INPUT, job_id, tagged_fault(job_input.text))

        return put_input

    _wrap(DynamoJobRepository, "claim_idempotency_key", claim)
    _wrap(DynamoS3PayloadStore, "put_input", put)


def _patch_relay(injector: Injector) -> None:
    from shared.adapters.sqs_queue import SqsJobQueue  # noqa: PLC0415 - the function's own code

    kinds = (ProcessFault.RELAY_FAILURE, ProcessFault.RELAY_OUTAGE)

    def send(original: Any) -> Any:
        def send_batch(self: Any, messages: list[Any]) -> list[Any]:
            # SendMessageBatch's partial failure: these entries come back in `Failed`, the rest go.
            doomed = [m for m in messages if any(injector.wanted(k, str(m.job_id)) for k in kinds)]
            failed: list[Any] = original(self, [m for m in messages if m not in doomed])
            return [*doomed, *failed]

        return send_batch

    _wrap(SqsJobQueue, "send_batch", send)


def _patch_worker(injector: Injector) -> None:
    from functions.worker.service import JobWorker  # noqa: PLC0415 - the function's own code

    def claim(original: Any) -> Any:
        async def _claim(self: Any, *args: Any) -> Any:
            run = await original(self, *args)
            if run is not None:
                injector.die_if(ProcessFault.WORKER_DEATH_AFTER_CLAIM, str(run.job.job_id))
            return run

        return _claim

    def call(original: Any) -> Any:
        async def _call_under_lease(self: Any, run: Any, request: Any) -> Any:
            completion = await original(self, run, request)
            injector.die_if(ProcessFault.WORKER_DEATH_AFTER_MODEL_CALL, str(run.job.job_id))
            return completion

        return _call_under_lease

    _wrap(JobWorker, "_claim", claim)
    _wrap(JobWorker, "_call_under_lease", call)
    _wrap(JobWorker, "_stream_under_lease", call)  # a streaming job's call: its events are written


def _patch_batcher(injector: Injector) -> None:
    from shared.adapters.openai_batches import OpenAIBatchApi  # noqa: PLC0415 - the function's own code

    def create(original: Any) -> Any:
        def create_batch(self: Any, model: str, input_file: bytes, metadata: dict[str, str]) -> Any:
            created = original(self, model, input_file, metadata)
            for job_id in _input_job_ids(input_file):
                injector.die_if(ProcessFault.BATCHER_DEATH_AFTER_CREATE, job_id)
            return created

        return create_batch

    _wrap(OpenAIBatchApi, "create", create)


def _input_job_ids(input_file: bytes) -> list[str]:
    """The jobs of a batch's JSONL input file (`custom_id` is job:step:attempt)."""
    found = []
    for line in input_file.decode("utf-8").splitlines():
        with contextlib.suppress(ValueError, AttributeError):
            found.append(str(json.loads(line).get("custom_id", "")).split(":", 1)[0])
    return list(dict.fromkeys(job_id for job_id in found if job_id))


def _patch_poller(injector: Injector) -> None:
    from functions.batch_poller import service  # noqa: PLC0415 - the function's own code

    def dies_first(original: Any) -> Any:
        def _moves_job_on(deps: Any, job: Any, *args: Any, **options: Any) -> Any:
            injector.die_if(ProcessFault.POLLER_DEATH_AFTER_ANSWERS, str(job.job_id))
            return original(deps, job, *args, **options)

        return _moves_job_on

    # Module functions: the poller looks each up in the module at each call. A one-step job is
    # ended by `finish`, a longer one handed back: the poller dies before either.
    setattr(service, "_hand_back", dies_first(service._hand_back))  # noqa: B010
    setattr(service, "finish", dies_first(getattr(service, "finish")))  # noqa: B009, B010


_PATCHES: dict[str, Callable[[Injector], None]] = {
    "functions.submit.": _patch_submit,
    "functions.relay.": _patch_relay,
    "functions.worker.": _patch_worker,
    "functions.batcher.": _patch_batcher,
    "functions.batch_poller.": _patch_poller,
}


# --- the entry point -------------------------------------------------------------------------


class _Shim:
    def __init__(self, handler: Handler, injector: Injector) -> None:
        self.handler = handler
        self.injector = injector

    def __call__(self, event: Any, context: Any) -> Any:
        if isinstance(event, dict):
            self.injector.begin(event)
        return self.handler(event, context)


def wrap(handler: Handler, handler_string: str) -> Handler:
    """The fault hook's entry: wrap this function's methods, return the delegating handler."""
    module_name = handler_string.rpartition(".")[0]
    function = module_name.split(".")[1] if module_name.startswith("functions.") else module_name
    injector = Injector(ChaosSpec.load(os.environ[ENV_SPEC]), function)
    for prefix, patch in _PATCHES.items():
        if module_name.startswith(prefix):
            patch(injector)
    return _Shim(handler, injector)
