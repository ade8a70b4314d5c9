"""`outlast webhooks ...`: webhook endpoints and their deliveries, for operators (AWS credentials).

Endpoints are registered per tenant by operators, never through the public API (no SSRF
through it). A signing secret is printed once, by `add` and by `rotate`, and never logged.
See docs/runbook.md#manage-webhook-endpoints and #webhooks-dlq-not-empty.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from typing import Any

from outlast.commands.dlq import (
    EXIT_ATTENTION,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    UsageError,
    guarded,
    now,
)
from outlast.operator import webhooks as w
from outlast.operator.dispatch import Result
from outlast.operator.dlq import DEFAULT_HOLD_SECONDS, DEFAULT_MAX_MESSAGES, held_messages
from outlast.operator.targets import add_target_arguments, resolve
from outlast.operator.text import instant, table
from shared.adapters.webhook_http import resolve_system
from shared.errors import EgressRefusedError
from shared.webhooks.endpoints import Delivery, Endpoint, is_endpoint_id, parse_events
from shared.webhooks.events import EventType

DEFAULT_DELIVERIES = 20

ADD_EPILOG = """\
The URL must pass the egress guard (docs/webhooks.md, "What an endpoint URL may be"): https, port
443 or 1024 and up, no user name or password, every address the host resolves to public. On the
local stack (--local) plain http and receivers on 127.0.0.1 or ::1 are allowed too.

The signing secret is printed once, here: hand it to the receiver's team over your secrets
channel. `outlast webhooks rotate ID` makes a new one if it is lost or leaked.

exit codes: 0 added; 2 the URL was refused, usage error, no such target, or an AWS error
"""

REDRIVE_EPILOG = f"""\
actions (the plan; --dry-run prints it and changes nothing):
  redrive          endpoint enabled: the message goes back on the webhooks queue unchanged
                   (same webhook-id; the retry schedule starts again), then leaves the DLQ
  drop-delivered   that delivery got its 2xx meanwhile (a duplicate): deleted
  drop-removed     its endpoint was removed: deleted (nothing could deliver it)
  keep-disabled    its endpoint is disabled (a 410, or an operator): kept until
                   `outlast webhooks enable ID`
  keep-unreadable  not a webhook delivery message (only with --all): kept, look at it by hand

exit codes (--dry-run exits as the run would, as far as the plan can tell):
  {EXIT_OK}    every selected message was handled as planned (none selected: nothing to do)
  {EXIT_ATTENTION}    some were kept or failed
  {EXIT_ERROR}    usage error, no such target, or an AWS error before anything changed
  {EXIT_INTERRUPTED}  interrupted: what was done is printed; every message not handled was released
