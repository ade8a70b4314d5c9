"""Where a document's objects live: `documents/{tenant}/{sub}/{documentId}/original`, the text beside it.

The owner is in the key, so the presigned POST that pins the key also pins whose document the
upload is, and the ingest learns the owner from the key alone. Keys in S3 event notifications
are URL-encoded (`quote_plus`, `/` included): `parse_key` takes the decoded key.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from shared import resources as r
from shared.identity import is_safe_identity
from shared.ids import normalize_job_id
from shared.job import Caller


class DocumentPart(StrEnum):
    """The objects of one document."""

    ORIGINAL = "original"  # the file as uploaded
    TEXT = "text"  # its extracted text, UTF-8, written once by the ingest


@dataclass(frozen=True)
class DocumentKey:
    """One object of one document."""

    owner: Caller
    document_id: str
    part: DocumentPart

    @property
    def key(self) -> str:
        """The object key."""
        return object_key(self.owner, self.document_id, self.part)


def object_key(owner: Caller, document_id: str, part: DocumentPart) -> str:
    """The key of one of a document's objects."""
    return f"{r.DOCUMENTS_PREFIX}{owner.tenant}/{owner.sub}/{document_id}/{part.value}"


def in_documents_prefix(key: str) -> bool:
    """Whether a (decoded) key is under the documents prefix at all."""
    return key.startswith(r.DOCUMENTS_PREFIX)


def parse_key(key: str) -> DocumentKey | None:
    """The document object a decoded key names, or None when it names none.

    Strict: the tenant and sub must have the shape tokens are held to, the id must be a
    lowercase UUID and the part one of ours; nothing else under the prefix is a document's.
    """
    if not in_documents_prefix(key):
        return None
    segments = key.removeprefix(r.DOCUMENTS_PREFIX).split("/")
    if len(segments) != 4:
        return None
    tenant, sub, document_id, part = segments
    if (
        not (is_safe_identity(tenant) and is_safe_identity(sub))
        or normalize_job_id(document_id) != document_id
    ):
        return None
    if part not in DocumentPart:
        return None
    return DocumentKey(owner=Caller(tenant=tenant, sub=sub), document_id=document_id, part=DocumentPart(part))
