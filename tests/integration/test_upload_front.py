"""Local mode's upload front over a socket: a form the policy allows and the signer's role may write
reaches the store unchanged; a refused one never does, and gets S3's XML error."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

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