"""


class _Parsers:
    """The subcommands, each with the target options."""

    def __init__(self, group: Any) -> None:
        self._group = group

    def add(self, name: str, help_text: str, **kwargs: Any) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = self._group.add_parser(
            name, help=help_text, description=help_text[0].upper() + help_text[1:] + ".", **kwargs
        )
        add_target_arguments(parser)
        return parser


def register(commands: Any) -> None:
    """Add `webhooks add | list | remove | enable | rotate | deliveries | redrive`."""
    group = commands.add_parser(
        "webhooks", help="webhook endpoints and deliveries (operators; AWS credentials, not the API)"
    ).add_subparsers(dest="webhooks_command", required=True, metavar="COMMAND")
    parsers = _Parsers(group)
    raw = argparse.RawDescriptionHelpFormatter

    add = parsers.add("add", "register a tenant's endpoint", epilog=ADD_EPILOG, formatter_class=raw)
    add.add_argument("--tenant", required=True, help="the tenant whose jobs it hears")
    add.add_argument("--url", required=True, help="where to POST (https)")
    add.add_argument(
        "--event",
        action="append",
        default=[],
        choices=[e.value for e in EventType],
        help="an event to hear (repeatable; default: all three)",
    )
    add.add_argument("--json", action="store_true", help="print one JSON document (the secret too)")
    add.set_defaults(run=guarded(_add))

    listing = parsers.add("list", "list endpoints (never their secrets)")
    listing.add_argument("--tenant", help="only this tenant's")
    listing.add_argument("--json", action="store_true", help="print one JSON document")
    listing.set_defaults(run=guarded(_list))

    remove = parsers.add("remove", "remove an endpoint (queued deliveries are dropped)")
    remove.add_argument("endpoint_id", metavar="ID")
    remove.set_defaults(run=guarded(_remove))

    enable = parsers.add("enable", "enable an endpoint again (after a 410 disabled it)")
    enable.add_argument("endpoint_id", metavar="ID")
    enable.set_defaults(run=guarded(_enable))

    rotate = parsers.add("rotate", "make a new signing secret; the old one signs 24 h more")
    rotate.add_argument("endpoint_id", metavar="ID")
    rotate.add_argument("--force", action="store_true", help="rotate even while an earlier overlap runs")
    rotate.add_argument("--json", action="store_true", help="print one JSON document (the secret too)")
    rotate.set_defaults(run=guarded(_rotate))

    deliveries = parsers.add("deliveries", "recent deliveries and every attempt at them")
    deliveries.add_argument("endpoint_id", nargs="?", metavar="ID", help="one endpoint (default: all)")
    deliveries.add_argument(
        "--limit", type=_positive, default=DEFAULT_DELIVERIES, metavar="N", help="per endpoint (default 20)"
    )
    deliveries.add_argument("--json", action="store_true", help="print one JSON document")
    deliveries.set_defaults(run=guarded(_deliveries))

    redrive = parsers.add(
        "redrive", "send deliveries from the webhooks DLQ back", epilog=REDRIVE_EPILOG, formatter_class=raw
    )
    selection = redrive.add_argument_group("which messages (at least one; they add up)")
    selection.add_argument("--all", action="store_true", help="every message")
    selection.add_argument(
        "--endpoint", action="append", default=[], metavar="ID", help="this endpoint's (repeatable)"
    )
    selection.add_argument(
        "--webhook-id", action="append", default=[], metavar="ID", help="this delivery's (repeatable)"
    )
    redrive.add_argument("--dry-run", action="store_true", help="print the plan and change nothing")
    redrive.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    redrive.add_argument(
        "--hold-seconds",
        type=_positive,
        default=DEFAULT_HOLD_SECONDS,
        metavar="S",
        help=f"how long the run keeps the messages it read hidden (default {DEFAULT_HOLD_SECONDS})",
    )
    redrive.add_argument(
        "--max-messages",
        type=_positive,
        default=DEFAULT_MAX_MESSAGES,
        metavar="N",
        help=f"read at most this many DLQ messages (default {DEFAULT_MAX_MESSAGES})",
    )
    redrive.set_defaults(run=guarded(_redrive))


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _print(document: Any) -> None:
    print(json.dumps(document, indent=2))


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
        raise UsageError(f"{text!r} is not an endpoint id (ep_ and 16 hex digits)")
    return text


# --- add, list, remove, enable, rotate ----------------------------------------------------------


def _add(arguments: argparse.Namespace) -> int:
    target = resolve(arguments)
    events = parse_events(arguments.event)
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
        print(f"outlast: the URL is refused ({refusal.reason.value}): {refusal.detail}", file=sys.stderr)
        return EXIT_ERROR
    if arguments.json:
        _print({**_endpoint_document(endpoint), "secret": secret})
        return EXIT_OK
    print(f"endpoint {endpoint.endpoint_id} added for tenant {endpoint.tenant} on the {target.label}")
    print(f"  url     {endpoint.url}")
    print(f"  events  {', '.join(e.value for e in endpoint.events)}")
    print("signing secret (shown this once: hand it to the receiver's team now):")
    print(secret)
    return EXIT_OK


def _list(arguments: argparse.Namespace) -> int:
    target = resolve(arguments)
    store = target.webhooks
    endpoints = store.endpoints_of(arguments.tenant) if arguments.tenant else store.all_endpoints()
    if arguments.json:
        _print({"target": target.label, "endpoints": [_endpoint_document(e) for e in endpoints]})
        return EXIT_OK
    print(f"{len(endpoints)} endpoint(s) on the {target.label}")
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
        for line in table(["ID", "TENANT", "STATE", "EVENTS", "TWO SECRETS", "URL"], rows):
            print(line)
    return EXIT_OK


def _remove(arguments: argparse.Namespace) -> int:
    endpoint_id = _checked_id(arguments.endpoint_id)
    target = resolve(arguments)
    removed = target.webhooks.remove_endpoint(endpoint_id)
    if removed is None:
        print(f"no endpoint {endpoint_id} on the {target.label}")
        return EXIT_ATTENTION
    print(f"removed endpoint {endpoint_id} of tenant {removed.tenant} ({removed.url})")
    return EXIT_OK


def _enable(arguments: argparse.Namespace) -> int:
    endpoint_id = _checked_id(arguments.endpoint_id)
    target = resolve(arguments)
    if not target.webhooks.set_enabled(endpoint_id, True, None, now()):
        print(f"no endpoint {endpoint_id} on the {target.label}")
        return EXIT_ATTENTION
    print(f"endpoint {endpoint_id} enabled: new events reach it; `webhooks redrive --endpoint` for the DLQ")
    return EXIT_OK


def _rotate(arguments: argparse.Namespace) -> int:
    endpoint_id = _checked_id(arguments.endpoint_id)
    target = resolve(arguments)
    try:
        rotated, secret = w.rotate(target.webhooks, endpoint_id, now(), force=arguments.force)
    except w.RotationRefused as refusal:
        print(f"outlast: not rotated: {refusal}", file=sys.stderr)
        return EXIT_ATTENTION
    until = instant(rotated.previous_until)
    if arguments.json:
        _print({"endpointId": endpoint_id, "secret": secret, "previousSecretSignsUntil": until})
        return EXIT_OK
    print(f"endpoint {endpoint_id}: new signing secret; the previous one also signs until {until}")
    print("new signing secret (shown this once: hand it to the receiver's team now):")
    print(secret)
    return EXIT_OK


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


def _deliveries(arguments: argparse.Namespace) -> int:
    target = resolve(arguments)
    store = target.webhooks
    if arguments.endpoint_id is not None:
        endpoint_id = _checked_id(arguments.endpoint_id)
        if store.get_endpoint(endpoint_id) is None and not store.deliveries_of(endpoint_id, 1):
            print(f"no endpoint {endpoint_id} on the {target.label}")
            return EXIT_ATTENTION
        endpoint_ids = [endpoint_id]
    else:
        endpoint_ids = [e.endpoint_id for e in store.all_endpoints()]
    found = [d for eid in endpoint_ids for d in store.deliveries_of(eid, arguments.limit)]
    found.sort(key=lambda d: (d.event_time, d.webhook_id), reverse=True)
    if arguments.json:
        _print({"target": target.label, "deliveries": [_delivery_document(d) for d in found]})
        return EXIT_OK
    print(f"{len(found)} deliver{'y' if len(found) == 1 else 'ies'} on the {target.label}, newest first")
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
        for line in table(header, rows):
            print(line)
    return EXIT_OK


# --- redrive ------------------------------------------------------------------------------------


def _selection(arguments: argparse.Namespace) -> w.Selection:
    selection = w.Selection(
        everything=arguments.all,
        endpoint_ids=frozenset(_checked_id(e) for e in arguments.endpoint),
        webhook_ids=frozenset(arguments.webhook_id),
    )
    if selection.empty:
        raise UsageError("say which messages: --all, --endpoint ID or --webhook-id ID")
    return selection


def _redrive(arguments: argparse.Namespace) -> int:
    selection = _selection(arguments)
    target = resolve(arguments)
    _, queue_url, dlq_url = target.webhook_resources()
    out = sys.stderr if arguments.json else sys.stdout
    mode = "DRY RUN: nothing will change" if arguments.dry_run else "acting"
    print(f"outlast webhooks redrive of the webhooks DLQ on the {target.label} ({mode})", file=out)
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
        print(f"read {len(hold.letters)} message(s); {len(steps)} selected", file=out)
        if hold.limit_reached or hold.out_of_time:
            print("stopped reading early: rerun for the rest", file=out)
        for step in steps:
            _describe(step, out)
        document: dict[str, Any] = {"target": target.label, "dryRun": arguments.dry_run}
        if arguments.dry_run:
            counts = Counter(step.action.value for step in steps)
            print(
                "dry run: " + (", ".join(f"{n} {a}" for a, n in sorted(counts.items())) or "nothing"),
                file=out,
            )
            if arguments.json:
                _print({**document, "steps": [_step_document(s) for s in steps]})
            kept = any(step.action not in w.DISPATCHING | w.DROPPING for step in steps)
            return EXIT_ATTENTION if kept else EXIT_OK

        def report(outcome: w.Outcome) -> None:
            outcomes.append(outcome)
            print(
                f"[{outcome.result.value}] message {outcome.step.letter.message_id}: {outcome.detail}",
                file=out,
            )

        try:
            w.run(steps, hold, target.sqs, queue_url, report)
        except KeyboardInterrupt:
            print(
                f"interrupted after {len(outcomes)} of {len(steps)} step(s); the rest were released", file=out
            )
            return EXIT_INTERRUPTED
    counts = Counter(o.result.value for o in outcomes)
    print("summary: " + ", ".join(f"{counts.get(r.value, 0)} {r.value}" for r in Result), file=out)
    if arguments.json:
        _print({**document, "steps": [_step_document(o.step) | {"result": o.result.value} for o in outcomes]})
    return EXIT_OK if all(o.result is Result.DONE for o in outcomes) else EXIT_ATTENTION


def _describe(step: w.Step, out: Any) -> None:
    message = step.message
    what = (
        f"{message.webhook_id} for endpoint {message.endpoint_id} (tenant {message.tenant})"
        if message
        else "unreadable"
    )
    print(f"- message {step.letter.message_id}: {what}", file=out)
    print(f"    {step.action.value}: {step.why}", file=out)


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
