"""Errors to HTTP in one place: stable codes, problem+json bodies, and validation-error precedence."""

from __future__ import annotations

import re
from typing import Any

import pytest

from shared import errors
from shared.contract import InvalidParam
from shared.problems import (
    PROBLEMS,
    code_for_validation_errors,
    invalid_params,
    problem_body,
    problem_for_error,
)


def error(*loc: str | int, type_: str = "value_error") -> dict[str, Any]:
    """A pydantic error as the Powertools resolver reports it (loc starts with where it was)."""
    return {"loc": loc, "type": type_, "msg": "irrelevant", "input": "SECRET-INPUT"}


HEADER_MISSING = error("header", "idempotency-key", type_="missing")
HEADER_INVALID = error("header", "idempotency-key", type_="string_too_short")
JOB_ID = error("path", "job_id", type_="string_pattern_mismatch")
STATUS = error("query", "status", type_="enum")
LIMIT = error("query", "limit", type_="int_parsing")
CURSOR = error("query", "cursor", type_="string_too_long")
OTHER_QUERY = error("query", "page", type_="int_parsing")
JSON_INVALID = error("body", 17, type_="json_invalid")
TOO_LARGE = error("body", "input", "text", type_="input_too_large")
EXTRA = error("body", "options", "temperature", type_="extra_forbidden")
NULL = error("body", "input", type_="null_not_allowed")
LABELS = error("body", type_="labels_required")


class TestCodeForValidationErrors:
    @pytest.mark.parametrize(
        ("errors_", "code"),
        [
            ([HEADER_MISSING], "missing_idempotency_key"),
            ([HEADER_INVALID], "invalid_idempotency_key"),
            ([JOB_ID], "invalid_job_id"),
            ([STATUS], "invalid_status"),
            ([LIMIT], "invalid_limit"),
            ([CURSOR], "invalid_cursor"),
            ([OTHER_QUERY], "invalid_query"),
            ([JSON_INVALID], "invalid_json"),
            ([TOO_LARGE], "input_too_large"),
            ([EXTRA], "invalid_request"),
            ([NULL], "invalid_request"),
            ([LABELS], "invalid_request"),
            ([error("body", type_="missing")], "invalid_request"),
        ],
        ids=lambda value: value if isinstance(value, str) else None,
    )
    def test_each_kind_of_error_has_its_code(self, errors_: list[dict[str, Any]], code: str) -> None:
        assert code_for_validation_errors(errors_) == code

    @pytest.mark.parametrize(
        ("errors_", "code"),
        [
            ([EXTRA, TOO_LARGE, JSON_INVALID, HEADER_MISSING], "missing_idempotency_key"),
            ([TOO_LARGE, HEADER_INVALID], "invalid_idempotency_key"),
            ([TOO_LARGE, JOB_ID], "invalid_job_id"),
            ([EXTRA, STATUS], "invalid_status"),
            ([EXTRA, TOO_LARGE, JSON_INVALID], "invalid_json"),
            ([EXTRA, NULL, TOO_LARGE], "input_too_large"),
        ],
        ids=[
            "header before everything",
            "invalid header before the body",
            "path before the body",
            "query before the body",
            "JSON before the schema",
            "size before the schema",
        ],
    )
    def test_the_most_basic_problem_wins(self, errors_: list[dict[str, Any]], code: str) -> None:
        assert code_for_validation_errors(errors_) == code

    def test_a_named_query_parameter_wins_over_an_unnamed_one_only_in_order(self) -> None:
        # The resolver reports parameters in declaration order; the first one decides.
        assert code_for_validation_errors([STATUS, LIMIT]) == "invalid_status"
        assert code_for_validation_errors([LIMIT, STATUS]) == "invalid_limit"

    def test_an_error_without_a_location_is_a_body_error(self) -> None:
        assert code_for_validation_errors([{"loc": (), "type": "model_type"}]) == "invalid_request"


class TestInvalidParams:
    def test_names_the_field_by_its_wire_path_and_reason_by_type(self) -> None:
        assert invalid_params([EXTRA, NULL, error("body", "options", "labels", 2, type_="string_type")]) == [
            InvalidParam(name="options.temperature", reason="extra_forbidden"),
            InvalidParam(name="input", reason="null_not_allowed"),
            InvalidParam(name="options.labels.2", reason="string_type"),
        ]

    def test_a_json_error_or_a_whole_body_error_is_named_body(self) -> None:
        assert [p.name for p in invalid_params([JSON_INVALID, LABELS, {"loc": (), "type": "x"}])] == [
            "body",
            "body",
            "body",
        ]

    def test_a_query_parameter_is_named_by_itself(self) -> None:
        assert invalid_params([OTHER_QUERY]) == [InvalidParam(name="page", reason="int_parsing")]

    def test_never_echoes_the_input(self) -> None:
        wire = [p.to_wire() for p in invalid_params([EXTRA, TOO_LARGE, JSON_INVALID])]

        assert "SECRET-INPUT" not in str(wire)


