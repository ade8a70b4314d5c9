"""Local mode's S3 front for browser-style uploads: presigned POSTs are checked, then handed to moto.

moto stores any form POST (it checks neither the policy nor the signature), so the documents
function's presigned POSTs name this front instead (path-style, `POST /{bucket}`). It checks the
policy as S3 does (outlast.local.post_policy: signature, expiry, the exact key, the content type,
`content-length-range`), then that the signer's role may `s3:PutObject` that key, as S3 authorizes
a presigned request as its signer (DESIGN.md, "Deploy fidelity"); only then does moto get the
request, byte for byte, and store the object (its notification then fires as S3's would). A
refusal is S3's XML error; a denied role is recorded like every other local denial. CORS (the
console uploads from its own origin) is the bucket's rules from the template, evaluated as S3 does
(outlast.local.bucket_cors): preflights are answered here, and every answer to a POST, a refusal
included, carries the headers a matching rule gives, so the console can read why it was refused.
"""

from __future__ import annotations

import email.parser
import email.policy
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import ThreadingHTTPServer
from typing import Any
from xml.sax.saxutils import escape

from outlast.local.bucket_cors import CorsRule, preflight, response_headers
from outlast.local.http_handler import LocalRequestHandler
from outlast.local.post_policy import PostRefusal, SecretOf, check_post

# S3 takes POST uploads of up to 5 GB; local documents are at most 100 MiB (maxDocumentBytes' cap).
MAX_FORM_BYTES = 128 * 1024 * 1024
# Whether the signer (by access key id) may s3:PutObject this object (bucket, key): the caller
# records a denial where its roles are enforced.
Authorize = Callable[[str, str, str], bool]


@dataclass(frozen=True)
class UploadRules:
    """What the front checks against: the region, the signers' secrets, and their roles."""

    region: str
    secret_of: SecretOf
    authorize: Authorize
    moto_endpoint: str
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], rules: UploadRules) -> None:
        super().__init__(address, _Handler)
        self.rules = rules
        self.cors: dict[str, tuple[CorsRule, ...]] = {}

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def parse_form(content_type: str, body: bytes) -> tuple[dict[str, str], bytes | None]:
    """A multipart/form-data body's text fields and its `file` (None when absent or not last)."""
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode("latin-1") + body
    )
    if not message.is_multipart():
        raise PostRefusal(
            412, "PreconditionFailed", "Bucket POST must be of the enclosure-type multipart/form-data."
        )
    fields: dict[str, str] = {}
    file: bytes | None = None
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            continue
        payload = part.get_payload(decode=True)
        data = payload if isinstance(payload, bytes) else b""
        if name == "file":
            file = data
            continue
        if file is not None:
            # S3 ignores fields after the file; a policy that names them then fails, as there.
            continue
        fields[name] = data.decode("utf-8", "replace")
    return fields, file


def accept(rules: UploadRules, bucket: str, content_type: str, body: bytes) -> None:
    """Raise S3's refusal unless the form's policy holds and its signer may write the key."""
    fields, file = parse_form(content_type, body)
    if file is None:
        raise PostRefusal(400, "InvalidArgument", "POST requires exactly one file upload per request.")
    accepted = check_post(
        bucket, fields, len(file), now=rules.clock(), region=rules.region, secret_of=rules.secret_of
    )
    if not rules.authorize(accepted.access_key_id, accepted.bucket, accepted.key):
        raise PostRefusal(403, "AccessDenied", "Access Denied")


def error_xml(refusal: PostRefusal) -> bytes:
    """S3's error document."""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{escape(refusal.code)}</Code><Message>{escape(refusal.message)}</Message></Error>"
    ).encode()


class _Handler(LocalRequestHandler):
    server: _Server
    _cors_headers: dict[str, str] = {}  # noqa: RUF012 - replaced per request, never mutated

    def do_POST(self) -> None:
        rules = self.server.rules
        bucket = urllib.parse.urlsplit(self.path).path.strip("/")
        self._cors_headers = response_headers(
            self.server.cors.get(bucket, ()), self.headers.get("Origin"), "POST"
        )
        length = int(self.headers.get("Content-Length") or 0)
        if not bucket or "/" in bucket:
            self._refuse(PostRefusal(405, "MethodNotAllowed", "POST is allowed on a bucket only."))
            return
        if length > MAX_FORM_BYTES:
            self.close_connection = True
            self._refuse(
                PostRefusal(400, "EntityTooLarge", "Your proposed upload exceeds the maximum allowed size")
            )
            return
        body = self.rfile.read(length)
        content_type = self.headers.get("Content-Type", "")
        try:
            accept(rules, bucket, content_type, body)
        except PostRefusal as refusal:
            self._refuse(refusal)
            return
        self._forward("POST", body, {"Content-Type": content_type})

    def do_OPTIONS(self) -> None:
        """A CORS preflight, answered from the bucket's rules as S3 answers it."""
        self._cors_headers = {}
        bucket = urllib.parse.urlsplit(self.path).path.strip("/").partition("/")[0]
        origin = self.headers.get("Origin")
        method = self.headers.get("Access-Control-Request-Method")
        if origin is None or method is None:
            missing = "Origin" if origin is None else "Access-Control-Request-Method"
            self._refuse(
                PostRefusal(400, "BadRequest", f"Insufficient information. {missing} request header needed.")
            )
            return
        answer = preflight(
            self.server.cors.get(bucket, ()),
            origin,
            method,
            self.headers.get("Access-Control-Request-Headers", ""),
        )
        if not answer.allowed:
            self._refuse(PostRefusal(403, "AccessForbidden", answer.refusal))
            return
        self._cors_headers = answer.headers
        self._send(200, {}, b"")

    def _forward(self, method: str, body: bytes | None, headers: dict[str, str]) -> None:
        url = self.server.rules.moto_endpoint + self.path
        request = urllib.request.Request(url, data=body, method=method, headers=headers)  # noqa: S310 - loopback
        try:
            with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 - loopback
                self._send(response.status, dict(response.headers.items()), response.read())
        except urllib.error.HTTPError as error:
            self._send(error.code, dict(error.headers.items()), error.read())

    def _refuse(self, refusal: PostRefusal) -> None:
        self._send(refusal.status, {"Content-Type": "application/xml"}, error_xml(refusal))

    def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.send_response(status)
        for key, value in headers.items():
            if key.lower() not in _HOP_BY_HOP and not key.lower().startswith("access-control-"):
                self.send_header(key, value)
        for key, value in self._cors_headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


_HOP_BY_HOP = frozenset({"content-length", "transfer-encoding", "connection", "date", "server"})


class UploadFront:
    """The front on a loopback port, in a background thread."""

    def __init__(self, rules: UploadRules, host: str = "127.0.0.1", port: int = 0) -> None:
        """Binds the port at once: the documents function's environment names it."""
        self._server = _Server((host, port), rules)
        self._thread = threading.Thread(target=self._server.serve_forever, name="upload-front", daemon=True)

    @property
    def url(self) -> str:
        """http://127.0.0.1:PORT: the S3 endpoint presigned POSTs name, locally."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def allow_cors(self, rules: dict[str, tuple[CorsRule, ...]]) -> None:
        """Each bucket's CORS rules by name (before `start`): none, and preflights are refused."""
        self._server.cors = rules

    def start(self) -> UploadFront:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
