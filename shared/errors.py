"""Domain errors. Each carries a stable code; shared.problems maps codes to HTTP in one place.

The `detail` of an error is written for the caller: it never holds exception text from a
library, a provider payload or an internal value such as a lease token or a fingerprint.
"""

from __future__ import annotations

from enum import StrEnum

from shared.documents.types import RejectCode


class OutlastError(Exception):
    """Base of every error the domain raises on purpose."""

    code = "internal_error"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class UnauthorizedError(OutlastError):
    """The request carries no usable identity (missing or malformed claims, not an ID token)."""

    code = "unauthorized"


class MissingIdempotencyKeyError(OutlastError):
    code = "missing_idempotency_key"


class InvalidIdempotencyKeyError(OutlastError):
    code = "invalid_idempotency_key"


class InvalidRequestError(OutlastError):
    """The body is valid JSON but breaks the schema or a rule the schema cannot express."""

    code = "invalid_request"


class ModelNotAllowedError(InvalidRequestError):
    code = "model_not_allowed"


class TierUnavailableError(InvalidRequestError):
    """The model/tier pair is not in the price table, or the stage does not allow it."""

    code = "tier_unavailable"


class InvalidSchemaError(InvalidRequestError):
    """extract's `options.schema` leaves the subset strict structured outputs accept; the detail
    names the JSON pointer of the first problem."""

    code = "invalid_schema"


class InvalidCursorError(OutlastError):
    code = "invalid_cursor"


class IdempotencyKeyReusedError(OutlastError):
    """The key was used before, by the same caller, with a different request."""

    code = "idempotency_key_reused"


class RateLimitedError(OutlastError):
    """The caller is over its submit rate; retry after `retry_after` seconds."""

    code = "rate_limited"

    def __init__(self, detail: str, retry_after: int) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class BudgetExceededError(OutlastError):
    """The job's upper bound of tokens does not fit what is left of its tenant's monthly budget.

    No Retry-After: waiting helps only once running jobs settle or the period resets, which the
    detail says.
    """

    code = "budget_exceeded"


class JobNotFoundError(OutlastError):
    """Missing, expired or owned by another caller: deliberately indistinguishable."""

    code = "job_not_found"

    def __init__(self) -> None:
        super().__init__("No job with this id exists for the caller.")


class DocumentNotFoundError(OutlastError):
    """Missing, expired or owned by another caller: deliberately indistinguishable, like jobs."""

    code = "document_not_found"

    def __init__(self) -> None:
        super().__init__("No document with this id exists for the caller.")


class DocumentInUseError(OutlastError):
    """Jobs that read the document have not ended: it cannot be deleted until they do."""

    code = "document_in_use"

    def __init__(self) -> None:
        super().__init__("Jobs that read this document have not ended yet; delete it once they have.")


class DocumentNotReadyError(OutlastError):
    """A job was asked for on a document that is not Ready: still ingesting (`retry_after` says
    when to ask again) or Rejected (None: no wait will help)."""

    code = "document_not_ready"

    def __init__(self, detail: str, retry_after: int | None) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class UnsupportedDocumentTypeError(OutlastError):
    """A document declared as a type outside the list outlast reads (415)."""

    code = "unsupported_document_type"


class DocumentTooLargeError(OutlastError):
    """A document declared larger than the stage's maxDocumentBytes (413)."""

    code = "document_too_large"


class JobNotSucceededError(OutlastError):
    code = "job_not_succeeded"


class JobNotCancelableError(OutlastError):
    code = "job_not_cancelable"


class IllegalTransitionError(OutlastError):
    """A code path asked for a transition the lifecycle does not have (a bug, not an input)."""

    code = "internal_error"

    def __init__(self, source: str, target: str) -> None:
        super().__init__(f"{source} -> {target} is not a lifecycle transition")
        self.source = source
        self.target = target


class ConditionFailedError(OutlastError):
    """A conditional write lost: the item changed since it was read (another writer won)."""

    code = "internal_error"


class StorageUnavailableError(OutlastError):
    """A storage call failed in a way worth retrying (throttling, a 5xx, a dropped connection)."""

    code = "service_unavailable"
    # What a 503 tells the client (Retry-After, seconds): throttling and dropped connections
    # clear within seconds, and every write a retry repeats is conditional.
    retry_after = 2


