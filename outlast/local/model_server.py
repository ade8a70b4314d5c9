"""An OpenAI-compatible model server of the project's own, for tests and local mode.

It speaks the Chat Completions wire format, so the real `openai` SDK runs over a real socket
(point OPENAI_BASE_URL at `ModelServer.url`). Answers are deterministic, derived from the
document in the prompt, and directives in the message text inject the failures the worker
must survive (DESIGN.md, "Model providers"):

| directive                  | effect                                                          |
|----------------------------|-----------------------------------------------------------------|
| `[[fault:rate_limit*N]]`   | first N calls: 429 `rate_limit_exceeded`, `Retry-After: 1`      |
| `[[fault:server_error*N]]` | first N calls: 500 `server_error`                               |
| `[[fault:timeout*N]]`      | first N calls: no answer until the client gives up (max 60 s)   |
| `[[fault:context_length]]` | always: 400 `context_length_exceeded`                           |
| `[[fault:content_policy]]` | always: 400 `content_policy_violation`                          |
| `[[delay:SECONDS]]`        | wait that long before answering (the first delay directive)     |

A directive applies to the call whose messages contain it, and only to that call: in a job run
in steps, a directive inside one chunk affects that chunk's map call. No answer ever contains a
directive (they are removed from the document and, to be sure, from the answer), so a reduce
call never inherits a fault from the outputs it combines.

Counted faults are keyed by the SHA-256 of the canonical JSON of the request's messages and
run in the order they appear: `rate_limit*2` then `server_error*1` fails calls 1-2 with 429,
call 3 with 500, and answers from call 4 on. `POST /_faults/reset` clears the counters only.

Context: a call whose messages' text, estimated at ceil(UTF-8 bytes / 4) tokens (plus its
`max_tokens`, when it sends one), is over the configured context (`context_tokens`, CLI
`--context-tokens`, default 128,000) gets OpenAI's answer: 400, `invalid_request_error`, code
`context_length_exceeded`, param `messages`, "This model's maximum context length is N tokens.
However, your messages resulted in M tokens. ..." `usage.prompt_tokens` uses the same estimate.

Answers are derived from the prompt: the operation and the kind of call (one call for the whole
input, a map call over one part, a reduce call over `<part>`-fenced outputs) are recognised by
the exact system prompt of any template version outlast ships, or else by a keyword. A map
answer is the operation's answer for its part (a classify map answer is one of the labels); a
summarize reduce joins the first sentence of each output, shortened to share
`SUMMARY_MAX_WORDS`; an analyze reduce adds up the counts of the analyses it combines.

Not part of OpenAI, for tests and benchmarks: `GET /_calls` lists every finished chat call in
the order they finished, and `POST /_calls/reset` clears that list only. Each entry has
`requestHash`, `started` and `finished` (epoch seconds), `status` (null when no answer was
sent), `outcome` (`ok`, the fault's name, `context_length_exceeded` for a call over the
context, `abandoned` for an answer its caller left before it was sent, `shutdown`,
`unauthorized`, `invalid_request`), `model`, `operation`,
`promptVersion` (the template version recognised, else null), `kind` (`single`, `map`,
`reduce`, or null), and for map calls `part` and `parts` (the 1-based part number and the
number of parts the prompt names; null otherwise), and `usage` (`inputTokens`, `outputTokens`
of a completion that was sent; null otherwise). A step of a planned job sends the same
messages on every attempt, so calls are counted per step by `requestHash` (the hash of the
messages the planner renders for the step, `messages_hash`), or per map step by `part`.
`GET /_tally` is the server's own account of the tokens it served, per `requestHash`
(`calls`, `inputTokens`, `outputTokens`: every completion sent, read by its caller or not). No
job id reaches a provider, so a client that knows which hashes are whose (chaos: each job's own
text) totals them per job.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import re
import select
import socket
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from outlast.local.http_handler import LocalRequestHandler
from outlast.local.stop_signals import StopSignals
from shared.contract import Operation
from shared.prompts import BY_VERSION, PART_CLOSE, PART_OPEN, PromptKind, PromptTemplate

MAX_BODY_BYTES = 8 * 1024 * 1024
STALL_LIMIT_SECONDS = 60.0
STALL_STEP_SECONDS = 0.05
RETRY_AFTER_SECONDS = 1
MODELS = ("gpt-4o-mini", "gpt-4o", "gpt-4.1-mini", "gpt-4.1-nano")
SUMMARY_SENTENCES = 2
SUMMARY_MAX_WORDS = 60
FREQUENT_WORDS = 5
DEFAULT_CONTEXT_TOKENS = 128_000
BYTES_PER_TOKEN = 4

_COUNTED_FAULT = re.compile(r"\[\[fault:(rate_limit|server_error|timeout)\*(\d+)\]\]")
_PERMANENT_FAULT = re.compile(r"\[\[fault:(context_length|content_policy)\]\]")
_DELAY = re.compile(r"\[\[delay:(\d+(?:\.\d*)?|\.\d+)\]\]")
_DIRECTIVE = re.compile(r"\[\[(?:fault|delay):[^\]]*\]\]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[^\W_]+(?:['-][^\W_]+)*")
_PART = re.compile(rf"{re.escape(PART_OPEN)}\n(.*?)\n{re.escape(PART_CLOSE)}", re.DOTALL)
_PART_NUMBER = re.compile(r"This is part (\d+) of (\d+)")
_ANALYSIS_COUNT = re.compile(r"^(Words|Sentences): (\d+)$", re.MULTILINE)
_ANALYSIS_FREQUENT = re.compile(r"^Most frequent words: (.*)$", re.MULTILINE)
_FREQUENT_ITEM = re.compile(r"(\S+) \((\d+)\)")

# Exact system prompts of every template version shipped; other prompts fall back to keywords.
_TEMPLATE_BY_SYSTEM = {template.system: template for template in BY_VERSION.values()}


class InvalidRequestError(ValueError):
    """The request body is not a Chat Completions request this server can answer."""


@dataclass(frozen=True)
class Reply:
    """One HTTP answer: status, JSON body, extra headers."""

    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ChatRequest:
    """The parts of a Chat Completions request the answer is derived from."""

    model: str
    messages: list[dict[str, Any]]
    max_tokens: int | None
    request_hash: str

    @property
    def text(self) -> str:
        """Every message's text, where directives are looked for."""
        return "\n".join(_content_text(message) for message in self.messages)

    @property
    def prompt_tokens(self) -> int:
        """The estimate of the messages' tokens: ceil(UTF-8 bytes of their text / 4)."""
        size = sum(len(_content_text(message).encode("utf-8")) for message in self.messages)
        return math.ceil(size / BYTES_PER_TOKEN)

    def last(self, role: str) -> str:
        """The text of the last message with this role, or empty."""
        found = [_content_text(m) for m in self.messages if m.get("role") == role]
        return found[-1] if found else ""


