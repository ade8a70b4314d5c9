"""A bucket's CORS rules, evaluated as S3 does, for local mode's upload front.

The console uploads a document straight to the bucket with the presigned POST (DESIGN.md,
"Documents"): the browser sends a preflight (an upload whose progress is watched always has one)
and then reads the POST's answer, so both need the bucket's CORS headers. moto's bucket has no CORS
configuration locally, so the front answers from the template's rules (the documents bucket's
`CorsConfiguration`, from infra/constructs/documents.py) with their origins replaced by the local
console's, as the local API front does with the HTTP API's CORS: the template names the deployed
console's origin, locally the console has its own.

S3's evaluation: the first rule whose origin, method and (for a preflight) every requested header
match wins; a preflight no rule allows is 403; an actual request no rule allows just gets no CORS
headers (the browser then withholds the answer from the page).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

REFUSED = (
    "CORSResponse: This CORS request is not allowed. This is usually because the evalution of Origin, "
    "request method / Access-Control-Request-Method or Access-Control-Request-Headers are not "
    "whitelisted by the resource's CORS spec."
)
NOT_ENABLED = "CORSResponse: CORS is not enabled for this bucket."


@dataclass(frozen=True)
class CorsRule:
    """One rule of AWS::S3::Bucket CorsConfiguration.CorsRules."""

    allowed_methods: tuple[str, ...]
    allowed_origins: tuple[str, ...]
    allowed_headers: tuple[str, ...] = ()
    exposed_headers: tuple[str, ...] = ()
    max_age: int | None = None

    @classmethod
    def of(cls, rule: Mapping[str, Any], origins: Sequence[str] | None = None) -> CorsRule:
        """A template rule; `origins` (the local console's) replace its AllowedOrigins when given."""
        max_age = rule.get("MaxAge")
        return cls(
            allowed_methods=tuple(str(m).upper() for m in rule.get("AllowedMethods", [])),
            allowed_origins=tuple(origins if origins is not None else rule.get("AllowedOrigins", [])),
            allowed_headers=tuple(str(h) for h in rule.get("AllowedHeaders", [])),
            exposed_headers=tuple(str(h) for h in rule.get("ExposedHeaders", [])),
            max_age=int(max_age) if max_age is not None else None,
        )

    def matches_origin(self, origin: str) -> bool:
        # S3 allows one `*` wildcard in an origin; fnmatch's other wildcards never occur in one.
        return any(fnmatch.fnmatchcase(origin, allowed) for allowed in self.allowed_origins)

    def allows_header(self, header: str) -> bool:
        return any(fnmatch.fnmatchcase(header.lower(), allowed.lower()) for allowed in self.allowed_headers)

    def answer_origin(self, origin: str) -> str:
        return "*" if self.allowed_origins == ("*",) else origin


@dataclass(frozen=True)
class Preflight:
    """A preflight's answer: its status and headers (S3's XML error when refused)."""

    allowed: bool
    headers: dict[str, str]
    refusal: str = ""


def bucket_rules(
    buckets: Iterable[tuple[str, Mapping[str, Any]]], origins: Sequence[str] | None
) -> dict[str, tuple[CorsRule, ...]]:
    """Each bucket's rules by its name, from (name, resolved CorsConfiguration) pairs."""
    return {
        name: tuple(CorsRule.of(rule, origins) for rule in configuration.get("CorsRules", []))
        for name, configuration in buckets
    }


def preflight(rules: Sequence[CorsRule], origin: str, method: str, request_headers: str) -> Preflight:
    """S3's answer to OPTIONS with Origin, Access-Control-Request-Method and -Headers."""
    if not rules:
        return Preflight(False, {}, NOT_ENABLED)
    requested = [h.strip() for h in request_headers.split(",") if h.strip()]
    for rule in rules:
        if (
            rule.matches_origin(origin)
            and method.upper() in rule.allowed_methods
            and all(rule.allows_header(h) for h in requested)
        ):
            headers = _allowed(rule, origin)
            if requested:
                headers["Access-Control-Allow-Headers"] = ", ".join(requested)
            if rule.max_age is not None:
                headers["Access-Control-Max-Age"] = str(rule.max_age)
            headers["Vary"] = "Origin, Access-Control-Request-Headers, Access-Control-Request-Method"
            return Preflight(True, headers)
    return Preflight(False, {}, REFUSED)


def response_headers(rules: Sequence[CorsRule], origin: str | None, method: str) -> dict[str, str]:
    """The CORS headers of an actual request's answer (none when no rule allows it)."""
    if origin is None:
        return {}
    for rule in rules:
        if rule.matches_origin(origin) and method.upper() in rule.allowed_methods:
            headers = _allowed(rule, origin)
            if rule.max_age is not None:
                headers["Access-Control-Max-Age"] = str(rule.max_age)
            headers["Vary"] = "Origin, Access-Control-Request-Headers, Access-Control-Request-Method"
            return headers
    return {}


def _allowed(rule: CorsRule, origin: str) -> dict[str, str]:
    headers = {
        "Access-Control-Allow-Origin": rule.answer_origin(origin),
        "Access-Control-Allow-Methods": ", ".join(rule.allowed_methods),
    }
    if rule.exposed_headers:
        headers["Access-Control-Expose-Headers"] = ", ".join(rule.exposed_headers)
    return headers
