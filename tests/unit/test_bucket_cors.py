"""S3's CORS evaluation as local mode's upload front does it (outlast/local/bucket_cors.py)."""

from __future__ import annotations

from outlast.local.bucket_cors import CorsRule, bucket_rules, preflight, response_headers

RULE = {
    "AllowedMethods": ["POST"],
    "AllowedOrigins": ["https://*.example.com"],
    "AllowedHeaders": ["Content-*"],
}


def test_the_template_rule_is_read_and_local_origins_replace_its_origins() -> None:
    rules = bucket_rules([("bucket", {"CorsRules": [RULE]})], origins=("http://127.0.0.1:8001",))

    assert rules == {
        "bucket": (
            CorsRule(
                allowed_methods=("POST",),
                allowed_origins=("http://127.0.0.1:8001",),
                allowed_headers=("Content-*",),
            ),
        )
    }


def test_an_origin_wildcard_and_a_header_wildcard_match_as_in_s3_headers_case_insensitively() -> None:
    rules = bucket_rules([("bucket", {"CorsRules": [RULE]})], origins=None)["bucket"]

    allowed = preflight(rules, "https://app.example.com", "POST", "Content-Type, content-md5")
    refused = preflight(rules, "https://example.com", "POST", "")

    assert allowed.allowed
    assert allowed.headers["Access-Control-Allow-Origin"] == "https://app.example.com"
    assert allowed.headers["Access-Control-Allow-Headers"] == "Content-Type, content-md5"
    assert not refused.allowed
    assert "not allowed" in refused.refusal


def test_any_origin_is_answered_with_a_star_and_a_method_no_rule_allows_gets_no_headers() -> None:
    rules = (CorsRule(allowed_methods=("GET", "POST"), allowed_origins=("*",)),)

    assert response_headers(rules, "https://a.example", "POST")["Access-Control-Allow-Origin"] == "*"
    assert response_headers(rules, "https://a.example", "DELETE") == {}
    assert response_headers(rules, None, "POST") == {}
