"""`outlast ops webhooks ...`: webhook endpoints and their deliveries, for operators (AWS credentials).

Endpoints are registered per tenant by operators, never through the public API (no SSRF
through it). A signing secret is printed once, by `add` and by `rotate`, and never logged.
See docs/runbook.md#manage-webhook-endpoints and #webhooks-dlq-not-empty.
"""

from __future__ import annotations

import time
from collections import Counter
from types import SimpleNamespace
from typing import Any

from outlast.cli.console import Console
from outlast.cli.errors import CliError, ExitCode
from outlast.operator import webhooks as w
from outlast.operator.commands.dlq import now
from outlast.operator.dispatch import Result
from outlast.operator.dlq import held_messages
from outlast.operator.targets import resolve
from outlast.operator.text import instant
from shared.adapters.webhook_http import resolve_system
from shared.errors import EgressRefusedError
from shared.webhooks.endpoints import Delivery, Endpoint, is_endpoint_id, parse_events
from shared.webhooks.events import EventType


def _endpoint_document(endpoint: Endpoint) -> dict[str, Any]:
    return {
        "endpointId": endpoint.endpoint_id,
        "tenant": endpoint.tenant,
        "url": endpoint.url,
        "events": [e.value for e in endpoint.events],
        "enabled": endpoint.enabled,
        "disabledReason": endpoint.disabled_reason,
        "disabledAt": instant(endpoint.disabled_at) if endpoint.disabled_at else None,
        "createdAt": instant(endpoint.created_at),
        "previousSecretSignsUntil": (
            instant(endpoint.previous_secret_until) if endpoint.previous_secret_until else None
        ),
    }


def _checked_id(text: str) -> str:
    if not is_endpoint_id(text):
        raise CliError(f"{text!r} is not an endpoint id (ep_ and 16 hex digits)")
    return text


def _events(given: list[str]) -> Any:
    known = {e.value for e in EventType}
    unknown = sorted(set(given) - known)
    if unknown:
        raise CliError(f"--event {unknown[0]!r} is not one of: {', '.join(sorted(known))}")
    return parse_events(given)


# --- add, list, remove, enable, rotate ----------------------------------------------------------


def add(arguments: SimpleNamespace, console: Console) -> int:
    """`ops webhooks add`: register an endpoint; its signing secret is printed once."""
    events = _events(list(arguments.event))
    target = resolve(arguments)
    try:
        endpoint, secret = w.add_endpoint(
            target.webhooks,
            arguments.tenant,
            arguments.url,
            events=events,
            now=now(),
            resolve=resolve_system,
            local_only=target.local,
        )
    except EgressRefusedError as refusal:
        raise CliError(f"the URL is refused ({refusal.reason.value}): {refusal.detail}") from None
    human = "\n".join(
        [
            f"endpoint {endpoint.endpoint_id} added for tenant {endpoint.tenant} on the {target.label}",
            f"  url     {endpoint.url}",
            f"  events  {', '.join(e.value for e in endpoint.events)}",
            "signing secret (shown this once: hand it to the receiver's team now):",
            secret,
        ]
    )
    console.show(human, {**_endpoint_document(endpoint), "secret": secret})
    return ExitCode.OK


def list_endpoints(arguments: SimpleNamespace, console: Console) -> int:
    """`ops webhooks list`: endpoints (never their secrets)."""
    target = resolve(arguments)
    store = target.webhooks
    endpoints = store.endpoints_of(arguments.tenant) if arguments.tenant else store.all_endpoints()
    if console.json_mode:
        console.show(None, {"target": target.label, "endpoints": [_endpoint_document(e) for e in endpoints]})
        return ExitCode.OK
    console.line(f"{len(endpoints)} endpoint(s) on the {target.label}")
    if endpoints:
        rows = [
            [
                e.endpoint_id,
                e.tenant,
                "enabled" if e.enabled else f"disabled {instant(e.disabled_at)}: {e.disabled_reason}",
                ",".join(event.value.removeprefix("job.") for event in e.events),
                f"until {instant(e.previous_secret_until)}"
                if e.previous_secret_until and e.previous_secret_until > now()
                else "-",
                e.url,
            ]
            for e in endpoints
        ]
        console.table(["ID", "TENANT", "STATE", "EVENTS", "TWO SECRETS", "URL"], rows)
    return ExitCode.OK


