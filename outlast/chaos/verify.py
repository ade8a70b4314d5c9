"""After the drain: read back every job, list, table item, model call and injected fault, and count.

Nothing here trusts what the driver saw during the run alone: final states are read strongly
consistent through the API, duplicates are looked for in the owners' lists and in the jobs
table itself, and model calls come from the model server's own log, attributed to jobs by the
hash of the messages the worker renders from each job's unique text.
"""

from __future__ import annotations

import functools
import json
import time
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from outlast.api.http import TERMINAL_STATUSES, ApiError, HttpApi, JsonObject, TransportError
from outlast.chaos.driver import Driver, JobRun
from outlast.chaos.plan import PROFILES, Fault
from outlast.chaos.provider_batches import check_provider_batches
from outlast.chaos.report import ChaosReport, KindRow
from outlast.local.access import local_client
from outlast.local.fake_model.requests import messages_hash
from outlast.local.iam.enforcement import denial_summary
from shared import resources as r
from shared.adapters.dynamo_items import job_id_of
from shared.adapters.dynamodb_budgets import DynamoBudgetLedger
from shared.adapters.dynamodb_jobs import DynamoJobRepository
from shared.adapters.step_checkpoints import DynamoStepStore
from shared.contract import Operation
from shared.idempotency import scope_hash
from shared.job import JobRecord, StepOutput
from shared.plan_parameters import PlanParameters
from shared.planner import StepKind, plan_job, step_messages
from shared.prompts import template_for

MAX_ATTEMPTS = 3  # the stack's default maxAttempts: each claim makes at most one model call
# How long the budget check waits for the last settlements: the sweeper repairs one the notifier
# missed a grace (the chaos stack's dispatchGraceSeconds, 6 s) after its reservation, every 2 s.
SETTLEMENT_WAIT_SECONDS = 60.0
# The model server's outcome for each provider fault, to tell that the fault really happened.
_PROVIDER_OUTCOMES = {
    Fault.PROVIDER_429_STORM: "rate_limit",
    Fault.PROVIDER_5XX_STORM: "server_error",
    Fault.PROVIDER_TIMEOUT: "timeout",
    Fault.PROVIDER_CONTENT_POLICY: "content_policy",
    Fault.PROVIDER_STREAM_CUT: "stream_cut",
}


@dataclass
class Observed:
    """What the stack says now about one accepted job."""

    run: JobRun
    document: JsonObject | None  # None: 404 to its own owner
    result: str  # "ok", "absent" (409), or what went wrong
    calls: list[dict[str, object]]
    output: str | None = None  # the result's output, when there is one
    total_steps: int = 1  # the job's plan: one call per step when nothing fails
    hashes: frozenset[str] = frozenset()  # the model server's keys of this job's calls

    @property
    def status(self) -> str:
        """The final status, or `missing`."""
        return self.document["status"] if self.document is not None else "missing"


def _job_id_of(body: str) -> str | None:
    try:
        value = json.loads(body).get("jobId")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def request_hashes(run: JobRun, job: JobRecord | None, checkpoints: Mapping[str, StepOutput]) -> set[str]:
    """The model server's keys for the calls the worker makes for this job: one per step of the
    plan it makes from the stored parameters. A reduce's messages hold its children's outputs,
    read from the checkpoints (a reduce whose children were never all written was never called)."""
    planned = run.planned
    operation = Operation(planned.request["operation"])
    plan = plan_job(
        planned.text,
        operation,
        job.plan if job is not None else PlanParameters(),
        prompt_version=job.prompt_version if job is not None else template_for(operation).version,
        labels=planned.labels,
        schema=(planned.request.get("options") or {}).get("schema"),
    )
    hashes = set()
    for step in plan.steps:
        if step.kind is not StepKind.REDUCE:
            hashes.add(messages_hash(step_messages(plan, step)))
        elif all(child in checkpoints for child in step.inputs):
            children = [checkpoints[child].output for child in step.inputs]
            hashes.add(messages_hash(step_messages(plan, step, children)))
    return hashes


