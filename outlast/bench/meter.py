"""Counts every AWS request the functions make, with its bytes and its DynamoDB capacity units.

Hooks on botocore's event system (no production code changes): `before-parameter-build` asks
DynamoDB for ReturnConsumedCapacity=INDEXES on every call that takes it and, when item images
are on, reads the item before each write; `before-send` counts request bytes and attempts;
`after-call` records the response bytes, the error code, what moto reported as consumed
capacity, and the units computed from the item images by `outlast.bench.units` (moto's own
figure is a constant). The image reads go through a client of another session: they are not
counted, but they take time, so timings are taken in passes with images off.

Function log output (Powertools' JSON lines and EMF metrics on stdout) is counted by
`LogCounter`, attributed to the phase (the function invocation) running when it was written.
"""

from __future__ import annotations

import contextlib
import io
import math
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from outlast.bench.units import (
    TableSpec,
    item_size,
    query_units,
    read_units,
    write_cost,
)

_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem"})
_READS = frozenset({"Query", "Scan"})
_SQS_CHUNK = 64 * 1024
_PLACEHOLDER = re.compile(r"[#:][A-Za-z0-9_]+")


@dataclass
class ApiCall:
    """One AWS API call as the benchmark saw it."""

    source: str  # "function" (the handlers' clients) or "poller" (the event source mappings')
    phase: str
    service: str
    operation: str
    table: str | None = None
    index: str | None = None
    item_kind: str | None = None  # which item: the key's values up to their first '#'
    attempts: int = 0
    request_bytes: int = 0
    response_bytes: int = 0
    error: str | None = None
    reported_capacity: Any = None
    read_units: float | None = None
    write_units: int | None = None
    index_write_units: dict[str, int] = field(default_factory=dict)
    index_operations: dict[str, list[str]] = field(default_factory=dict)
    item_bytes: int | None = None
    billed_requests: int = 1
    returned: int | None = None  # messages a ReceiveMessage returned
    params: dict[str, Any] = field(default_factory=dict, repr=False)
    before: dict[str, Any] | None = field(default=None, repr=False)


def _body_length(body: Any) -> int:
    if body is None:
        return 0
    if isinstance(body, bytes | bytearray):
        return len(body)
    if isinstance(body, str):
        return len(body.encode("utf-8"))
    return 0  # a stream (S3 uploads): counted by the caller if ever needed


def _attributes_size(attributes: dict[str, Any] | None) -> int:
    size = 0
    for name, value in (attributes or {}).items():
        size += len(name) + len(str(value.get("DataType", "")))
        size += len(str(value.get("StringValue", ""))) + len(value.get("BinaryValue", b"") or b"")
    return size


def _sqs_billed_requests(operation: str, params: dict[str, Any], parsed: dict[str, Any]) -> int:
    """SQS bills each 64 KB chunk of a request's payload as one request."""
    if operation == "SendMessage":
        payload = len(str(params.get("MessageBody", "")).encode()) + _attributes_size(
            params.get("MessageAttributes")
        )
    elif operation == "SendMessageBatch":
        payload = sum(
            len(str(e.get("MessageBody", "")).encode()) + _attributes_size(e.get("MessageAttributes"))
            for e in params.get("Entries", [])
        )
    elif operation == "ReceiveMessage":
        payload = sum(
            len(str(m.get("Body", "")).encode()) + _attributes_size(m.get("MessageAttributes"))
            for m in parsed.get("Messages", [])
        )
    else:
        return 1
    return max(1, math.ceil(payload / _SQS_CHUNK))