def remove(arguments: SimpleNamespace, console: Console) -> int:
    """`ops webhooks remove`: queued deliveries are dropped."""
    endpoint_id = _checked_id(arguments.endpoint_id)
    target = resolve(arguments)
    removed = target.webhooks.remove_endpoint(endpoint_id)
    if removed is None:
        console.note(f"no endpoint {endpoint_id} on the {target.label}")
        return ExitCode.FAILED
    console.line(f"removed endpoint {endpoint_id} of tenant {removed.tenant} ({removed.url})")
    return ExitCode.OK


def enable(arguments: SimpleNamespace, console: Console) -> int:
    """`ops webhooks enable`: after a 410 (or an operator) disabled it."""
    endpoint_id = _checked_id(arguments.endpoint_id)
    target = resolve(arguments)
    if not target.webhooks.set_enabled(endpoint_id, True, None, now()):
        console.note(f"no endpoint {endpoint_id} on the {target.label}")
        return ExitCode.FAILED
    console.line(
        f"endpoint {endpoint_id} enabled: new events reach it; `ops webhooks redrive --endpoint` for the DLQ"
    )
    return ExitCode.OK


def rotate(arguments: SimpleNamespace, console: Console) -> int:
    """`ops webhooks rotate`: a new signing secret; the old one signs 24 h more."""
    endpoint_id = _checked_id(arguments.endpoint_id)
    target = resolve(arguments)
    try:
        rotated, secret = w.rotate(target.webhooks, endpoint_id, now(), force=arguments.force)
    except w.RotationRefused as refusal:
        console.note(f"outlast: not rotated: {refusal}")
        return ExitCode.FAILED
    until = instant(rotated.previous_until)
    human = (
        f"endpoint {endpoint_id}: new signing secret; the previous one also signs until {until}\n"
        f"new signing secret (shown this once: hand it to the receiver's team now):\n{secret}"
    )
    console.show(human, {"endpointId": endpoint_id, "secret": secret, "previousSecretSignsUntil": until})
    return ExitCode.OK


# --- deliveries ---------------------------------------------------------------------------------


def _delivery_document(delivery: Delivery) -> dict[str, Any]:
    return {
        "endpointId": delivery.endpoint_id,
        "webhookId": delivery.webhook_id,
        "type": delivery.event_type.value,
        "jobId": delivery.job_id,
        "eventTime": instant(delivery.event_time),
        "state": delivery.state.value,
        "attempts": [
            {
                "number": a.number,
                "at": instant(a.at),
                "status": a.status,
                "latencyMs": a.latency_ms,
                "failure": a.failure,
                "outcome": a.outcome.value,
            }
            for a in delivery.attempts
        ],
    }


def deliveries(arguments: SimpleNamespace, console: Console) -> int:
    """`ops webhooks deliveries`: recent deliveries and every attempt at them, newest first."""
    target = resolve(arguments)
    store = target.webhooks
    if arguments.endpoint_id is not None:
        endpoint_id = _checked_id(arguments.endpoint_id)
        if store.get_endpoint(endpoint_id) is None and not store.deliveries_of(endpoint_id, 1):
            console.note(f"no endpoint {endpoint_id} on the {target.label}")
            return ExitCode.FAILED
        endpoint_ids = [endpoint_id]
    else:
        endpoint_ids = [e.endpoint_id for e in store.all_endpoints()]
    found = [d for eid in endpoint_ids for d in store.deliveries_of(eid, arguments.limit)]
    found.sort(key=lambda d: (d.event_time, d.webhook_id), reverse=True)
    if console.json_mode:
        console.show(None, {"target": target.label, "deliveries": [_delivery_document(d) for d in found]})
        return ExitCode.OK
    console.line(
        f"{len(found)} deliver{'y' if len(found) == 1 else 'ies'} on the {target.label}, newest first"
    )
    if found:
        rows = []
        for d in found:
            last = d.last_attempt
            answer = (
                "-"
                if last is None
                else (str(last.status) if last.status is not None else last.failure or "-")
            )
            rows.append(
                [
                    instant(d.event_time),
                    d.endpoint_id,
                    d.state.value,
                    str(len(d.attempts)),
                    answer,
                    instant(last.at) if last else "-",
                    f"{last.latency_ms} ms" if last and last.latency_ms is not None else "-",
                    d.webhook_id,
                ]
            )
        header = [
            "EVENT TIME",
            "ENDPOINT",
            "STATE",
            "ATTEMPTS",
            "LAST ANSWER",
            "LAST AT",
            "LATENCY",
            "WEBHOOK ID",
        ]
        console.table(header, rows)
    return ExitCode.OK


