"""The fake model: one chat call in, what to do with it out (its answer or its fault, and any delay).

Pure but for its counters and its log: no socket, no clock but the times its caller gives. The
HTTP layer (outlast.local.model_server) parses nothing itself and decides nothing: it asks
`take` for a Turn, acts it out (waits the delay, stalls for a timeout, writes the reply), and
tells `end_call` what became of it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from outlast.local.fake_model.calls import CallLog, CallOutcome, tally
from outlast.local.fake_model.completions import completion
from outlast.local.fake_model.directives import (
    ANSWERED_FAULTS,
    FaultCounters,
    delay_seconds,
    pace_tokens_per_second,
)
from outlast.local.fake_model.prompt_cache import PromptCache
from outlast.local.fake_model.replies import (
    Reply,
    context_reply,
    error_reply,
    fault_reply,
    model_list,
    unauthorized,
)
from outlast.local.fake_model.requests import ChatRequest, InvalidRequestError, authorized, parse_chat_request
from outlast.local.fake_model.streaming import StreamedAnswer

DEFAULT_CONTEXT_TOKENS = 128_000


@dataclass(frozen=True)
class Turn:
    """What the fake model does with one chat call."""

    request: ChatRequest | None  # None when the body is no Chat Completions request
    fault: str | None = None  # an injected fault's name, or why the call is refused
    delay_seconds: float = 0.0  # wait this long before answering
    refusal: Reply | None = None  # an answer given at once, before any fault is counted

    @property
    def stalls(self) -> bool:
        """True when the call is never answered (the timeout fault): its client must give up."""
        return self.fault == "timeout"

    @property
    def streams(self) -> bool:
        """True when the answer is server-sent events (a streaming request that is not refused)."""
        return (
            self.request is not None
            and self.request.stream
            and self.refusal is None
            and (self.fault is None or self.fault in ANSWERED_FAULTS)
        )

    @property
    def cuts(self) -> bool:
        """True when the stream breaks after a few pieces (`[[fault:stream_cut*N]]`)."""
        return self.streams and self.fault == "stream_cut"

    @property
    def pace(self) -> float | None:
        """A streamed answer's tokens a second (`[[pace:N]]`), or None: as fast as it can."""
        return pace_tokens_per_second(self.request.text) if self.request is not None else None

    def streamed_answer(self) -> StreamedAnswer:
        """The pieces of a streamed answer and how it ends (made now, after any delay)."""
        if self.request is None:
            raise ValueError("a turn without a request is a refusal")
        return StreamedAnswer.of(self.request, broken=self.broken)

    def streamed(self, outcome: str, answer: StreamedAnswer, sent: str) -> CallOutcome:
        """What the call log records of a stream: `ok`, `stream_cut`, or `closed_early` (its client
        closed it before the end), or `invalid_json` for a whole one that breaks its schema on
        purpose; the tally counts what was sent, as a provider bills it."""
        if outcome == "ok" and self.broken:
            outcome = "invalid_json"
        return CallOutcome(outcome, 200, self.request, answer.usage(sent))

    @property
    def broken(self) -> bool:
        """True when a structured answer breaks its schema (`[[fault:invalid_json*N]]`)."""
        return self.fault == "invalid_json"

    def reply(self) -> tuple[Reply, CallOutcome]:
        """The answer, made now (after any delay), and what the call log records once it is sent."""
        if self.refusal is not None:
            return self.refusal, CallOutcome(str(self.fault), self.refusal.status, self.request)
        if self.request is None:
            raise ValueError("a turn without a request is a refusal")
        if (
            self.fault is not None and self.fault not in ANSWERED_FAULTS
        ):  # a call that does not stream is not cut
            reply = fault_reply(self.fault)
            return reply, CallOutcome(self.fault, reply.status, self.request)
        reply = completion(self.request, broken=self.broken)
        usage = reply.body["usage"]
        served = {"inputTokens": usage["prompt_tokens"], "outputTokens": usage["completion_tokens"]}
        return reply, CallOutcome("invalid_json" if self.broken else "ok", 200, self.request, served)

    def unanswered(self, outcome: str) -> CallOutcome:
        """No answer was sent: the call stalled (`timeout`) or the server stopped (`shutdown`)."""
        return CallOutcome(outcome, None, self.request)

    def abandoned(self, sent: CallOutcome) -> CallOutcome:
        """The caller left before the answer: it was generated all the same, and the tally counts
        it as a provider would bill it."""
        return CallOutcome("abandoned", None, self.request, sent.usage)


class FakeModel:
    """The deterministic model behind the local model server, with its fault counters and call log."""

    def __init__(self, context_tokens: int = DEFAULT_CONTEXT_TOKENS) -> None:
        if context_tokens < 1:
            raise ValueError("context_tokens must be at least 1")
        self.context_tokens = context_tokens
        self._faults = FaultCounters()
        self._cache = PromptCache()
        self._log = CallLog()

    def take(self, body: bytes, authorization: str | None) -> Turn:
        """What to do with a `POST /v1/chat/completions`: its counted fault, if any, is counted now."""
        try:
            request, problem = parse_chat_request(body), ""
        except InvalidRequestError as err:
            request, problem = None, str(err)
        # Authentication comes first, as at OpenAI; the parsed request still names the call in the log.
        if not authorized(authorization):
            return Turn(request, "unauthorized", refusal=unauthorized())
        if request is None:
            invalid = error_reply(400, problem, "invalid_request_error", None)
            return Turn(None, "invalid_request", refusal=invalid)
        # Checked before any fault is counted: OpenAI refuses such a request before doing anything.
        too_long = context_reply(request, self.context_tokens)
        if too_long is not None:
            return Turn(request, "context_length_exceeded", refusal=too_long)
        fault = self._faults.take(request)
        if fault is None or fault in ANSWERED_FAULTS:
            # An answered call reads the prompt cache (and fills it): a refused one never ran.
            request = replace(request, cached_tokens=self._cache.serve(request))
        return Turn(request, fault, delay_seconds(request.text))

    def batch_call(self, body: bytes, now: float) -> tuple[Reply, CallOutcome]:
        """One line of a batch, run as a chat call is (its faults counted, logged like any call);
        a delay is not waited and a stall is the server error a batch line would end with."""
        self.begin_call()
        turn = self.take(body, "Bearer batch")
        reply, outcome = turn.reply()
        self.end_call(outcome, now, now)
        return reply, outcome

    def models(self, authorization: str | None) -> Reply:
        """`GET /v1/models`."""
        return model_list() if authorized(authorization) else unauthorized()

    def reset_faults(self) -> None:
        """`POST /_faults/reset`: every fault counter back to zero (the call log stays)."""
        self._faults.reset()

    def begin_call(self) -> None:
        """A chat call arrived (it counts as in flight until `end_call`)."""
        self._log.begin()

    def end_call(self, outcome: CallOutcome, started: float, finished: float) -> None:
        """A chat call is over; log what became of it."""
        self._log.end(outcome.record(started, finished))

    @property
    def in_flight(self) -> int:
        """Chat calls begun and not yet ended (stalls and delays included)."""
        return self._log.in_flight

    def calls(self) -> list[dict[str, Any]]:
        """`GET /_calls`."""
        return self._log.calls()

    def reset_calls(self) -> None:
        """`POST /_calls/reset`: the call log only."""
        self._log.reset()

    def tally(self) -> dict[str, dict[str, int]]:
        """`GET /_tally`."""
        return tally(self._log.calls())