class TestProblemBody:
    def test_has_the_rfc_9457_shape(self) -> None:
        status, body = problem_body("job_not_found", "req-123")

        assert status == 404
        assert body == {
            "type": "urn:outlast:problem:job_not_found",
            "title": "Job not found",
            "status": 404,
            "detail": "Job not found.",
            "code": "job_not_found",
            "correlationId": "req-123",
        }

    def test_a_given_detail_replaces_the_default(self) -> None:
        _, body = problem_body("invalid_json", "req-1", detail="Specific.")

        assert body["detail"] == "Specific."

    def test_invalid_params_appear_only_when_given(self) -> None:
        params = [InvalidParam(name="input.text", reason="string_too_short")]

        assert "invalidParams" not in problem_body("invalid_request", "req-1")[1]
        assert "invalidParams" not in problem_body("invalid_request", "req-1", invalid_params=[])[1]
        assert problem_body("invalid_request", "req-1", invalid_params=params)[1]["invalidParams"] == [
            {"name": "input.text", "reason": "string_too_short"}
        ]

    @pytest.mark.parametrize("code", sorted(PROBLEMS))
    def test_every_code_has_an_error_status_and_a_complete_body(self, code: str) -> None:
        status, body = problem_body(code, "req-1")

        assert 400 <= status <= 599
        assert body["status"] == status == PROBLEMS[code].status
        assert body["type"] == f"urn:outlast:problem:{code}"
        assert body["code"] == code
        assert body["title"]
        assert body["detail"]

    def test_codes_are_stable_snake_case(self) -> None:
        assert all(re.fullmatch(r"[a-z]+(_[a-z]+)*", code) for code in PROBLEMS)


class TestProblemForError:
    def test_a_domain_error_keeps_its_code_and_its_caller_safe_detail(self) -> None:
        status, body = problem_for_error(
            errors.JobNotCancelableError("The job already ended as Failed."), "r"
        )

        assert status == 409
        assert body["code"] == "job_not_cancelable"
        assert body["detail"] == "The job already ended as Failed."

    def test_rate_limited_is_429(self) -> None:
        status, body = problem_for_error(errors.RateLimitedError("Slow down.", retry_after=12), "r")

        assert (status, body["code"]) == (429, "rate_limited")

    @pytest.mark.parametrize(
        "error_",
        [
            errors.OutlastError("boto3 said: lease token 7f3a and fingerprint ab12"),
            errors.IllegalTransitionError("Succeeded", "Pending"),
            errors.ConditionFailedError("leaseToken = 7f3a failed"),
        ],
        ids=["base", "illegal transition", "condition failed"],
    )
    def test_an_internal_error_never_shows_its_detail(self, error_: errors.OutlastError) -> None:
        status, body = problem_for_error(error_, "req-9")

        assert status == 500
        assert body["code"] == "internal_error"
        assert error_.detail not in str(body)
        assert body["correlationId"] == "req-9"

    def test_an_unknown_code_is_answered_as_an_internal_error_without_detail(self) -> None:
        class Odd(errors.OutlastError):
            code = "no_such_code"

        status, body = problem_for_error(Odd("internal: table jobs-prod"), "r")

        assert (status, body["code"]) == (500, "internal_error")
        assert "jobs-prod" not in str(body)

    @pytest.mark.parametrize(
        ("error_", "status"),
        [
            (errors.UnauthorizedError("x"), 401),
            (errors.MissingIdempotencyKeyError("x"), 400),
            (errors.InvalidIdempotencyKeyError("x"), 400),
            (errors.InvalidRequestError("x"), 400),
            (errors.ModelNotAllowedError("x"), 400),
            (errors.InvalidCursorError("x"), 400),
            (errors.JobNotFoundError(), 404),
            (errors.IdempotencyKeyReusedError("x"), 409),
            (errors.JobNotSucceededError("x"), 409),
            (errors.JobNotCancelableError("x"), 409),
            (errors.RateLimitedError("x", retry_after=1), 429),
            (errors.StorageUnavailableError("x"), 503),
        ],
        ids=lambda value: type(value).__name__ if isinstance(value, Exception) else None,
    )
    def test_each_error_an_api_function_raises_has_the_contract_status(
        self, error_: errors.OutlastError, status: int
    ) -> None:
        assert error_.code in PROBLEMS
        assert problem_for_error(error_, "r")[0] == status