@dataclass(frozen=True)
class CallOutcome:
    """What became of one chat call, for the call log."""

    outcome: str
    status: int | None
    request: ChatRequest | None = None
    usage: dict[str, int] | None = None  # the tokens of a completion that was sent

    def record(self, started: float, finished: float) -> dict[str, Any]:
        """The call's entry in `GET /_calls`."""
        entry: dict[str, Any] = {"started": started, "finished": finished, "status": self.status}
        entry["outcome"], entry["usage"] = self.outcome, self.usage
        return entry | (_describe(self.request) if self.request else dict.fromkeys(_DESCRIPTION_KEYS))


def tally(calls: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """`GET /_tally`: the tokens served per request hash, from the call log (every completion the
    server sent, whether or not its caller read it: a killed worker's, an abandoned call's)."""
    served: dict[str, dict[str, int]] = {}
    for call in calls:
        usage = call.get("usage")
        if usage is None or call.get("requestHash") is None:
            continue
        total = served.setdefault(str(call["requestHash"]), {"calls": 0, "inputTokens": 0, "outputTokens": 0})
        total["calls"] += 1
        total["inputTokens"] += int(usage["inputTokens"])
        total["outputTokens"] += int(usage["outputTokens"])
    return served


_DESCRIPTION_KEYS = ("requestHash", "model", "operation", "promptVersion", "kind", "part", "parts")


def _describe(request: ChatRequest) -> dict[str, Any]:
    """What the call log says about a request: its hash, and which prompt and part it is."""
    system = request.last("system")
    operation, template = detect_operation(system), detect_template(system)
    is_map = template is not None and template.kind is PromptKind.MAP
    part, parts = part_of(request.last("user")) if is_map else (None, None)
    return {
        "requestHash": request.request_hash,
        "model": request.model,
        "operation": operation.value if operation else None,
        "promptVersion": template.version if template else None,
        "kind": template.kind.value if template else None,
        "part": part,
        "parts": parts,
    }


# --- the request --------------------------------------------------------------------------


def parse_chat_request(body: bytes) -> ChatRequest:
    """Validate the few fields this server reads; OpenAI answers 400 to the same mistakes."""
    try:
        payload = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InvalidRequestError("The request body is not valid JSON.") from err
    if not isinstance(payload, dict):
        raise InvalidRequestError("The request body must be a JSON object.")
    model, messages = payload.get("model"), payload.get("messages")
    if not isinstance(model, str) or not model:
        raise InvalidRequestError("you must provide a model parameter")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise InvalidRequestError("'messages' must be a non-empty array of message objects.")
    max_tokens = payload.get("max_completion_tokens", payload.get("max_tokens"))
    if max_tokens is not None and (type(max_tokens) is not int or max_tokens < 1):
        raise InvalidRequestError("max_tokens must be a positive integer.")
    return ChatRequest(model, messages, max_tokens, messages_hash(messages))


def messages_hash(messages: list[dict[str, Any]]) -> str:
    """SHA-256 of the canonical JSON of the messages: the key of the fault counters."""
    canonical = json.dumps(messages, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _content_text(message: dict[str, Any]) -> str:
    """A message's text, whether content is a string or a list of typed parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _authorized(header: str | None) -> bool:
    scheme, _, token = (header or "").partition(" ")
    return scheme.lower() == "bearer" and bool(token.strip())


# --- the deterministic model ----------------------------------------------------------------


def detect_template(system: str) -> PromptTemplate | None:
    """The template version the worker rendered, when its system prompt is one outlast ships."""
    return _TEMPLATE_BY_SYSTEM.get(system)


def detect_operation(system: str) -> Operation | None:
    """Which operation the worker asked for, from its system prompt."""
    template = detect_template(system)
    if template is not None:
        return template.operation
    lowered = system.lower()
    for operation, keyword in (
        (Operation.CLASSIFY, "classify"),
        (Operation.SUMMARIZE, "summarize"),
        (Operation.ANALYZE, "analyze"),
    ):
        if keyword in lowered:
            return operation
    return None


def strip_directives(text: str) -> str:
    """The text without directives, removed until none is left (removing one can't form another)."""
    while True:
        stripped = _DIRECTIVE.sub("", text)
        if stripped == text:
            return text
        text = stripped


def document_of(user: str) -> str:
    """The text between <document> tags (the whole message when there are none), directives removed."""
    start, end = user.find("<document>"), user.rfind("</document>")
    text = user[start + len("<document>") : end] if 0 <= start < end else user
    return strip_directives(text).strip()


def parts_of(user: str) -> list[str]:
    """The outputs a reduce prompt combines, in order, directives removed."""
    return [strip_directives(part).strip() for part in _PART.findall(user)]


def part_of(user: str) -> tuple[int | None, int | None]:
    """The part number and the number of parts a map prompt names, read before its document."""
    found = _PART_NUMBER.search(user.split("<document>", 1)[0])
    return (int(found.group(1)), int(found.group(2))) if found else (None, None)


def labels_of(user: str) -> list[str]:
    """The `- label` lines after `Labels:`, read before the document so its text can't add any."""
    head = user.split("<document>", 1)[0]
    if "Labels:" not in head:
        return []
    lines = head.split("Labels:", 1)[1].splitlines()
    return [line[2:].strip() for line in lines if line.startswith("- ") and line[2:].strip()]


def summarize(document: str) -> str:
    """The first sentences of the document, trimmed."""
    sentences = [s for s in _SENTENCE_END.split(" ".join(document.split())) if s]
    if not sentences:
        return "The document is empty."
    words = " ".join(sentences[:SUMMARY_SENTENCES]).split()
    if len(words) <= SUMMARY_MAX_WORDS:
        return " ".join(words)
    return " ".join(words[:SUMMARY_MAX_WORDS]) + " ..."


def analyze(document: str) -> str:
    """A few facts anyone can recompute from the document."""
    return _format_analysis(*_analysis_counts(document))


def _analysis_counts(document: str) -> tuple[int, int, Counter[str]]:
    words = [w.lower() for w in _WORD.findall(document)]
    sentences = [s for s in _SENTENCE_END.split(document.strip()) if s.strip()]
    # Short words are mostly articles and prepositions: they would top every document.
    return len(words), len(sentences), Counter(w for w in words if len(w) > 3)


def _format_analysis(words: int, sentences: int, frequent: Counter[str]) -> str:
    top = sorted(frequent.items(), key=lambda item: (-item[1], item[0]))[:FREQUENT_WORDS]
    listed = ", ".join(f"{word} ({count})" for word, count in top) or "none"
    return f"Words: {words}\nSentences: {sentences}\nMost frequent words: {listed}"


def classify(document: str, labels: list[str]) -> str:
    """The label named most often in the document, else one chosen by a hash of the text."""
    if not labels:
        return "unlabeled"
    mentions = [
        len(re.findall(rf"(?<!\w){re.escape(label)}(?!\w)", document, re.IGNORECASE)) for label in labels
    ]
    if max(mentions) > 0:
        return labels[mentions.index(max(mentions))]  # ties go to the label listed first
    digest = hashlib.sha256(document.encode()).digest()
    return labels[int.from_bytes(digest[:8], "big") % len(labels)]


def combine_summaries(parts: list[str]) -> str:
    """The first sentence of each summary, in order, each shortened to its share of the words."""
    share = max(1, SUMMARY_MAX_WORDS // max(1, len(parts)))
    firsts: list[str] = []
    for part in parts:
        sentences = [s for s in _SENTENCE_END.split(" ".join(part.split())) if s]
        if sentences:
            words = sentences[0].split()
            firsts.append(" ".join(words[:share]) + (" ..." if len(words) > share else ""))
    return " ".join(firsts) if firsts else "The document is empty."


def combine_analyses(parts: list[str]) -> str:
    """One analysis summing the counts of those it combines (a part that is no analysis is analyzed)."""
    words = sentences = 0
    frequent: Counter[str] = Counter()
    for part in parts:
        part_words, part_sentences, part_frequent = _parse_analysis(part) or _analysis_counts(part)
        words, sentences = words + part_words, sentences + part_sentences
        frequent.update(part_frequent)
    return _format_analysis(words, sentences, frequent)


def _parse_analysis(text: str) -> tuple[int, int, Counter[str]] | None:
    """The counts of an analysis this server wrote; None when the text is not one."""
    counts = dict(_ANALYSIS_COUNT.findall(text))
    listed = _ANALYSIS_FREQUENT.search(text)
    if "Words" not in counts or "Sentences" not in counts or listed is None:
        return None
    frequent = Counter({word: int(count) for word, count in _FREQUENT_ITEM.findall(listed.group(1))})
    return int(counts["Words"]), int(counts["Sentences"]), frequent


def answer(request: ChatRequest) -> str:
    """The model's answer to the operation the prompt asks for, never holding a directive."""
    system, user = request.last("system"), request.last("user")
    operation = detect_operation(system)
    template = detect_template(system)
    if template is not None and template.kind is PromptKind.REDUCE:
        parts = parts_of(user)
        combined = combine_analyses(parts) if operation is Operation.ANALYZE else combine_summaries(parts)
        return strip_directives(combined)
    document = document_of(user)
    if operation is Operation.CLASSIFY:
        result = classify(document, labels_of(user))
    elif operation is Operation.ANALYZE:
        result = analyze(document)
    else:
        result = summarize(document)  # summarize, and any prompt this server doesn't know
    return strip_directives(result)


def count_tokens(text: str) -> int:
    """The same estimate as a prompt's: ceil(UTF-8 bytes / 4); deterministic."""
    return math.ceil(len(text.encode("utf-8")) / 4)


def truncate(text: str, max_tokens: int | None) -> tuple[str, bool]:
    """Cut the answer to max_tokens by the estimate, as a model stops at its max_tokens; True when it
    was cut (finish_reason "length"). The cut falls between words when there are any, else between
    code points: an input without spaces gets a bounded answer too."""
    if max_tokens is None or count_tokens(text) <= max_tokens:
        return text, False
    limit = max_tokens * 4
    kept = ""
    for word in text.split():
        candidate = f"{kept} {word}" if kept else word
        if len(candidate.encode("utf-8")) > limit:
            break
        kept = candidate
    if not kept:
        kept = text.encode("utf-8")[:limit].decode("utf-8", errors="ignore")
    return kept, True


def completion(request: ChatRequest) -> Reply:
    """A chat.completion object answering the request."""
    content, cut = truncate(answer(request), request.max_tokens)
    prompt_tokens, completion_tokens = request.prompt_tokens, count_tokens(content)
    body = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.model,
        "system_fingerprint": "fp_outlast_local",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "logprobs": None,
                "finish_reason": "length" if cut else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    return Reply(200, body)


# --- faults ---------------------------------------------------------------------------------


def error_reply(
    status: int, message: str, error_type: str, code: str | None, headers: dict[str, str] | None = None
) -> Reply:
    """An error in OpenAI's shape; the SDK reads `code` and `type` from inside `error`."""
    body = {"error": {"message": message, "type": error_type, "param": None, "code": code}}
    return Reply(status, body, headers or {})


def fault_reply(fault: str) -> Reply:
    """The answer OpenAI gives for each injected fault (timeouts are not answered at all)."""
    if fault == "rate_limit":
        # The SDK prefers retry-after-ms; the worker reads Retry-After. Send both, consistent.
        headers = {"Retry-After": str(RETRY_AFTER_SECONDS), "retry-after-ms": str(RETRY_AFTER_SECONDS * 1000)}
        message = "Rate limit reached for requests (injected by [[fault:rate_limit]])."
        return error_reply(429, message, "requests", "rate_limit_exceeded", headers)
    if fault == "context_length":
        message = "This model's maximum context length was exceeded (injected by [[fault:context_length]])."
        return error_reply(400, message, "invalid_request_error", "context_length_exceeded")
    if fault == "content_policy":
        message = "Your request was rejected by the safety system (injected by [[fault:content_policy]])."
        return error_reply(400, message, "invalid_request_error", "content_policy_violation")
    message = "The server had an error while processing your request (injected by [[fault:server_error]])."
    return error_reply(500, message, "server_error", None)


def context_reply(request: ChatRequest, context_tokens: int) -> Reply | None:
    """OpenAI's 400 when the messages (plus max_tokens, when sent) exceed the context; else None."""
    prompt = request.prompt_tokens
    if request.max_tokens is not None and prompt + request.max_tokens > context_tokens:
        message = (
            f"This model's maximum context length is {context_tokens} tokens. However, you requested "
            f"{prompt + request.max_tokens} tokens ({prompt} in the messages, {request.max_tokens} in "
            "the completion). Please reduce the length of the messages or completion."
        )
    elif prompt > context_tokens:
        message = (
            f"This model's maximum context length is {context_tokens} tokens. However, your messages "
            f"resulted in {prompt} tokens. Please reduce the length of the messages."
        )
    else:
        return None
    body = {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }
    return Reply(400, body)


def delay_seconds(text: str) -> float:
    """The first [[delay:SECONDS]] directive, or no delay."""
    found = _DELAY.search(text)
    return float(found.group(1)) if found else 0.0


# --- shared state ---------------------------------------------------------------------------


class ServerState:
    """Fault counters, the call log and live connections, shared by the handler threads."""

    def __init__(self, *, verbose: bool, context_tokens: int = DEFAULT_CONTEXT_TOKENS) -> None:
        self.verbose = verbose
        self.context_tokens = context_tokens
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._counters: dict[str, int] = {}
        self._calls: list[dict[str, Any]] = []
        self._connections: set[socket.socket] = set()
        self._in_flight = 0

    def take_fault(self, request: ChatRequest) -> str | None:
        """The fault this call must show, counting it against the request's schedule."""
        text = request.text
        permanent = _PERMANENT_FAULT.search(text)
        if permanent:
            return str(permanent.group(1))
        schedule = [(str(kind), int(times)) for kind, times in _COUNTED_FAULT.findall(text)]
        if not schedule:
            return None
        with self._lock:
            call = self._counters.get(request.request_hash, 0) + 1
            self._counters[request.request_hash] = call
        for kind, times in schedule:
            if call <= times:
                return kind
            call -= times
        return None

    def reset_faults(self) -> None:
        with self._lock:
            self._counters.clear()

    def begin_call(self) -> None:
        with self._lock:
            self._in_flight += 1

    def end_call(self, record: dict[str, Any]) -> None:
        with self._lock:
            self._in_flight -= 1
            self._calls.append(record)

    def calls(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._calls)

    def reset_calls(self) -> None:
        with self._lock:
            self._calls.clear()

    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    def track(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.add(connection)

    def untrack(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.discard(connection)

    def close_connections(self) -> None:
        """Wake every handler blocked on a keep-alive read, so no thread outlives stop()."""
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):  # already closed by the peer
                connection.shutdown(socket.SHUT_RDWR)


def _peer_closed(connection: socket.socket) -> bool:
    """True once the client hung up (a readable socket with nothing to read)."""
    readable, _, _ = select.select([connection], [], [], 0)
    if not readable:
        return False
    try:
        return connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


# --- HTTP -----------------------------------------------------------------------------------


class _HTTPServer(ThreadingHTTPServer):
    # Handler threads must never keep the process (or stop()) waiting on a stalled request.
    daemon_threads = True

    def __init__(self, address: tuple[str, int], state: ServerState) -> None:
        self.state = state
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-answer is routine here (timeouts are the point); stay quiet.
        if isinstance(sys.exc_info()[1], ConnectionError) and not self.state.verbose:
            return
        super().handle_error(request, client_address)


class _Handler(LocalRequestHandler):
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        self.server.state.track(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.state.untrack(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.state.verbose:  # http.server's access log, which the base silences
            BaseHTTPRequestHandler.log_message(self, format, *args)

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/v1/models":
            self._send(self._models())
        elif path == "/_calls":
            self._send(Reply(200, self.server.state.calls()))
        elif path == "/_tally":
            self._send(Reply(200, tally(self.server.state.calls())))
        else:
            self._send(_not_found(path))

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        body = self._read_body()
        if body is None:
            return
        state = self.server.state
        if path == "/v1/chat/completions":
            self._chat(body)
        elif path == "/_faults/reset":
            state.reset_faults()
            self._send(Reply(200, {"reset": "faults"}))
        elif path == "/_calls/reset":
            state.reset_calls()
            self._send(Reply(200, {"reset": "calls"}))
        else:
            self._send(_not_found(path))

    def _read_body(self) -> bytes | None:
        """The request body, or None after answering 413 (the body is left unread)."""
        declared = self.headers.get("Content-Length") or "0"
        length = int(declared) if declared.isdigit() else -1
        if length < 0:
            # Reading a body of unknown length would wait for the client to hang up.
            self.close_connection = True
            self._send(error_reply(400, "A valid Content-Length is required.", "invalid_request_error", None))
            return None
        if length > MAX_BODY_BYTES:
            self.close_connection = True  # the unread body makes the connection unusable
            self._send(error_reply(413, "The request body is too large.", "invalid_request_error", None))
            return None
        return self.rfile.read(length)

    def _models(self) -> Reply:
        if not _authorized(self.headers.get("Authorization")):
            return _unauthorized()
        data = [{"id": model, "object": "model", "created": 0, "owned_by": "outlast"} for model in MODELS]
        return Reply(200, {"object": "list", "data": data})

    def _chat(self, body: bytes) -> None:
        state = self.server.state
        state.begin_call()
        started = time.time()
        result = CallOutcome("error", 500)
        try:
            result = self._serve_chat(body)
        finally:
            state.end_call(result.record(started, time.time()))

    def _serve_chat(self, body: bytes) -> CallOutcome:
        try:
            request, problem = parse_chat_request(body), ""
        except InvalidRequestError as err:
            request, problem = None, str(err)
        # Authentication comes first, as at OpenAI; the parsed request still names the call in the log.
        if not _authorized(self.headers.get("Authorization")):
            return self._send(_unauthorized(), CallOutcome("unauthorized", 401, request))
        if request is None:
            reply = error_reply(400, problem, "invalid_request_error", None)
            return self._send(reply, CallOutcome("invalid_request", 400))
        return self._answer_chat(request)

    def _answer_chat(self, request: ChatRequest) -> CallOutcome:
        state = self.server.state
        # Checked before any fault is counted: OpenAI refuses such a request before doing anything.
        too_long = context_reply(request, state.context_tokens)
        if too_long is not None:
            return self._send(too_long, CallOutcome("context_length_exceeded", too_long.status, request))
        fault = state.take_fault(request)
        delay = delay_seconds(request.text)
        if delay and state.stopping.wait(delay):
            self.close_connection = True
            return CallOutcome("shutdown", None, request)
        if fault == "timeout":
            self._stall()
            return CallOutcome("timeout", None, request)
        if fault is not None:
            reply = fault_reply(fault)
            return self._send(reply, CallOutcome(fault, reply.status, request))
        reply = completion(request)
        usage = reply.body["usage"]
        served = {"inputTokens": usage["prompt_tokens"], "outputTokens": usage["completion_tokens"]}
        try:
            return self._send(reply, CallOutcome("ok", 200, request, served))
        except OSError:
            # The caller left before the answer (it gave up, or its process died): the answer was
            # generated all the same, and the tally counts it as a provider would bill it.
            self.close_connection = True
            return CallOutcome("abandoned", None, request, served)

    def _stall(self) -> None:
        """Answer nothing until the client gives up, the server stops, or the bound passes."""
        deadline = time.monotonic() + STALL_LIMIT_SECONDS
        while time.monotonic() < deadline:
            if self.server.state.stopping.wait(STALL_STEP_SECONDS) or _peer_closed(self.connection):
                break
        self.close_connection = True  # never answer a stalled request late

    def _send(self, reply: Reply, result: CallOutcome | None = None) -> CallOutcome:
        payload = json.dumps(reply.body).encode()
        self.send_response(reply.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("x-request-id", f"req_{uuid.uuid4().hex}")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(payload)
        return result or CallOutcome("ok", reply.status)


def _unauthorized() -> Reply:
    message = "You didn't provide an API key. Send it as 'Authorization: Bearer YOUR_KEY'."
    return error_reply(401, message, "invalid_request_error", None)


def _not_found(path: str) -> Reply:
    return error_reply(404, f"Invalid URL ({path}).", "invalid_request_error", "unknown_url")


# --- the server -----------------------------------------------------------------------------


class ModelServer:
    """The model server on a background daemon thread; `url` is what OPENAI_BASE_URL takes."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        verbose: bool = False,
        context_tokens: int = DEFAULT_CONTEXT_TOKENS,
    ) -> None:
        if context_tokens < 1:
            raise ValueError("context_tokens must be at least 1")
        self._state = ServerState(verbose=verbose, context_tokens=context_tokens)
        self._httpd = _HTTPServer((host, port), self._state)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL of the OpenAI API, ending in /v1."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    @property
    def running(self) -> bool:
        """True while the serving thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def in_flight(self) -> int:
        """Chat calls started and not yet finished (stalls and delays included)."""
        return self._state.in_flight

    def start(self) -> ModelServer:
        """Serve on a daemon thread."""
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1}, name="model-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop promptly: wake stalled and delayed calls, drop connections, release the port."""
        self._state.stopping.set()
        if self._thread is not None:
            self._httpd.shutdown()  # returns once serve_forever has left its loop
            self._thread.join(timeout=5)
        self._state.close_connections()
        self._httpd.server_close()

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return number


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m outlast.local.model_server`: serve until Ctrl-C or SIGTERM."""
    parser = argparse.ArgumentParser(description="outlast's local OpenAI-compatible model server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8400)
    parser.add_argument("--verbose", action="store_true", help="log every request to stderr")
    parser.add_argument(
        "--context-tokens",
        type=_positive_int,
        default=DEFAULT_CONTEXT_TOKENS,
        help=f"the model's context in tokens estimated as ceil(bytes / 4) (default {DEFAULT_CONTEXT_TOKENS})",
    )
    args = parser.parse_args(argv)

    stop = StopSignals().install()
    server = ModelServer(
        args.host, args.port, verbose=args.verbose, context_tokens=args.context_tokens
    ).start()
    sys.stdout.write(f"model server: {server.url}\n")
    sys.stdout.flush()
    stop.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