class Verifier:
    """Reads the end state of one driven run and builds its report."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self.report = ChaosReport(
            run_id=driver.plan.run_id,
            seed=driver.plan.seed,
            planned=len(driver.plan.jobs),
            owners=driver.plan.owners,
        )
        self.accepted = [run for run in driver.runs if run.job_id is not None]
        self.observed: dict[str, Observed] = {}
        self.collateral: set[str] = set()
        self.crashed_batches: Counter[str] = Counter()  # job id -> worker deaths it shared a batch with
        dynamodb = local_client("dynamodb", driver.target.state)
        table = driver.target.table("StorageJobsTable")
        self._repository = DynamoJobRepository(dynamodb, table, idempotency_table="")
        self._steps = DynamoStepStore(dynamodb, table)
        self.fired: dict[str, set[str]] = defaultdict(set)

    def verify(self) -> ChaosReport:
        """Every check, then the numbers."""
        report = self.report
        report.accepted = len(self.accepted)
        report.violations += [
            f"job {run.planned.index} ({run.fault}): the submit was refused: {run.refused}"
            for run in self.driver.runs
            if run.refused is not None
        ]
        self._read_jobs()
        self._read_events()
        self._check_terminal()
        self._check_cancels()
        self._check_calls()
        self._check_duplicates()
        self._check_leaks()
        self._check_streams()
        self._check_poison()
        self._check_queues()
        self._check_replays()
        self._check_provider_batches()  # before the budgets: an orphan's late usage comes in first
        report.iam_denials = denial_summary(self.driver.target.state)
        self._count()
        self._check_budgets()  # after the count: which jobs made the calls they were predicted
        return report

    # --- reads -------------------------------------------------------------------------------

    def _observe(self, run: JobRun, calls: dict[str, list[dict[str, object]]]) -> Observed:
        job_id = run.job_id
        assert job_id is not None  # noqa: S101 - only accepted runs get here
        client = self.driver.owners[run.planned.owner].client
        retrying = self.driver.retrying
        try:
            document: JsonObject | None = retrying.call(lambda: client.get_job(job_id)).body
        except ApiError as error:
            if error.status != 404:
                raise
            document = None
        result, output = "absent", None
        try:
            answer = retrying.call(lambda: client.get_result(job_id))
            output = answer.body["output"]
            result = "ok" if output else "empty output"
        except ApiError as error:
            result = "absent" if error.status == 409 else f"HTTP {error.status}"
        except TransportError as error:
            result = f"unreadable: {error.reason}"
        job = self._repository.get_job(job_id)
        checkpoints = self._steps.get_steps(job_id, datetime.now(UTC)) if job and job.total_steps > 1 else {}
        hashes = frozenset(request_hashes(run, job, checkpoints))
        mine = [call for key in hashes for call in calls.get(key, [])]
        return Observed(run, document, result, mine, output, job.total_steps if job else 1, hashes)

    def _read_jobs(self) -> None:
        with urllib.request.urlopen(self.driver.target.model_url + "/_calls", timeout=30) as response:  # noqa: S310 - loopback
            log: list[dict[str, object]] = json.loads(response.read())
        calls: dict[str, list[dict[str, object]]] = defaultdict(list)
        for call in log:
            calls[str(call.get("requestHash"))].append(call)
        with ThreadPoolExecutor(self.driver.options.concurrency) as pool:
            for observed in pool.map(lambda run: self._observe(run, calls), self.accepted):
                assert observed.run.job_id is not None  # noqa: S101
                self.observed[observed.run.job_id] = observed

    # --- checks ------------------------------------------------------------------------------

    def _check_terminal(self) -> None:
        for job_id, seen in self.observed.items():
            label = f"{job_id} (job {seen.run.planned.index}, {seen.run.fault})"
            if seen.document is None:
                self.report.lost.append(f"{label}: 404 to its owner")
            elif seen.status not in TERMINAL_STATUSES:
                self.report.lost.append(f"{label}: still {seen.status} after the drain")
            if seen.status == "Succeeded" and seen.result != "ok":
                self.report.violations.append(f"{label}: Succeeded but its result is {seen.result}")
            if seen.status != "Succeeded" and seen.result not in {"absent"}:
                self.report.violations.append(f"{label}: {seen.status} but its result is {seen.result}")
            self._check_document(label, seen)
        self.report.terminal = sum(seen.status in TERMINAL_STATUSES for seen in self.observed.values())

    def _check_document(self, label: str, seen: Observed) -> None:
        """The status document agrees with itself: a result URL and usage exactly when a call succeeded."""
        document = seen.document
        if document is None:
            return
        succeeded = document["status"] == "Succeeded"
        expected_url = f"/v1/jobs/{document['jobId']}/result" if succeeded else None
        if document["resultUrl"] != expected_url:
            self.report.violations.append(
                f"{label}: {document['status']} with resultUrl {document['resultUrl']}"
            )
        if succeeded and document["usage"] is None:
            self.report.violations.append(f"{label}: Succeeded without usage")

    def _check_replays(self) -> None:
        """One answer per key may say "created"; a retry that completed a crashed submit is a replay."""
        for job_id, seen in self.observed.items():
            run = seen.run
            if run.fresh_answers > 1:
                self.report.violations.append(
                    f"{job_id}: {run.fresh_answers} submits with key {run.planned.key} said they created it"
                )
            died = run.fault.process_fault is not None and run.fault.value.startswith("submit_death")
            if died and job_id in self.fired.get(run.fault.value, set()) and not run.replayed:
                self.report.violations.append(
                    f"{job_id}: the retry that completed a crashed submit did not say Idempotent-Replayed"
                )

    def _check_cancels(self) -> None:
        expected = {200: {"Canceled"}, 202: {"Canceled"}, 409: {"Succeeded", "Failed"}}
        for job_id, seen in self.observed.items():
            answer = seen.run.cancel_answer
            if answer is None:
                continue
            allowed = expected.get(answer)
            if allowed is None:
                self.report.violations.append(f"{job_id}: the owner's cancel got {answer}")
            elif seen.status not in allowed and seen.status in TERMINAL_STATUSES:
                self.report.violations.append(
                    f"{job_id}: cancel answered {answer} (job seen {seen.run.cancel_saw}) "
                    f"but the job ended {seen.status}"
                )

    def _check_calls(self) -> None:
        """At most one call per claim, and at most MAX_ATTEMPTS claims of a job's own, plus one per
        crashed batch it was in (such a claim is given back: crash isolation). A job in several
        steps makes one call per step in a claim: it must end with every step done when it
        Succeeded, and have made at least one call per step."""
        for job_id, seen in self.observed.items():
            if seen.document is None:
                continue
            if seen.total_steps > 1:
                self._check_steps(job_id, seen)
                continue
            attempts = seen.document["attempts"]
            allowed = MAX_ATTEMPTS + self.crashed_batches[job_id]
            if len(seen.calls) > max(attempts, 0) or len(seen.calls) > allowed:
                self.report.violations.append(
                    f"{job_id} ({seen.run.fault}): {len(seen.calls)} model calls for {attempts} attempts"
                )

    def _check_steps(self, job_id: str, seen: Observed) -> None:
        document = seen.document
        if document is None or document["status"] != "Succeeded":
            return
        progress = document.get("progress") or {"completedSteps": 0, "totalSteps": 1}
        if progress["completedSteps"] != progress["totalSteps"] or progress["totalSteps"] != seen.total_steps:
            self.report.violations.append(f"{job_id}: Succeeded with progress {progress}")
        answered = [call for call in seen.calls if call.get("outcome") == "ok"]
        if len({call.get("requestHash") for call in answered}) < seen.total_steps:
            self.report.violations.append(
                f"{job_id}: Succeeded in {seen.total_steps} steps with answers to only "
                f"{len({call.get('requestHash') for call in answered})} of them"
            )

    def _list_ids(self) -> dict[str, list[str]]:
        return {
            owner.owner_key: [item["jobId"] for item in self.driver.list_all(owner)]
            for owner in self.driver.owners
        }

    def _table_jobs(self) -> dict[str, str]:
        """Job id -> status of every job item the run's owners have in the jobs table."""
        wanted = {owner.owner_key for owner in self.driver.owners}
        dynamodb = local_client("dynamodb", self.driver.target.state)
        found: dict[str, str] = {}
        pages = dynamodb.get_paginator("scan").paginate(
            TableName=self.driver.target.table("StorageJobsTable"),
            FilterExpression="#type = :job",
            ProjectionExpression="pk, ownerKey, #status",
            ExpressionAttributeNames={"#type": r.TYPE_ATTRIBUTE, "#status": "status"},
            ExpressionAttributeValues={":job": {"S": r.JOB_ITEM_TYPE}},
        )
        for page in pages:
            for item in page.get("Items", []):
                if item.get("ownerKey", {}).get("S") in wanted:
                    found[job_id_of(item)] = item["status"]["S"]
        return found

    def _claims(self) -> dict[int, str]:
        """Planned job index -> the job id its idempotency claim names (read from the table)."""
        dynamodb = local_client("dynamodb", self.driver.target.state)
        table = self.driver.target.table("StorageIdempotencyTable")
        index_of: dict[str, int] = {}
        for run in self.driver.runs:
            caller = self.driver.owners[run.planned.owner].caller
            # The claim item's key, as shared/adapters/dynamo_items.py writes it.
            index_of[f"IDEM#{scope_hash(caller, run.planned.key)}"] = run.planned.index
        keys = list(index_of)
        found: dict[int, str] = {}
        for start in range(0, len(keys), 100):
            request: Any = {
                table: {
                    "Keys": [{r.IDEMPOTENCY_PARTITION_KEY: {"S": key}} for key in keys[start : start + 100]],
                    "ConsistentRead": True,
                }
            }
            while request:
                response = dynamodb.batch_get_item(RequestItems=request)
                for item in response["Responses"].get(table, []):
                    found[index_of[item[r.IDEMPOTENCY_PARTITION_KEY]["S"]]] = item["jobId"]["S"]
                request = response.get("UnprocessedKeys") or None
        return found

    def _check_duplicates(self) -> None:
        """One job per key: what submits answered, the claims, the lists and the table must agree."""
        claims, stored = self._claims(), self._table_jobs()
        claimed = set(claims.values())
        duplicates: dict[str, str] = {}
        for run in self.driver.runs:
            claim = claims.get(run.planned.index)
            for job_id in run.job_ids - {claim}:
                duplicates[job_id] = f"answered for key {run.planned.key}, whose claim names {claim}"
            if run.job_id is None:
                service_side = stored.get(claim, "no job item") if claim else "no claim"
                reason = run.abandoned or run.refused
                self.report.abandoned.append(
                    f"job {run.planned.index} ({run.fault}): {reason}; service side: {service_side}"
                )
        for job_id, status in stored.items():
            if job_id not in claimed:
                duplicates[job_id] = f"a job item ({status}) that no idempotency claim of the run names"
        self._check_lists(claimed, duplicates)
        self.report.duplicates = [f"{job_id}: {why}" for job_id, why in sorted(duplicates.items())]

    def _check_lists(self, claimed: set[str], duplicates: dict[str, str]) -> None:
        for owner_key, listed in self._list_ids().items():
            for job_id, count in Counter(listed).items():
                if job_id not in claimed:
                    duplicates[job_id] = f"in the list of {owner_key}, no idempotency claim names it"
                elif count > 1:
                    duplicates.setdefault(job_id, f"listed {count} times")
            owned = {run.job_id for run in self.accepted if run.job_id and self._owner_key(run) == owner_key}
            self.report.violations += [
                f"{job_id}: missing from its owner's list" for job_id in sorted(owned - set(listed))
            ]

    def _owner_key(self, run: JobRun) -> str:
        return self.driver.owners[run.planned.owner].owner_key

    def _check_leaks(self) -> None:
        driver = self.driver
        with ThreadPoolExecutor(driver.options.concurrency) as pool:
            list(pool.map(lambda run: driver.probe(run, "after"), self.accepted))
        leaks = [f"{run.job_id}: {leak}" for run in self.accepted for leak in run.leaks]
        if driver.prober is not None:
            ours = {job_id for run in self.accepted for job_id in run.job_ids}
            leaks += [
                f"{item['jobId']}: in the second owner's list"
                for item in driver.list_all(driver.prober)
                if item["jobId"] in ours
            ]
        self.report.leaks = leaks
        self.report.probes = 6 * len(self.accepted) + 1

    def _check_streams(self) -> None:
        """Every Succeeded streaming job: its result attempt's events are gapless from 1 and join to
        its result. Every output message a follower got: its own owner's job (leaks otherwise)."""
        for job_id, seen in self.observed.items():
            if not seen.run.planned.stream or seen.status != "Succeeded" or seen.output is None:
                continue
            self.report.streamed += 1
            client = self.driver.owners[seen.run.planned.owner].client
            events, result_attempt = self._events(client, job_id)
            mine = sorted((e for e in events if e["attempt"] == result_attempt), key=lambda e: e["seq"])
            if result_attempt is None or [e["seq"] for e in mine] != list(range(1, len(mine) + 1)):
                self.report.violations.append(
                    f"{job_id}: its result attempt {result_attempt}'s events are not gapless: "
                    f"{[e['seq'] for e in mine][:20]}"
                )
            elif "".join(e["text"] for e in mine) != seen.output:
                self.report.violations.append(
                    f"{job_id}: attempt {result_attempt}'s events do not join to its result"
                )
        owner_of = {run.job_id: run.planned.owner for run in self.accepted if run.job_id is not None}
        for index, received in enumerate(self.driver.followed):
            self.report.output_messages += len(received.outputs)
            self.report.leaks += [
                f"{job_id}: output {attempt}.{seq} reached a connection of owner {index}"
                for job_id, attempt, seq in received.outputs
                if owner_of.get(job_id) != index
            ]
        prober = self.driver.prober_followed
        if prober is not None:
            self.report.leaks += [
                f"{job_id}: output {attempt}.{seq} reached the second owner's connection"
                for job_id, attempt, seq in prober.outputs
            ]

    def _events(self, client: HttpApi, job_id: str) -> tuple[list[JsonObject], int | None]:
        """Every output event of the job (all pages), and its result's attempt."""
        events: list[JsonObject] = []
        after = "0.0"
        while True:
            page = self.driver.retrying.call(functools.partial(client.get_output, job_id, after=after)).body
            events += page["events"]
            if page["complete"] or not page["events"]:
                return events, page["resultAttempt"]
            after = page["nextCursor"]

    def _check_poison(self) -> None:
        expected = {poison.body: poison.reason for poison in self.driver.plan.poison}
        parked = self.driver.poison_parked
        self.report.poison_sent = len(expected)
        self.report.poison_parked = dict(Counter(reason for reason in parked.values() if reason is not None))
        for body, reason in expected.items():
            got = parked.get(body)
            if got != reason:
                state = "not on the DLQ" if got is None else f"parked as {got}"
                self.report.violations.append(f"poison {body[:48]!r}: {state}, expected reason={reason}")

    def _check_queues(self) -> None:
        """A job's own message on the DLQ as poison is a bug; moved there by redrive, worth knowing."""
        target, sqs = self.driver.target, self.driver.sqs
        ours = {job_id for run in self.accepted for job_id in run.job_ids}
        for name in ("OutboxJobsDlq", "OutboxIsolationDlq"):
            self._check_dlq(target.queue_url(name), name, ours)
        attributes = sqs.get_queue_attributes(
            QueueUrl=target.queue_url("OutboxRelayFailures"), AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        self.report.relay_batches_given_up = int(attributes.get("ApproximateNumberOfMessages", 0))

    def _check_provider_batches(self) -> None:
        found = check_provider_batches(self.driver.target)
        self.report.provider_batches = found.created
        self.report.provider_batches_cancelled = found.cancelled
        self.report.batch_leftovers = found.leftovers

    def _check_dlq(self, url: str, name: str, ours: set[str]) -> None:
        for _ in range(100):  # at most 1,000 messages: far more than a run parks
            messages = self.driver.sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=300, MessageAttributeNames=["All"]
            ).get("Messages", [])
            if not messages:
                return
            for message in messages:
                job_id = _job_id_of(message.get("Body", ""))
                if job_id not in ours:
                    continue
                reason = message.get("MessageAttributes", {}).get("reason", {}).get("StringValue")
                self.report.job_messages_on_dlq.append(
                    f"{job_id} ({name}): {reason or 'moved by the redrive policy'}"
                )
                if reason is not None:
                    self.report.violations.append(f"{job_id}: its message was parked on {name} as {reason}")

    def _check_budgets(self) -> None:
        """The budget ledger against the tokens the model server says it served, per job.

        The ledger's record of each job is what its closed reservations counted (settled_runs);
        the server's is its own tally, per request hash, which the run attributes to jobs by the
        hashes of each job's calls (every job's text is unique). Per job the ledger is at most the
        tally (a killed worker's or an abandoned call's tokens were served and never read), and
        equal for a job no fault touched; nothing may stay reserved. Settlement follows a job's
        end (the notifier, else the sweeper a grace later), so the counters are read until
        nothing is reserved or the wait runs out. Never compared with the job documents: the
        ledger was settled from them."""
        target = self.driver.target
        if target.default_monthly_tokens == 0:
            return
        ledger = DynamoBudgetLedger(
            local_client("dynamodb", target.state), target.table("BudgetsBudgetsTable")
        )
        tenants = sorted({owner.caller.tenant for owner in self.driver.owners})
        deadline = time.monotonic() + SETTLEMENT_WAIT_SECONDS
        while True:
            states = [state for tenant in tenants for state in ledger.periods(tenant)]
            if sum(state.reserved for state in states) == 0 or time.monotonic() > deadline:
                break
            time.sleep(1)
        with urllib.request.urlopen(target.model_url + "/_tally", timeout=30) as response:  # noqa: S310 - loopback
            tally: dict[str, dict[str, int]] = json.loads(response.read())
        report = self.report
        report.budget_mismatches = []
        report.budget_reserved = sum(state.reserved for state in states)
        if report.budget_reserved:
            report.budget_mismatches.append(f"{report.budget_reserved} tokens still reserved after the drain")
        for job_id, seen in self.observed.items():
            # What its runs' settlements counted, and the usage of its batches' late answers.
            charged = sum(ledger.settled_runs(job_id).values()) + sum(ledger.late_counted(job_id).values())
            served = sum(
                tally.get(key, {}).get("inputTokens", 0) + tally.get(key, {}).get("outputTokens", 0)
                for key in seen.hashes
            )
            exact = self._untouched(seen)
            report.budget_jobs += 1
            report.budget_charged += charged
            report.budget_served += served
            report.budget_exact_jobs += exact
            label = f"{job_id} ({seen.run.fault})"
            if charged > served:
                report.budget_mismatches.append(
                    f"{label}: the ledger charged {charged} tokens, {served} were served"
                )
            elif exact and charged != served:
                report.budget_mismatches.append(
                    f"{label}: untouched by faults, the ledger charged {charged} of {served} tokens served"
                )

    def _untouched(self, seen: Observed) -> bool:
        """A job no fault touched: no fault of its own, no crashed batch, the calls it was predicted."""
        if seen.run.fault is not Fault.NONE or seen.run.job_id in self.collateral:
            return False
        return not any(line.startswith(f"{seen.run.job_id} ") for line in self.report.unexplained_calls)

    def _read_events(self) -> None:
        chaos = self.driver.target.chaos
        if chaos is None:
            return
        ours = {job_id for run in self.accepted for job_id in run.job_ids}
        for event in chaos.events():
            job_id = str(event.get("jobId"))
            if job_id not in ours:
                continue
            kind = str(event.get("kind"))
            self.fired[kind].add(job_id)
            if kind.startswith("worker_death"):
                others = [other for other in event.get("batch", []) if other != job_id]
                self.collateral.update(others)
                self.crashed_batches.update(others)
        self.collateral &= ours
        self.report.faults_fired = {kind: len(jobs) for kind, jobs in sorted(self.fired.items())}

    # --- numbers -----------------------------------------------------------------------------

    def _job_detail(self, seen: Observed) -> dict[str, object]:
        run, document = seen.run, seen.document
        error = document["error"] if document else None
        return {
            "index": run.planned.index,
            "fault": run.fault.value,
            "jobId": run.job_id,
            "status": seen.status,
            "error": error["code"] if error else None,
            "attempts": document["attempts"] if document else None,
            "modelCalls": [call.get("outcome") for call in seen.calls],
            "submitRetries": run.submit_errors,
            "replayed": run.replayed,
            "cancel": run.cancel_answer,
            "cancelSaw": run.cancel_saw,
            "copiesSent": run.copies_sent,
            "inCrashedBatch": run.job_id in self.collateral,
        }

    def _injected(self, fault: Fault, seen: list[Observed]) -> int | None:
        if fault is Fault.NONE:
            return None
        if fault.process_fault is not None:
            return sum(s.run.job_id in self.fired.get(fault.value, set()) for s in seen)
        if fault in _PROVIDER_OUTCOMES:
            outcome = _PROVIDER_OUTCOMES[fault]
            return sum(any(call.get("outcome") == outcome for call in s.calls) for s in seen)
        # The faults the driver causes itself, each seen in what it did (or what the plan made).
        caused: dict[Fault, Callable[[Observed], bool]] = {
            Fault.DUPLICATE_DELIVERY: lambda s: s.run.copies_sent == 3,
            Fault.CONCURRENT_SUBMITS: lambda s: s.run.submit_calls > 1,
            Fault.LONG_INPUT: lambda s: s.total_steps > 1,  # planned in steps, as meant
        }

        def canceled(s: Observed) -> bool:
            return s.run.cancel_answer is not None

        happened = caused.get(fault, canceled)
        return sum(happened(s) for s in seen)

    def _check_costs(self, fault: Fault, seen: list[Observed]) -> None:
        """Outside crashed batches, a job that ended as predicted made exactly the predicted calls."""
        profile = PROFILES[fault]
        if profile.extra_calls is None:
            return
        expected = 1 + int(profile.extra_calls)
        for s in seen:
            if s.run.job_id in self.collateral or s.status not in profile.outcomes:
                continue
            if len(s.calls) != expected:
                outcomes = ", ".join(str(call.get("outcome")) for call in s.calls) or "none"
                self.report.unexplained_calls.append(
                    f"{s.run.job_id} ({fault}): {len(s.calls)} model calls ({outcomes}), expected {expected}"
                )

    def _count(self) -> None:
        report, observed = self.report, list(self.observed.values())
        report.calls = sum(len(s.calls) for s in observed)
        report.succeeded = sum(s.status == "Succeeded" for s in observed)
        clean = [
            s
            for s in observed
            if s.run.fault is Fault.NONE and s.run.job_id not in self.collateral and s.status == "Succeeded"
        ]
        report.baseline = sum(len(s.calls) for s in clean) / len(clean) if clean else 1.0
        for fault in Fault:
            seen = [s for s in observed if s.run.fault is fault]
            if not seen:
                continue
            profile = PROFILES[fault]
            calls = sum(len(s.calls) for s in seen)
            report.rows.append(
                KindRow(
                    kind=fault.value,
                    jobs=len(seen),
                    injected=self._injected(fault, seen),
                    succeeded=sum(s.status == "Succeeded" for s in seen),
                    failed=sum(s.status == "Failed" for s in seen),
                    canceled=sum(s.status == "Canceled" for s in seen),
                    unfinished=sum(s.status not in TERMINAL_STATUSES for s in seen),
                    calls=calls,
                    extra_per_job=calls / len(seen) - report.baseline,
                    expected_extra=profile.extra_calls,
                    proves=profile.proves,
                )
            )
            self._check_costs(fault, seen)
            for s in seen:
                if s.status in TERMINAL_STATUSES and s.status not in profile.outcomes:
                    error = s.document["error"] if s.document else None
                    code = f" ({error['code']})" if error else ""
                    crash = ", in a batch a worker died with" if s.run.job_id in self.collateral else ""
                    line = f"{s.run.job_id} ({fault}): {s.status}{code}{crash}"
                    if s.status == "Failed":
                        report.blameless_failures.append(line)
                    else:
                        report.unexpected.append(line)
        collateral = [s for s in observed if s.run.job_id in self.collateral]
        report.collateral_jobs = len(collateral)
        if collateral:
            extra = [
                len(s.calls) - report.baseline - (PROFILES[s.run.fault].extra_calls or 0) for s in collateral
            ]
            report.collateral_extra = sum(extra) / len(extra)
        report.client_retries = sum(len(run.submit_errors) for run in self.driver.runs)
        report.jobs = [self._job_detail(s) for s in observed]
        times = self.driver.times
        if times.drained is not None:
            report.run_seconds = times.drained - times.started
            report.drain_seconds = max(0.0, times.drained - times.last_accepted)