# --- redrive ------------------------------------------------------------------------------------


def _selection(arguments: SimpleNamespace) -> w.Selection:
    selection = w.Selection(
        everything=arguments.all,
        endpoint_ids=frozenset(_checked_id(e) for e in arguments.endpoint),
        webhook_ids=frozenset(arguments.webhook_id),
    )
    if selection.empty:
        raise CliError("say which messages: --all, --endpoint ID or --webhook-id ID")
    return selection


def redrive(arguments: SimpleNamespace, console: Console) -> int:
    """`ops webhooks redrive`: deliveries from the webhooks DLQ back on the queue (or dropped)."""
    selection = _selection(arguments)
    target = resolve(arguments)
    _, queue_url, dlq_url = target.webhook_resources()
    mode = "DRY RUN: nothing will change" if arguments.dry_run else "acting"
    console.line(f"outlast ops webhooks redrive of the webhooks DLQ on the {target.label} ({mode})")
    outcomes: list[w.Outcome] = []
    with held_messages(
        target.sqs,
        dlq_url,
        hold_seconds=arguments.hold_seconds,
        max_messages=arguments.max_messages,
        wait_seconds=target.receive_wait_seconds,
        monotonic=time.monotonic,
    ) as hold:
        steps = w.plan(hold.letters, target.webhooks, selection)
        console.line(f"read {len(hold.letters)} message(s); {len(steps)} selected")
        if hold.limit_reached or hold.out_of_time:
            console.line("stopped reading early: rerun for the rest")
        for step in steps:
            _describe(step, console)
        document: dict[str, Any] = {"target": target.label, "dryRun": arguments.dry_run}
        if arguments.dry_run:
            counts = Counter(step.action.value for step in steps)
            console.line(
                "dry run: " + (", ".join(f"{n} {a}" for a, n in sorted(counts.items())) or "nothing")
            )
            if console.json_mode:
                console.show(None, {**document, "steps": [_step_document(s) for s in steps]})
            kept = any(step.action not in w.DISPATCHING | w.DROPPING for step in steps)
            return ExitCode.FAILED if kept else ExitCode.OK

        def report(outcome: w.Outcome) -> None:
            outcomes.append(outcome)
            console.line(
                f"[{outcome.result.value}] message {outcome.step.letter.message_id}: {outcome.detail}"
            )

        try:
            w.run(steps, hold, target.sqs, queue_url, report)
        except KeyboardInterrupt:
            console.line(f"interrupted after {len(outcomes)} of {len(steps)} step(s); the rest were released")
            return ExitCode.INTERRUPTED
    counts = Counter(o.result.value for o in outcomes)
    console.line("summary: " + ", ".join(f"{counts.get(r.value, 0)} {r.value}" for r in Result))
    if console.json_mode:
        steps_done = [_step_document(o.step) | {"result": o.result.value} for o in outcomes]
        console.show(None, {**document, "steps": steps_done})
    return ExitCode.OK if all(o.result is Result.DONE for o in outcomes) else ExitCode.FAILED


def _describe(step: w.Step, console: Console) -> None:
    message = step.message
    what = (
        f"{message.webhook_id} for endpoint {message.endpoint_id} (tenant {message.tenant})"
        if message
        else "unreadable"
    )
    console.line(f"- message {step.letter.message_id}: {what}")
    console.line(f"    {step.action.value}: {step.why}")


def _step_document(step: w.Step) -> dict[str, Any]:
    message = step.message
    return {
        "messageId": step.letter.message_id,
        "reason": step.letter.reason,
        "webhookId": message.webhook_id if message else None,
        "endpointId": message.endpoint_id if message else None,
        "tenant": message.tenant if message else None,
        "jobId": message.job_id if message else None,
        "action": step.action.value,
        "why": step.why,
    }
