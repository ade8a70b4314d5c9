"""The check before every AWS call: botocore hooks that deny what the function's role does not allow.

Installed on botocore's event system, the way botocore's own Stubber intercepts calls:
- `before-parameter-build` keeps the call's parameters (as the caller passed them);
- `before-call` maps the call to what IAM authorizes (outlast.local.iam.requests), evaluates the
  role's policies (outlast.local.iam.policy) and, when one is not allowed, answers in place of the
  service: botocore then raises the service's own `ClientError` (`AccessDeniedException` for
  DynamoDB and Secrets Manager, `AccessDenied` with 403 for S3 and SQS), so the caller's error
  handling runs exactly as it would in AWS. Nothing is sent.
- `after-call` of S3 GetObject/HeadObject turns a missing key into 403 AccessDenied when the role
  may not `s3:ListBucket` the bucket, as S3 does (it will not say whether a key exists to a caller
  that may not list it).

A function process gets the hooks in every botocore session it creates (`install_in_every_session`,
from outlast.local.iam.bootstrap); the stack's pollers get them on the clients they poll with.
"""

from __future__ import annotations

import sys
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from botocore import handlers
from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders
from botocore.hooks import BaseEventHooks

from outlast.local.iam.denials import Denial, DenialLog
from outlast.local.iam.policy import Decision, evaluate, local_context
from outlast.local.iam.requests import Authorization, UnmappedOperation, required
from outlast.local.iam.roles import FunctionRole, RoleFile

_PARAMS = "outlast.iam.params"
# (error code, HTTP status) of an authorization failure, per service (botocore's service name).
_REFUSALS = {
    "dynamodb": ("AccessDeniedException", 400),
    "dynamodbstreams": ("AccessDeniedException", 400),
    "secretsmanager": ("AccessDeniedException", 400),
    "s3": ("AccessDenied", 403),
    "sqs": ("AccessDenied", 403),
    "apigatewaymanagementapi": ("AccessDeniedException", 403),
}
_DEFAULT_REFUSAL = ("AccessDeniedException", 400)
# How AWS ends an AccessDenied message, per kind of denial.
_WHY = {
    Decision.IMPLICIT_DENY: "because no identity-based policy allows the {action} action",
    Decision.EXPLICIT_DENY: "with an explicit deny in an identity-based policy",
}
_S3_READS = frozenset({"GetObject", "HeadObject"})

Announce = Callable[[str], None]


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)  # noqa: T201 - the function's log, as Lambda keeps it


class Guard:
    """One function's role, enforced on the botocore clients it is installed on.

    `role` gives the role to check each call against: a role file's current content, or (where
    one process hosts several functions, as the benchmark harness does) whichever function is
    running now.
    """

    def __init__(self, role: Callable[[], FunctionRole], announce: Announce | None = None) -> None:
        self._role = role
        self._announce = announce

    @classmethod
    def of_file(cls, path: Path, announce: Announce | None = None) -> Guard:
        """The guard of the role in a role file, re-read whenever the file changes."""
        file, lock = RoleFile(path), threading.Lock()

        def current() -> FunctionRole:
            with lock:
                return file.current()

        return cls(current, announce)

    @property
    def role(self) -> FunctionRole:
        """The role the next call is checked against."""
        return self._role()

    def install(self, events: BaseEventHooks) -> None:
        """Check every call of one client (or session) that emits on `events`."""
        for event, handler, unique_id in self._hooks():
            events.register(event, handler, unique_id=unique_id)

    def uninstall(self, events: BaseEventHooks) -> None:
        """Stop checking the calls that emit on `events` (clients made there from now on)."""
        for event, _, unique_id in self._hooks():
            events.unregister(event, unique_id=unique_id)

    def _hooks(self) -> list[tuple[str, Callable[..., Any], str]]:
        return [
            ("before-parameter-build", self._remember, "outlast-iam-params"),
            ("before-call", self._check, "outlast-iam-check"),
            ("after-call.s3", self._missing_key, "outlast-iam-s3-missing-key"),
        ]

    def install_in_every_session(self) -> None:
        """Check every call of every botocore session this process creates from now on."""
        handlers.BUILTIN_HANDLERS.extend((event, handler) for event, handler, _ in self._hooks())

    # --- the hooks -----------------------------------------------------------------------------

    def _remember(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context[_PARAMS] = dict(params)

    def _check(self, model: Any, params: dict[str, Any], context: dict[str, Any], **_: Any) -> Any:
        """None to let the call go; (response, parsed error) to answer it with a denial instead."""
        service = str(model.service_model.service_name)
        role = self.role
        call = f"{service}.{model.name}"
        try:
            needed = required(
                service, model.name, context.get(_PARAMS, {}), role.where, str(params.get("url", ""))
            )
        except UnmappedOperation as unmapped:
            unknown = Authorization(f"{service}:{model.name}", "(unknown)")
            return self._deny(role, call, unknown, "unmapped operation", str(unmapped))
        for authorization in needed:
            decision = self._decide(role, authorization)
            if not decision.allowed:
                why = _WHY[decision].format(action=authorization.action)
                message = (
                    f"User: {role.principal} is not authorized to perform: {authorization.action} "
                    f"on resource: {authorization.resource} {why}"
                )
                return self._deny(role, call, authorization, decision.value, message)
        return None

    def _missing_key(
        self, http_response: Any, parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any
    ) -> None:
        if model.name not in _S3_READS or http_response.status_code != 404:
            return
        role = self.role
        bucket = f"arn:aws:s3:::{context.get(_PARAMS, {}).get('Bucket', '')}"
        listing = Authorization("s3:ListBucket", bucket)
        if self._decide(role, listing).allowed:
            return
        # What S3 answers a caller that may not list the bucket: 403, whether or not the key exists.
        code, message = (
            ("403", "Forbidden") if model.name == "HeadObject" else ("AccessDenied", "Access Denied")
        )
        parsed["Error"] = {"Code": code, "Message": message}
        parsed.setdefault("ResponseMetadata", {})["HTTPStatusCode"] = 403
        self._record(role, f"s3.{model.name}", listing, "a missing key, and no s3:ListBucket on its bucket")

    # --- decisions -----------------------------------------------------------------------------

    def _decide(self, role: FunctionRole, authorization: Authorization) -> Decision:
        context = local_context(role.role_arn, role.where.account, role.where.region)
        return evaluate(role.documents, authorization.action, authorization.resource, context)

    def _deny(
        self, role: FunctionRole, call: str, authorization: Authorization, reason: str, message: str
    ) -> tuple[AWSResponse, dict[str, Any]]:
        self._record(role, call, authorization, reason)
        service, operation = call.split(".", 1)
        code, status = _REFUSALS.get(service, _DEFAULT_REFUSAL)
        if service == "s3" and operation == "HeadObject":
            code, message = "403", "Forbidden"  # a HEAD answer has no body to carry more
        parsed = {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {
                "HTTPStatusCode": status,
                "RequestId": str(uuid.uuid4()),
                "HTTPHeaders": {},
                "RetryAttempts": 0,
            },
        }
        return AWSResponse("", status, HTTPHeaders(), None), parsed

    def _record(self, role: FunctionRole, call: str, authorization: Authorization, reason: str) -> None:
        denial = Denial(
            function=role.function,
            action=authorization.action,
            resource=authorization.resource,
            call=call,
            reason=reason,
        )
        DenialLog(Path(role.denials)).record(denial)
        if self._announce is not None:
            self._announce(denial.line())


def announce_to_stderr() -> Announce:
    """Where a function process says what it denied: its own log."""
    return _to_stderr