class ProviderError(OutlastError):
    """The model provider failed; adapters raise one of the two subclasses, never this one."""

    code = "provider_error"


class TransientProviderError(ProviderError):
    """Worth retrying later (timeout, connection, 429, 5xx, a stream cut mid-way); `retry_after` is
    the provider's hint. `usage` is set when the call had generated (and billed) tokens before it
    failed: a streamed call cut mid-way, counted by estimate."""

    code = "provider_transient"

    def __init__(self, detail: str, retry_after: float | None = None, usage: object | None = None) -> None:
        super().__init__(detail)
        self.retry_after = retry_after
        self.usage = usage


class FlexUnavailableError(TransientProviderError):
    """The flex tier had no capacity for the call (429 `resource_unavailable`): nothing was
    generated or billed, so the job defers without spending an attempt (DESIGN.md, "Cost tiers")."""

    code = "flex_unavailable"


class TerminalProviderError(ProviderError):
    """Retrying cannot help; `job_code` is the stable job error code from DESIGN.md.

    `usage` is set when the provider answered (and billed) before refusing, e.g. a filtered output.
    """

    code = "provider_terminal"

    def __init__(self, job_code: str, detail: str, usage: object | None = None) -> None:
        super().__init__(detail)
        self.job_code = job_code
        self.usage = usage


class InvalidAnswerError(ProviderError):
    """A structured answer that is not JSON or breaks its schema (DESIGN.md, "Structured
    extraction"): asked once more within the claim, then the job fails `invalid_output`.

    `usage`: the call was billed all the same; `problem`: the JSON pointer where the answer broke
    the schema ("" when it was not JSON at all), for the logs.
    """

    code = "provider_invalid_answer"

    def __init__(self, detail: str, usage: object | None = None, problem: str = "") -> None:
        super().__init__(detail)
        self.usage = usage
        self.problem = problem


class UnknownPromptVersionError(Exception):
    """A job names a prompt version this deploy does not have (a rollout in progress)."""


class WebhookSignatureError(OutlastError):
    """A webhook's headers do not prove it came from the holder of the secret, just now."""

    code = "webhook_signature_invalid"


class EgressRefusal(StrEnum):
    """Why the egress guard refused a webhook URL (stable: the operator CLI and records show it)."""

    MALFORMED = "malformed"  # not a plain absolute URL: whitespace, controls, backslashes, a fragment
    SCHEME = "scheme"  # not https (plain http only with the local-only flag)
    USERINFO = "userinfo"  # user:password@ in the authority
    PORT = "port"  # a port outside what the guard allows
    HOST = "host"  # not a DNS name or an IP literal
    NUMERIC_HOST = "numeric_host"  # an IPv4 address spelled other than as a dotted quad
    UNRESOLVED = "unresolved"  # the name resolves to nothing
    ADDRESS = "address"  # an address that is not global (loopback, private, link-local, ...)


class EgressRefusedError(OutlastError):
    """The egress guard refused a webhook destination; nothing was sent.

    `address` and `address_class` are set for ADDRESS refusals: the offending address and the
    special-purpose range it falls in (for example "loopback" or "link-local").
    """

    code = "egress_refused"

    def __init__(
        self,
        reason: EgressRefusal,
        detail: str,
        *,
        address: str | None = None,
        address_class: str | None = None,
    ) -> None:
        super().__init__(detail)
        self.reason = reason
        self.address = address
        self.address_class = address_class


class DocumentRejectedError(Exception):
    """An extractor's verdict on a file: it cannot become a Ready document, and `code` says why.

    Not an OutlastError: it never reaches a client as an HTTP error. The ingest writes it on the
    document as `error {code, message}`, and `message` is written for the document's owner: it
    never holds parser exception text or bytes of the file.
    """

    def __init__(self, code: RejectCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class OriginalChangedError(Exception):
    """The uploaded object is no longer the one its upload event announced (a later upload
    replaced it), so the bytes that event was about cannot be read any more."""


class OriginalMissingError(Exception):
    """The uploaded object is gone (expired or deleted) by the time its event is handled."""
