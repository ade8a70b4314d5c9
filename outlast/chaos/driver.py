"""The chaos driver: jobs through the local stack's HTTP API while faults hit every boundary.

Clients behave as the contract asks of them: they retry a submit with the same
Idempotency-Key after a 5xx, a 429 or a lost connection (that is what completes a submit whose
process died between its writes), and they follow Retry-After. Everything else the driver does
is a fault: copies of queue messages, poison messages, cancels racing completion, ten
identical submits at once, and a second owner probing every job id.
"""

from __future__ import annotations

import base64
import functools
import json
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from outlast.api.http import (
    TERMINAL_STATUSES,
    Answer,
    ApiError,
    HttpApi,
    JsonObject,
    TransportError,
)
from outlast.chaos.plan import CONCURRENT_SUBMITS, Fault, Plan, PlannedJob
from outlast.chaos.target import Target
from outlast.chaos.watch import Follower, Received
from outlast.local.access import issue_token, local_client
from outlast.local.synth import PROJECT_ROOT
from shared.identity import PERSONAL_TENANT_PREFIX
from shared.job import Caller

T = TypeVar("T")

RETRY_BUDGET_SECONDS = 300.0  # how long a client keeps retrying one call before it gives up
CLIENT_TIMEOUT_SECONDS = 60.0  # a request may wait behind others for a free function environment
RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})
POLL_SECONDS = 0.5  # the cancel-when-running watcher's poll: about half of its [[delay:1]] call
DRAIN_POLL_SECONDS = 2.0
POISON_WAIT_SECONDS = 60.0


@dataclass
class DriverOptions:
    """How to run: job count, seed, and which stack."""

    jobs: int = 300
    seed: int = 7
    port: int | None = None  # attach to the stack on this port instead of starting one
    cdk_out: Path = PROJECT_ROOT / "cdk.out.e2e-chaos"  # ignored by git, removed by make clean
    concurrency: int = 4  # as many as a function's local environments: more would only queue
    drain_timeout: float = 300.0
    run_id: str | None = None
    log: Callable[[str], None] = lambda _line: None


@dataclass
class Owner:
    """A user of the run: its identity and its client."""

    user: str
    tenant: str | None
    sub: str
    client: HttpApi

    @property
    def caller(self) -> Caller:
        """The caller the API sees (no tenant claim: the personal tenant `user:{sub}`)."""
        return Caller(tenant=self.tenant or f"{PERSONAL_TENANT_PREFIX}{self.sub}", sub=self.sub)

    @property
    def owner_key(self) -> str:
        """The list-index partition of this caller."""
        return self.caller.owner_key


@dataclass
class JobRun:
    """What happened to one planned job, as the clients saw it."""

    planned: PlannedJob
    job_ids: set[str] = field(default_factory=set)  # every id a submit answered with
    submit_calls: int = 0
    submit_errors: list[str] = field(default_factory=list)
    refused: str | None = None  # a 4xx answer to the submit
    abandoned: str | None = None  # the client gave up retrying (5xx, 429, lost connections)
    accepted_at: float | None = None
    replayed: bool = False  # some answer said Idempotent-Replayed: true
    fresh_answers: int = 0  # answers that said the job was created by that request
    copies_sent: int = 0
    cancel_answer: int | None = None
    cancel_saw: str | None = None
    leaks: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def job_id(self) -> str | None:
        """The job the submit created (the smallest id if, wrongly, there were several)."""
        return min(self.job_ids) if self.job_ids else None

    @property
    def fault(self) -> Fault:
        """The job's planned fault."""
        return self.planned.fault


@dataclass
class RunTimes:
    """When the run started submitting, the last job was accepted, and all were terminal."""

    started: float = 0.0
    last_accepted: float = 0.0
    drained: float | None = None


