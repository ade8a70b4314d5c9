"""S3 event notifications, as the ingest queue's messages carry them, parsed before any logic runs.

A message body is one notification: S3's `s3:TestEvent` (sent once when a bucket's notification
is configured; moto sends one too) or `{"Records": [...]}`. Keys in records are URL-encoded
the way `quote_plus` encodes them, `/` included (`documents%2Fuser%3Aab...`), and are decoded
here, before anything matches a prefix.
"""

from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote_plus

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared.documents.record import Upload

_OBJECT_CREATED = "ObjectCreated:"


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class _Object(_Model):
    key: str = Field(min_length=1)
    size: int = Field(default=0, ge=0)
    e_tag: str | None = Field(default=None, alias="eTag", min_length=1)


class _Bucket(_Model):
    name: str = Field(min_length=1)


class _Entity(_Model):
    bucket: _Bucket
    object: _Object


class _Record(_Model):
    event_source: Literal["aws:s3"] = Field(alias="eventSource")
    event_name: str = Field(alias="eventName")
    s3: _Entity


class _Notification(_Model):
    records: list[_Record] = Field(alias="Records", min_length=1)


class _TestEvent(_Model):
    event: Literal["s3:TestEvent"] = Field(alias="Event")


@dataclass(frozen=True)
class ObjectCreated:
    """One object written: its bucket, its key (decoded) and what S3 says of it."""

    bucket: str
    key: str
    upload: Upload


@dataclass(frozen=True)
class Notification:
    """A parsed message: the objects it announces (none for a test event or other event kinds)."""

    objects: tuple[ObjectCreated, ...]
    test_event: bool = False


def parse_notification(body: str) -> Notification | None:
    """The notification a message body carries, or None when it is not one (poison)."""
    try:
        notification = _Notification.model_validate_json(body)
    except ValidationError:
        try:
            _TestEvent.model_validate_json(body)
        except ValidationError:
            return None
        return Notification(objects=(), test_event=True)
    created = []
    for record in notification.records:
        if not record.event_name.startswith(_OBJECT_CREATED):
            continue
        entity = record.s3
        if entity.object.e_tag is None:  # every ObjectCreated event has one; without it, not S3's
            return None
        created.append(
            ObjectCreated(
                bucket=entity.bucket.name,
                key=unquote_plus(entity.object.key),
                upload=Upload(etag=entity.object.e_tag, bytes=entity.object.size),
            )
        )
    return Notification(objects=tuple(created))
