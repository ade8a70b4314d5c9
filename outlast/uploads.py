"""Presigned POST uploads from the client side: the multipart form S3 takes, and sending it.

The documents API answers `upload: {url, fields}`; S3 (or local mode's upload front) takes a
`multipart/form-data` POST of those fields, then the file as the field `file`, last (S3 ignores
fields after it). Standard library only: the client wheel carries no HTTP library.
"""

from __future__ import annotations

import secrets
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

# How much of the body each write sends (the progress callback's step).
CHUNK_BYTES = 256 * 1024


@dataclass(frozen=True)
class UploadAnswer:
    """What the upload's endpoint answered: its status and body (S3's XML error on a refusal)."""

    status: int
    body: bytes

    @property
    def ok(self) -> bool:
        """True for S3's success answers (204 by default, 200 or 201 when the form asks)."""
        return self.status in {200, 201, 204}


def multipart_form(
    fields: Mapping[str, str], filename: str, data: bytes, content_type: str
) -> tuple[bytes, str]:
    """The body and its Content-Type: every field, then the file."""
    boundary = "outlast-" + secrets.token_hex(16)
    parts: list[bytes] = []
    for name, value in fields.items():
        disposition = f'Content-Disposition: form-data; name="{_quoted(name)}"'
        parts.append(f"--{boundary}\r\n{disposition}\r\n\r\n{value}\r\n".encode())
    parts.append(
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{_quoted(filename)}"\r\n'
            f"Content-Type: {content_type}\r\n\r\n"
        ).encode()
    )
    parts.append(data)
    parts.append(f"\r\n--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")


def post_upload(
    url: str,
    fields: Mapping[str, str],
    *,
    filename: str,
    data: bytes,
    content_type: str,
    progress: Callable[[int, int], None] | None = None,
    timeout_seconds: float = 300,
) -> UploadAnswer:
    """POST the form; `progress(sent, total)` after each chunk of the body."""
    body, form_type = multipart_form(fields, filename, data, content_type)

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), CHUNK_BYTES):
            piece = body[start : start + CHUNK_BYTES]
            yield piece
            if progress is not None:
                progress(min(start + len(piece), len(body)), len(body))

    request = urllib.request.Request(  # noqa: S310 - the URL the API answered (https in AWS)
        url,
        data=chunks(),
        method="POST",
        headers={"Content-Type": form_type, "Content-Length": str(len(body))},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_seconds) as response:  # noqa: S310
            return UploadAnswer(response.status, response.read())
    except urllib.error.HTTPError as error:
        return UploadAnswer(error.code, error.read())