class Retrying:
    """The clients' retry policy: 5xx, 429 and lost connections are retried with the same call."""

    def __init__(self, budget_seconds: float = RETRY_BUDGET_SECONDS) -> None:
        self.budget_seconds = budget_seconds

    def call(self, call: Callable[[], T], on_retry: Callable[[str], None] | None = None) -> T:
        """The call's answer; ApiError for an answer that must not be retried (4xx)."""
        deadline = time.monotonic() + self.budget_seconds
        attempt = 0
        while True:
            attempt += 1
            try:
                return call()
            except ApiError as error:
                if error.status not in RETRYABLE_STATUSES or time.monotonic() > deadline:
                    raise
                reason, pause = str(error.status), float(error.retry_after or 1)
                if error.status != 429:
                    pause = min(3.0, 0.25 * attempt)
            except TransportError as error:
                if time.monotonic() > deadline:
                    raise
                reason, pause = type(error).__name__, min(3.0, 0.25 * attempt)
            if on_retry is not None:
                on_retry(reason)
            time.sleep(pause)


def token_sub(token: str) -> str:
    """The `sub` claim of an ID token (read, not verified: it is our own token)."""
    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return str(claims["sub"])


class Driver:
    """Runs one plan against one stack and gathers what the clients saw."""

    def __init__(self, target: Target, plan: Plan, options: DriverOptions) -> None:
        self.target = target
        self.plan = plan
        self.options = options
        self.log = options.log
        self.retrying = Retrying()
        self.sqs = local_client("sqs", target.state)
        self.jobs_queue = target.queue_url("OutboxJobsQueue")
        self.owners: list[Owner] = []
        self.prober: Owner | None = None
        self.runs = [JobRun(planned) for planned in plan.jobs]
        self.times = RunTimes()
        self.poison_parked: dict[str, str | None] = {}
        self._watchers: list[threading.Thread] = []
        # Streaming jobs are followed over one socket per owner, and by the second owner's (who
        # must get nothing): what each received, once the run is drained.
        self.followers: list[Follower] = []
        self.prober_follower: Follower | None = None
        self.followed: list[Received] = []
        self.prober_followed: Received | None = None

    # --- set-up ----------------------------------------------------------------------------

    def _owner(self, user: str, tenant: str | None) -> Owner:
        token = issue_token(self.target.state, user, tenant)
        client = HttpApi(self.target.api_url, token, CLIENT_TIMEOUT_SECONDS)
        return Owner(user, tenant, token_sub(token), client)

    def sign_in(self) -> None:
        """One user per owner (half with a tenant, half without), and the prober."""
        run_id = self.plan.run_id
        shared_tenant = f"chaos-{run_id}"
        self.owners = [
            self._owner(f"chaos-{run_id}-owner-{index}", shared_tenant if index % 2 == 0 else None)
            for index in range(self.plan.owners)
        ]
        # Same tenant as half of the owners, another sub: "another caller" all the same.
        self.prober = self._owner(f"chaos-{run_id}-prober", shared_tenant)
        if any(planned.stream for planned in self.plan.jobs):
            self.followers = [Follower(owner.user, owner.client) for owner in self.owners]
            self.prober_follower = Follower(self.prober.user, self.prober.client)

    # --- poison ------------------------------------------------------------------------------

    def send_poison(self) -> None:
        """Garbage and unknown-job messages straight onto the jobs queue; wait until they are parked."""
        for poison in self.plan.poison:
            self.sqs.send_message(QueueUrl=self.jobs_queue, MessageBody=poison.body)
        self.poison_parked = {poison.body: None for poison in self.plan.poison}
        dlq = self.target.queue_url("OutboxJobsDlq")
        deadline = time.monotonic() + POISON_WAIT_SECONDS
        while None in self.poison_parked.values() and time.monotonic() < deadline:
            messages = self.sqs.receive_message(
                QueueUrl=dlq, MaxNumberOfMessages=10, VisibilityTimeout=300, MessageAttributeNames=["All"]
            ).get("Messages", [])
            for message in messages:
                body = message.get("Body", "")
                if body in self.poison_parked:
                    reason = message.get("MessageAttributes", {}).get("reason", {}).get("StringValue")
                    self.poison_parked[body] = reason or "(no reason)"
            if not messages:
                time.sleep(0.5)

    # --- one job -----------------------------------------------------------------------------

    def drive(self, run: JobRun) -> None:
        """Submit one job and apply its client-side fault; the prober tries it at once."""
        client = self.owners[run.planned.owner].client
        if run.fault is Fault.CONCURRENT_SUBMITS:
            self._concurrent_submits(run, client)
        else:
            self._submit(run, client)
        job_id = run.job_id
        if job_id is None:
            return
        if run.planned.stream and self.followers:
            self.followers[run.planned.owner].follow(job_id)
            if self.prober_follower is not None:
                self.prober_follower.follow(job_id)
        if run.fault is Fault.DUPLICATE_DELIVERY:
            self._duplicate_deliveries(job_id, run)
        elif run.fault is Fault.CANCEL_AFTER_SUBMIT:
            self._cancel(run, client, "after submit")
        elif run.fault is Fault.CANCEL_WHEN_RUNNING:
            watcher = threading.Thread(target=self._cancel_when_running, args=(run, client), daemon=True)
            watcher.start()
            self._watchers.append(watcher)
        self.probe(run, "live")

    def _note_retry(self, run: JobRun) -> Callable[[str], None]:
        def note(reason: str) -> None:
            with run.lock:
                run.submit_errors.append(reason)

        return note

    def _submit(self, run: JobRun, client: HttpApi) -> None:
        planned = run.planned
        try:
            answer = self.retrying.call(
                lambda: client.submit(planned.request, planned.key), self._note_retry(run)
            )
        except ApiError as error:
            if error.status in RETRYABLE_STATUSES:
                run.abandoned = f"HTTP {error.status}"
            else:
                run.refused = f"HTTP {error.status} {error.code or ''}".strip()
            return
        except TransportError as error:
            run.abandoned = type(error).__name__
            return
        with run.lock:
            run.job_ids.add(answer.body["jobId"])
            run.replayed = run.replayed or answer.replayed
            run.fresh_answers += 0 if answer.replayed else 1
            run.accepted_at = time.monotonic()

    def _concurrent_submits(self, run: JobRun, client: HttpApi) -> None:
        start = threading.Barrier(CONCURRENT_SUBMITS)

        def one() -> None:
            start.wait()
            self._submit(run, client)

        threads = [threading.Thread(target=one, daemon=True) for _ in range(CONCURRENT_SUBMITS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        run.submit_calls = CONCURRENT_SUBMITS

    def _duplicate_deliveries(self, job_id: str, run: JobRun) -> None:
        """The job's message again: once, then two copies at the same moment."""
        body = json.dumps({"jobId": job_id, "traceId": f"chaos-{self.plan.run_id}-copy"})

        def send() -> None:
            self.sqs.send_message(QueueUrl=self.jobs_queue, MessageBody=body)
            with run.lock:
                run.copies_sent += 1

        send()
        start = threading.Barrier(2)

        def together() -> None:
            start.wait()
            send()

        pair = [threading.Thread(target=together, daemon=True) for _ in range(2)]
        for thread in pair:
            thread.start()
        for thread in pair:
            thread.join()

    def _cancel(self, run: JobRun, client: HttpApi, saw: str) -> None:
        job_id = run.job_id
        if job_id is None:
            return
        try:
            answer = self.retrying.call(lambda: client.cancel(job_id))
            run.cancel_answer = answer.status
        except ApiError as error:
            run.cancel_answer = error.status  # 409: it had already ended, the race went the other way
        except TransportError:
            run.cancel_answer = -1
        run.cancel_saw = saw

    def _cancel_when_running(self, run: JobRun, client: HttpApi) -> None:
        job_id = run.job_id
        if job_id is None:
            return
        deadline = time.monotonic() + self.options.drain_timeout
        while time.monotonic() < deadline:
            try:
                status = self.retrying.call(lambda: client.get_job(job_id)).body["status"]
            except (ApiError, TransportError):
                status = "unknown"
            if status == "Running" or status in TERMINAL_STATUSES:
                self._cancel(run, client, status)
                return
            time.sleep(POLL_SECONDS)

    # --- the second owner --------------------------------------------------------------------

    def probe(self, run: JobRun, phase: str) -> None:
        """Status, result and cancel of someone else's job: each must be a 404."""
        job_id, prober = run.job_id, self.prober
        if job_id is None or prober is None:
            return
        calls: dict[str, Callable[[], Answer[Any]]] = {
            "status": lambda: prober.client.get_job(job_id),
            "result": lambda: prober.client.get_result(job_id),
            "cancel": lambda: prober.client.cancel(job_id),
        }
        for name, call in calls.items():
            try:
                answer = self.retrying.call(call)
            except ApiError as error:
                if error.status != 404:
                    run.leaks.append(f"{phase} {name}: {error.status}")
                continue
            except TransportError:
                continue
            run.leaks.append(f"{phase} {name}: {answer.status}")

    # --- the whole run -----------------------------------------------------------------------

    def submit_all(self) -> None:
        """Every job through a bounded pool of clients."""
        self.times.started = time.monotonic()
        reported = time.monotonic()
        with ThreadPoolExecutor(self.options.concurrency, thread_name_prefix="chaos-client") as pool:
            for done, _ in enumerate(pool.map(self.drive, self.runs), start=1):
                if time.monotonic() - reported > 15:
                    retries = sum(len(run.submit_errors) for run in self.runs)
                    self.log(f"submitted {done} of {len(self.runs)} ({retries} client retries so far)")
                    reported = time.monotonic()
        accepted = [run.accepted_at for run in self.runs if run.accepted_at is not None]
        self.times.last_accepted = max(accepted, default=self.times.started)
        for watcher in self._watchers:
            watcher.join(timeout=self.options.drain_timeout)

    def list_all(self, owner: Owner) -> list[JsonObject]:
        """Every job in an owner's list, page by page."""
        items: list[JsonObject] = []
        cursor: str | None = None
        while True:
            page = self.retrying.call(functools.partial(owner.client.list_jobs, None, 100, cursor)).body
            items.extend(page["items"])
            cursor = page["nextCursor"]
            if cursor is None:
                return items

    def drain(self) -> None:
        """Wait until every accepted job is terminal (read from the owners' lists), or time runs out."""
        waiting = {run.job_id for run in self.runs if run.job_id is not None}
        owner_of = {run.job_id: self.owners[run.planned.owner] for run in self.runs if run.job_id}
        deadline = self.times.last_accepted + self.options.drain_timeout
        reported = time.monotonic()
        while waiting and time.monotonic() < deadline:
            for owner in {id(owner_of[job_id]): owner_of[job_id] for job_id in waiting}.values():
                for item in self.list_all(owner):
                    if item["status"] in TERMINAL_STATUSES:
                        waiting.discard(item["jobId"])
            if time.monotonic() - reported > 10:
                self.log(f"draining: {len(waiting)} job(s) not terminal yet")
                reported = time.monotonic()
            if waiting:
                time.sleep(DRAIN_POLL_SECONDS)
        if not waiting:
            self.times.drained = time.monotonic()
        self.followed = [follower.close() for follower in self.followers]
        if self.prober_follower is not None:
            self.prober_followed = self.prober_follower.close()


def new_run_id() -> str:
    """A short random id that keeps users, keys and texts of this run apart from earlier runs."""
    return secrets.token_hex(3)


def drive_plan(target: Target, plan: Plan, options: DriverOptions) -> Driver:
    """Sign in, park the poison, submit every job with its fault, drain."""
    if target.chaos is None:
        options.log("warning: this stack runs without --chaos: process faults will not fire")
    driver = Driver(target, plan, options)
    options.log(f"run {plan.run_id}: {len(plan.jobs)} jobs, seed {plan.seed}, {plan.owners} owners")
    driver.sign_in()
    driver.send_poison()
    parked = sum(reason is not None for reason in driver.poison_parked.values())
    options.log(f"poison: {parked} of {len(plan.poison)} parked on the DLQ; submitting...")
    driver.submit_all()
    options.log("all submitted; draining...")
    driver.drain()
    return driver
