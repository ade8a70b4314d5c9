"""Local mode's upload front over a socket: a form the policy allows and the signer's role may write
reaches the store unchanged; a refused one never does, and gets S3's XML error."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from outlast.local.bucket_cors import bucket_rules
from outlast.local.upload_front import UploadFront, UploadRules, parse_form
from outlast.uploads import multipart_form, post_upload
from tests.support.uploads import ACCESS_KEY, BUCKET, KEY, SECRET, signed_form

pytestmark = pytest.mark.integration


class _Store(ThreadingHTTPServer):
    """Stands for moto: records what reaches it, answers 204."""

    def __init__(self) -> None:
        self.received: list[tuple[str, bytes]] = []
        store = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                store.received.append((self.path, body))
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                return

        super().__init__(("127.0.0.1", 0), Handler)


@pytest.fixture
def store() -> Iterator[_Store]:
    server = _Store()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def allowed() -> set[tuple[str, str, str]]:
    return {(ACCESS_KEY, BUCKET, KEY)}


@pytest.fixture
def front(store: _Store, allowed: set[tuple[str, str, str]]) -> Iterator[UploadFront]:
    host, port = store.server_address[:2]
    rules = UploadRules(
        region="us-east-1",
        secret_of=lambda key: SECRET if key == ACCESS_KEY else None,
        authorize=lambda key, bucket, name: (key, bucket, name) in allowed,
        moto_endpoint=f"http://{host!s}:{port}",
    )
    started = UploadFront(rules).start()
    yield started
    started.stop()


def _post(front: UploadFront, fields: dict[str, str], data: bytes = b"%PDF-1.7 small") -> Any:
    return post_upload(
        f"{front.url}/{BUCKET}", fields, filename="a.pdf", data=data, content_type="application/pdf"
    )


def test_an_allowed_post_reaches_the_store_byte_for_byte(front: UploadFront, store: _Store) -> None:
    answer = _post(front, signed_form())

    assert answer.status == 204
    ((path, body),) = store.received
    assert path == f"/{BUCKET}"
    assert b"%PDF-1.7 small" in body


def test_a_post_the_policy_refuses_never_reaches_the_store(front: UploadFront, store: _Store) -> None:
    answer = _post(front, signed_form() | {"key": KEY.replace("alice", "mallory")})

    assert answer.status == 403
    assert b"<Code>AccessDenied</Code>" in answer.body
    assert store.received == []


def test_a_post_the_signers_role_may_not_write_is_access_denied(
    front: UploadFront, store: _Store, allowed: set[tuple[str, str, str]]
) -> None:
    allowed.clear()

    answer = _post(front, signed_form())

    assert answer.status == 403
    assert store.received == []


def test_a_form_without_a_file_is_refused(front: UploadFront, store: _Store) -> None:
    body, content_type = multipart_form(signed_form(), "a.pdf", b"x", "application/pdf")
    fields, file = parse_form(content_type, body.replace(b'name="file"', b'name="other"'))

    assert file is None
    assert "other" in fields


def test_fields_after_the_file_are_ignored() -> None:
    body, content_type = multipart_form({"key": "k"}, "a.txt", b"data", "text/plain")
    trailing = body.replace(b"--\r\n", b'\r\nContent-Disposition: form-data; name="late"\r\n\r\nx\r\n--', 1)

    fields, file = parse_form(content_type, trailing)

    assert file == b"data"
    assert "late" not in fields


CONSOLE = "http://127.0.0.1:8001"
# The documents bucket's rule as infra/constructs/documents.py writes it, its origin the console's.
TEMPLATE_RULES = {
    "CorsRules": [
        {
            "AllowedMethods": ["POST"],
            "AllowedOrigins": ["https://console.example"],
            "AllowedHeaders": ["Content-Type"],
            "MaxAge": 3600,
        }
    ]
}


@pytest.fixture
def cors_front(front: UploadFront) -> UploadFront:
    front.allow_cors(bucket_rules([(BUCKET, TEMPLATE_RULES)], origins=(CONSOLE,)))
    return front


def _preflight(front: UploadFront, origin: str, method: str = "POST", headers: str = "") -> Any:
    request = urllib.request.Request(f"{front.url}/{BUCKET}", method="OPTIONS")  # noqa: S310 - loopback
    request.add_header("Origin", origin)
    request.add_header("Access-Control-Request-Method", method)
    if headers:
        request.add_header("Access-Control-Request-Headers", headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - loopback
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def test_a_preflight_from_the_console_origin_is_allowed_by_the_buckets_rule(cors_front: UploadFront) -> None:
    status, headers, _ = _preflight(cors_front, CONSOLE, headers="content-type")

    assert status == 200
    assert headers["Access-Control-Allow-Origin"] == CONSOLE
    assert headers["Access-Control-Allow-Methods"] == "POST"
    assert headers["Access-Control-Allow-Headers"] == "content-type"
    assert headers["Access-Control-Max-Age"] == "3600"


@pytest.mark.parametrize(
    ("origin", "method", "headers"),
    [
        ("https://console.example", "POST", ""),  # the template's origin: locally the console has its own
        ("http://evil.example", "POST", ""),
        (CONSOLE, "PUT", ""),
        (CONSOLE, "POST", "x-amz-meta-other"),
    ],
)
def test_a_preflight_no_rule_allows_is_forbidden(
    cors_front: UploadFront, origin: str, method: str, headers: str
) -> None:
    status, answer_headers, body = _preflight(cors_front, origin, method, headers)

    assert status == 403
    assert b"<Code>AccessForbidden</Code>" in body
    assert answer_headers.get("Access-Control-Allow-Origin") is None


def test_without_rules_a_preflight_is_forbidden(front: UploadFront) -> None:
    status, _, body = _preflight(front, CONSOLE)

    assert status == 403
    assert b"CORS is not enabled" in body


def test_answers_to_the_consoles_posts_carry_cors_headers_refusals_included(
    cors_front: UploadFront, store: _Store
) -> None:
    fields = signed_form()
    allowed = multipart_form(fields, "a.pdf", b"%PDF-1.7 small", "application/pdf")
    refused = multipart_form(fields | {"key": KEY + "x"}, "a.pdf", b"%PDF-1.7 small", "application/pdf")

    answers = []
    for (data, content_type), origin in (
        (allowed, CONSOLE),
        (refused, CONSOLE),
        (allowed, "http://evil.example"),
    ):
        request = urllib.request.Request(f"{cors_front.url}/{BUCKET}", data=data, method="POST")  # noqa: S310
        request.add_header("Content-Type", content_type)
        request.add_header("Origin", origin)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - loopback
                answers.append((response.status, response.headers.get("Access-Control-Allow-Origin")))
        except urllib.error.HTTPError as error:
            answers.append((error.code, error.headers.get("Access-Control-Allow-Origin")))

    assert answers == [(204, CONSOLE), (403, CONSOLE), (204, None)]
