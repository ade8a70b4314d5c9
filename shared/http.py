"""The HTTP edge shared by the API functions: the resolver, its error handlers, callers, responses."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)
from aws_lambda_powertools.utilities.typing import LambdaContext

from shared.contract import MAX_BODY_BYTES, ResponseModel
from shared.errors import (
    DocumentNotReadyError,
    OutlastError,
    RateLimitedError,
    StorageUnavailableError,
    UnauthorizedError,
)
from shared.identity import caller_from_claims
from shared.job import Caller
from shared.observability import logger
from shared.problems import (
    PROBLEM_CONTENT_TYPE,
    code_for_validation_errors,
    invalid_params,
    problem_body,
    problem_for_error,
)

JSON = "application/json"


def _loads(text: str) -> Any:
    """json.loads, with every way JSON can be unreadable reported as a JSON error.

    Deep nesting (RecursionError) and integers past Python's digit limit (ValueError) would
    otherwise escape the resolver's validation as 500s; as JSONDecodeError they are a 400.
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except (RecursionError, ValueError) as error:
        raise json.JSONDecodeError("unreadable JSON", text[:64], 0) from error


def create_resolver() -> APIGatewayHttpResolver:
    """An HTTP API (payload 2.0) resolver with validation on and every error answered as problem+json.

    CORS is API Gateway's job (configured in the CDK app), so the resolver adds no CORS headers.
    """
    app = APIGatewayHttpResolver(enable_validation=True, json_body_deserializer=_loads)

    def correlation_id() -> str:
        return app.current_event.request_context.request_id or "unknown"

    def problem(
        status_and_body: tuple[int, dict[str, Any]], headers: Mapping[str, str] | None = None
    ) -> Response[str]:
        status, body = status_and_body
        return Response(status, PROBLEM_CONTENT_TYPE, json.dumps(body), headers=dict(headers or {}))

    @app.exception_handler(RequestValidationError)
    def _invalid(error: RequestValidationError) -> Response[str]:
        errors = list(error.errors())
        code = code_for_validation_errors(errors)
        params = invalid_params(errors) if code in {"invalid_request", "invalid_query"} else None
        logger.info(
            "request rejected", extra={"code": code, "invalid_params": [p.to_wire() for p in params or []]}
        )
        return problem(problem_body(code, correlation_id(), invalid_params=params))

    @app.exception_handler(RequestUnsupportedContentType)
    def _unsupported(_: RequestUnsupportedContentType) -> Response[str]:
        return problem(problem_body("unsupported_media_type", correlation_id()))

    @app.exception_handler(OutlastError)
    def _domain(error: OutlastError) -> Response[str]:
        retry_after: int | None = None
        if isinstance(error, RateLimitedError | StorageUnavailableError | DocumentNotReadyError):
            retry_after = error.retry_after
        headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
        if error.code == "internal_error":
            logger.exception("internal error", extra={"code": error.code})
        else:
            logger.info("request refused", extra={"code": error.code})
        return problem(problem_for_error(error, correlation_id()), headers)

    @app.not_found
    def _no_route(_: NotFoundError) -> Response[str]:
        return problem(problem_body("route_not_found", correlation_id()))

    @app.exception_handler(Exception)
    def _unexpected(_: Exception) -> Response[str]:
        # The traceback goes to the logs under the correlation id; the caller gets only the id.
        logger.exception("unhandled error")
        return problem(problem_body("internal_error", correlation_id()))

    return app


def current_caller(app: APIGatewayHttpResolver) -> Caller:
    """The authenticated caller of the current request (UnauthorizedError when there is none)."""
    return caller_from_claims(app.current_event.request_context.authorizer.jwt_claim)


def json_response(
    status: int, model: ResponseModel, headers: Mapping[str, str] | None = None
) -> Response[str]:
    """A JSON answer from a response model, camelCase on the wire."""
    return Response(status, JSON, json.dumps(model.to_wire()), headers=dict(headers or {}))


def _body_bytes(event: Mapping[str, Any]) -> int:
    body = event.get("body") or ""
    if event.get("isBase64Encoded"):
        return len(body) * 3 // 4 - body[-2:].count("=")
    return len(body.encode("utf-8"))


def _is_json(content_type: str) -> bool:
    # Media types are case-insensitive (RFC 9110 8.3.1); parameters such as charset are fine.
    media_type = content_type.split(";", 1)[0].strip().lower()
    return media_type == JSON or (media_type.startswith("application/") and media_type.endswith("+json"))


def _early_problem(event: dict[str, Any], code: str, error: OutlastError | None = None) -> dict[str, Any]:
    request_id = str(event.get("requestContext", {}).get("requestId", "unknown"))
    status, body = problem_for_error(error, request_id) if error else problem_body(code, request_id)
    return {
        "statusCode": status,
        "headers": {"Content-Type": PROBLEM_CONTENT_TYPE},
        "body": json.dumps(body),
        "isBase64Encoded": False,
    }


def _text_body(event: dict[str, Any]) -> str | None:
    """The body as text, or None when it is not UTF-8 (so it cannot be JSON)."""
    body = str(event.get("body") or "")
    if not event.get("isBase64Encoded"):
        return body
    try:
        return base64.b64decode(body, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def _claims(event: Mapping[str, Any]) -> Mapping[str, Any] | None:
    authorizer = (event.get("requestContext") or {}).get("authorizer") or {}
    claims: Mapping[str, Any] | None = (authorizer.get("jwt") or {}).get("claims")
    return claims


def serve(app: APIGatewayHttpResolver, event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Resolve one request. A caller without an ID token is refused first (401 tells it nothing
    about the request). A body over the limit, one that is not JSON, or one that is not even
    UTF-8, is refused before anything parses it: the resolver would otherwise try form and
    multipart parsers on it, or fail to decode it (a 500)."""
    try:
        caller_from_claims(_claims(event))
    except UnauthorizedError as error:
        logger.info("request refused", extra={"code": error.code})
        return _early_problem(event, error.code, error)
    if _body_bytes(event) > MAX_BODY_BYTES:
        return _early_problem(event, "request_too_large")
    if not event.get("body"):
        return app.resolve(event, context)
    headers = event.get("headers") or {}
    content_type = next((str(v) for k, v in headers.items() if k.lower() == "content-type"), "")
    if content_type and not _is_json(content_type):
        return _early_problem(event, "unsupported_media_type")
    text = _text_body(event)
    if text is None:
        return _early_problem(event, "invalid_json")
    # The resolver matches the media type case-sensitively; hand it the canonical spelling.
    canonical = {**{k: v for k, v in headers.items() if k.lower() != "content-type"}, "content-type": JSON}
    return app.resolve({**event, "headers": canonical, "body": text, "isBase64Encoded": False}, context)
