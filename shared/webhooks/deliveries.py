"""What the notifier enqueues for webhooks: one message per (terminal event, endpoint that hears it).

Decided from the stream record alone (a JobChange): only a terminal write (`w` = terminal) into
Succeeded, Failed or Canceled raises an event; the tenant's endpoints are read from the store's
directory (no secrets); each enabled endpoint subscribed to the event gets one message whose
body is the signed payload: `{"type", "timestamp", "data": {<status document>, "owner"}}`,
never input or output text.

Duplicate stream records (a retried batch) enqueue the same messages again: nothing here
remembers what was sent. The sender drops a message whose delivery is already recorded as
delivered, and receivers deduplicate by `webhook-id` as Standard Webhooks asks
(docs/architecture.md, "Webhooks: duplicates").
"""

from __future__ import annotations

import json

from shared.realtime import JobChange
from shared.webhooks.endpoints import DeliveryMessage, Endpoint
from shared.webhooks.events import EventType, event_id, event_type_for
from shared.webhooks.ports import DeliveryQueue, EndpointDirectory

TERMINAL_WRITE = "terminal"  # shared.ports.WriteKind.TERMINAL, as the item's `w` spells it


def event_of(change: JobChange) -> EventType | None:
    """The event a job write raises: one for a terminal write into a terminal status, else None."""
    if change.write_kind != TERMINAL_WRITE:
        return None
    return event_type_for(change.document.status)


def event_body(change: JobChange, event_type: EventType) -> str:
    """The JSON body every endpoint receives for this event, compact, in a fixed key order."""
    wire = change.document.to_wire()
    payload = {
        "type": event_type.value,
        "timestamp": wire["updatedAt"],  # the terminal write's instant: the same in every duplicate
        "data": {**wire, "owner": {"tenant": change.owner.tenant, "sub": change.owner.sub}},
    }
    return json.dumps(payload, separators=(",", ":"))


def deliveries_for(change: JobChange, endpoints: list[Endpoint]) -> list[DeliveryMessage]:
    """One message per endpoint of the job's tenant that hears the change's event (none for others)."""
    event_type = event_of(change)
    if event_type is None:
        return []
    hearing = [e for e in endpoints if e.tenant == change.owner.tenant and e.hears(event_type)]
    if not hearing:
        return []
    body = event_body(change, event_type)
    webhook_id = event_id(change.job_id, change.redrive_count, event_type)
    return [
        DeliveryMessage(
            endpoint_id=endpoint.endpoint_id,
            tenant=endpoint.tenant,
            webhook_id=webhook_id,
            event_type=event_type,
            job_id=change.job_id,
            event_time=change.document.updated_at,
            body=body,
        )
        for endpoint in sorted(hearing, key=lambda e: e.endpoint_id)
    ]


class DeliveryEnqueuer:
    """The notifier's webhook step: read the tenant's endpoints only for terminal writes, enqueue."""

    def __init__(self, directory: EndpointDirectory, queue: DeliveryQueue) -> None:
        self._directory = directory
        self._queue = queue

    def enqueue_deliveries(self, change: JobChange) -> int:
        """Enqueue the change's deliveries; how many. Storage errors propagate (the record is retried)."""
        if event_of(change) is None:
            return 0  # no read at all for the many writes that end nothing
        messages = deliveries_for(change, self._directory.endpoints_of(change.owner.tenant))
        if messages:
            self._queue.send_batch(messages)
        return len(messages)