class Meter:
    """Records API calls made while a phase is active; call `attach` on each boto3 session to watch."""

    def __init__(self, raw_dynamodb: Any) -> None:
        self._raw = raw_dynamodb
        self._local = threading.local()
        self._lock = threading.Lock()
        self._tables: dict[str, TableSpec] = {}
        self.current_phase: str | None = None
        self.images = False
        self.calls: list[ApiCall] = []

    # --- phases ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Attribute every call (and log line) made inside the block to `name`."""
        previous, self.current_phase = self.current_phase, name
        try:
            yield
        finally:
            self.current_phase = previous

    def reset(self) -> None:
        """Forget every recorded call."""
        with self._lock:
            self.calls = []

    def calls_in(self, phase_prefix: str) -> list[ApiCall]:
        """The calls of every phase whose name starts with `phase_prefix`."""
        with self._lock:
            return [c for c in self.calls if c.phase.startswith(phase_prefix)]

    # --- hooks -----------------------------------------------------------------------------

    def attach(self, session: Any, source: str) -> None:
        """Register the hooks on a boto3 session (before it creates the clients to watch)."""
        events = session.events
        events.register(
            "before-parameter-build",
            lambda params, model, **_: self._before(source, params, model),
            unique_id=f"outlast-bench-before-{source}",
        )
        events.register(
            "before-send", lambda request, **_: self._sent(request), unique_id=f"outlast-bench-send-{source}"
        )
        events.register(
            "after-call",
            lambda http_response, parsed, model, **_: self._after(http_response, parsed, model),
            unique_id=f"outlast-bench-after-{source}",
        )

    def table_spec(self, name: str) -> TableSpec:
        """A table's keys and indexes, from DescribeTable (cached)."""
        if name not in self._tables:
            self._tables[name] = TableSpec.from_description(self._raw.describe_table(TableName=name)["Table"])
        return self._tables[name]

    def _before(self, source: str, params: dict[str, Any], model: Any) -> None:
        phase = self.current_phase
        if phase is None:
            self._local.call = None
            return
        service, operation = model.service_model.service_name, model.name
        call = ApiCall(source=source, phase=phase, service=service, operation=operation)
        if service == "dynamodb":
            if "ReturnConsumedCapacity" in model.input_shape.members:
                params.setdefault("ReturnConsumedCapacity", "INDEXES")
            call.table, call.index = params.get("TableName"), params.get("IndexName")
            if call.table and ("Key" in params or "Item" in params):
                key = self._key(call.table, operation, params)
                call.item_kind = "/".join(str(v.get("S", "?")).split("#")[0] for v in key.values())
                if self.images and operation in _WRITES:
                    call.before = self._read(call.table, key)
        call.params = dict(params)
        self._local.call = call

    def _sent(self, request: Any) -> None:
        call: ApiCall | None = getattr(self._local, "call", None)
        if call is not None:
            call.attempts += 1
            call.request_bytes += _body_length(getattr(request, "body", None))

    def _after(self, http_response: Any, parsed: dict[str, Any], model: Any) -> None:
        call: ApiCall | None = getattr(self._local, "call", None)
        self._local.call = None
        if call is None:
            return
        if getattr(model, "has_streaming_output", False):
            # S3 GetObject: reading `content` would drain the stream the function still reads.
            headers = getattr(http_response, "headers", {}) or {}
            call.response_bytes = int(headers.get("content-length", 0) or 0)
        else:
            call.response_bytes = len(getattr(http_response, "content", b"") or b"")
        if getattr(http_response, "status_code", 200) >= 300:
            call.error = str(parsed.get("Error", {}).get("Code", "error"))
        if call.service == "dynamodb":
            call.reported_capacity = parsed.get("ConsumedCapacity")
            if self.images:
                self._account(call, parsed)
        elif call.service == "sqs":
            call.billed_requests = _sqs_billed_requests(call.operation, call.params, parsed)
            if call.operation == "ReceiveMessage":
                call.returned = len(parsed.get("Messages", []))
        call.params, call.before = {}, None
        with self._lock:
            self.calls.append(call)

    # --- DynamoDB units --------------------------------------------------------------------

    def _key(self, table: str, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        if operation == "PutItem":
            return self.table_spec(table).key_of(params["Item"])
        return dict(params["Key"])

    def _read(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        item: dict[str, Any] | None = self._raw.get_item(TableName=table, Key=key, ConsistentRead=True).get(
            "Item"
        )
        return item

    def _account(self, call: ApiCall, parsed: dict[str, Any]) -> None:
        params, table = call.params, call.table
        if table is None:
            return
        if call.operation == "GetItem":
            item = parsed.get("Item")
            if "ProjectionExpression" in params:  # a projection never lowers the units
                item = self._read(table, params["Key"])
            call.item_bytes = item_size(item) if item else 0
            call.read_units = read_units(call.item_bytes, consistent=bool(params.get("ConsistentRead")))
        elif call.operation in _WRITES:
            if call.error not in {None, "ConditionalCheckFailedException"}:
                return
            after = None
            if call.error is None and call.operation == "PutItem":
                after = params["Item"]
            elif call.error is None and call.operation == "UpdateItem":
                after = self._read(table, params["Key"])
            cost = write_cost(self.table_spec(table), call.before, after, succeeded=call.error is None)
            call.write_units, call.item_bytes = cost.table_units, cost.item_bytes
            call.index_write_units = {w.index: w.units for w in cost.index_writes}
            call.index_operations = {w.index: w.operations for w in cost.index_writes}
        elif call.operation in _READS:
            entries = self._entries_read(call)
            call.read_units, call.item_bytes = query_units(
                entries, consistent=bool(params.get("ConsistentRead")) and call.index is None
            )

    def _entries_read(self, call: ApiCall) -> list[dict[str, Any]]:
        """What the Query or Scan read before its filter: run it again without the filter."""
        params = call.params
        expression = str(params.get("KeyConditionExpression", ""))
        used = set(_PLACEHOLDER.findall(expression))
        arguments: dict[str, Any] = {"TableName": call.table}
        for name in ("IndexName", "KeyConditionExpression", "Limit", "ExclusiveStartKey", "ScanIndexForward"):
            if name in params:
                arguments[name] = params[name]
        names = {k: v for k, v in params.get("ExpressionAttributeNames", {}).items() if k in used}
        values = {k: v for k, v in params.get("ExpressionAttributeValues", {}).items() if k in used}
        if names:
            arguments["ExpressionAttributeNames"] = names
        if values:
            arguments["ExpressionAttributeValues"] = values
        reader = self._raw.query if call.operation == "Query" else self._raw.scan
        items: list[dict[str, Any]] = reader(**arguments).get("Items", [])
        if call.index is None or call.table is None:
            return items
        spec = self.table_spec(call.table)
        index = spec.index(call.index)
        return [entry for item in items if (entry := index.entry(item, spec.keys)) is not None]


class LogCounter(io.TextIOBase):
    """Stands in for stdout: counts the bytes and lines written per phase, keeps them if asked."""

    def __init__(self, meter: Meter) -> None:
        super().__init__()
        self._meter = meter
        self._lock = threading.Lock()
        self.bytes: dict[str, int] = {}
        self.lines: dict[str, int] = {}
        self.kept: dict[str, list[str]] = {}
        self.keep = False

    def write(self, text: str) -> int:
        """Count (and maybe keep) what a function wrote."""
        phase = self._meter.current_phase or "-"
        with self._lock:
            self.bytes[phase] = self.bytes.get(phase, 0) + len(text.encode("utf-8"))
            self.lines[phase] = self.lines.get(phase, 0) + text.count("\n")
            if self.keep:
                self.kept.setdefault(phase, []).append(text)
        return len(text)

    def writable(self) -> bool:
        """Always."""
        return True

    def reset(self) -> None:
        """Forget the counts."""
        with self._lock:
            self.bytes, self.lines, self.kept = {}, {}, {}
