"""The fake model: the deterministic OpenAI model behind the local model server, without sockets.

Answers are derived from the document in the prompt, and directives in the message text inject
the failures the worker must survive (DESIGN.md, "Model providers"):

| directive                  | effect                                                          |
|----------------------------|-----------------------------------------------------------------|
| `[[fault:rate_limit*N]]`   | first N calls: 429 `rate_limit_exceeded`, `Retry-After: 1`      |
| `[[fault:server_error*N]]` | first N calls: 500 `server_error`                               |
| `[[fault:timeout*N]]`      | first N calls: no answer until the client gives up (max 60 s)   |
| `[[fault:context_length]]` | always: 400 `context_length_exceeded`                           |
| `[[fault:content_policy]]` | always: 400 `content_policy_violation`                          |
| `[[delay:SECONDS]]`        | wait that long before answering (the first delay directive)     |
| `[[pace:N]]`               | a streamed answer (`stream: true`) sends N tokens a second      |
| `[[fault:stream_cut*N]]`   | first N calls: a streamed answer breaks off after a few tokens  |
| `[[fault:invalid_json*N]]` | first N calls: a structured answer that breaks its schema       |
| `[[fault:flex_unavailable*N]]` | first N calls: a flex call gets 429 `resource_unavailable` |
| `[[fault:batch_expired]]`  | in a batch's line: the batch expires before it runs that line   |

A directive applies to the call whose messages contain it, and only to that call: in a job run
in steps, a directive inside one chunk affects that chunk's map call. No answer ever contains a
directive. Counted faults are keyed by the SHA-256 of the canonical JSON of the request's
messages and run in the order they appear: `rate_limit*2` then `server_error*1` fails calls 1-2
with 429, call 3 with 500, and answers from call 4 on.

Structured answers (DESIGN.md, "Structured extraction"): a request with `response_format`
`json_schema` gets a deterministic instance of the schema made of the words of its document (of
the string values of the objects a reduce merges), as JSON; a strict schema outside the subset is
OpenAI's 400. An answer over `max_tokens` is cut there, as every answer is, with `finish_reason`
`length`: a cut JSON document is no JSON at all.

Context: a call whose messages' text, estimated at ceil(UTF-8 bytes / 4) tokens (plus its
`max_tokens`, when it sends one), is over the configured context (default 128,000) gets
OpenAI's answer: 400, `invalid_request_error`, code `context_length_exceeded`, param `messages`,
"This model's maximum context length is N tokens. However, your messages resulted in M
tokens. ..." `usage.prompt_tokens` uses the same estimate.

Tiers and caching (DESIGN.md, "Cost tiers"): `service_tier` is accepted (OpenAI's values) and
named back in the answer (`flex` or `default`); `prompt_cache_key` is accepted. A prompt whose
first 1,024 tokens or more (in steps of 128) repeat an earlier answered call's reports them in
`usage.prompt_tokens_details.cached_tokens` (`prompt_cache`). `flex_unavailable` refuses only calls
that ask for `service_tier: "flex"`; a standard call of the same messages is answered.

The modules, one concern each (a new feature is a new module or an entry in one of these):
- `requests`: the Chat Completions request read and validated; `messages_hash`.
- `directives`: the directives, and the per-request counters of the counted faults.
- `answers`: what the prompt asks (operation, template, part) and the text that answers it.
- `completions`: the chat.completion object (the answer cut to max_tokens, its usage).
- `streaming`: a streamed answer (`stream: true`): its tokens as `chat.completion.chunk` server-sent
  events, the finish reason, a usage chunk (`stream_options.include_usage`), `[DONE]`; the HTTP
  layer paces them, cuts them, and logs `closed_early` when the client closes the stream first.
- `replies`: OpenAI's error shapes, each injected fault's answer, the context check.
- `calls`: the call log and the tally of tokens served.
- `model`: `FakeModel.take(body, authorization) -> Turn`, what one call gets; the HTTP layer
  acts the turn out.
- `prompt_cache`: the cached tokens of a repeated prompt prefix.
- `batches`: the Batch API (`/v1/files`, `/v1/batches`): a batch's lines run as chat calls once
  `batch_seconds` have passed; `batch_expired` lines end in its error file; the list pages
  newest first with each batch's `metadata` and runs nothing.
- `structured`: a structured answer (the words it is made of, a broken one for `invalid_json`).
- `schema_instance`: a deterministic instance of a JSON Schema (structured answers).
"""
