"""DocumentRepository on DynamoDB: one item per document, in its owner's partition.

The key is (`tenant#sub`, document id): a caller can only ever read their own documents, since
a read under another owner's partition finds nothing; the ingest builds the same key from the
object key it was told of. Attributes are flat, so that every condition names them directly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from shared import resources as r
from shared.adapters.dynamo_errors import error_code, storage_errors
from shared.adapters.dynamo_items import deserialize, list_key, serialize
from shared.adapters.update_builder import UpdateBuilder
from shared.clock import epoch_seconds, from_iso, to_iso
from shared.cursor import ListPosition
from shared.documents.ports import DocumentConflictError, DocumentPageSlice, DocumentPin, UploadTransition
from shared.documents.record import DocumentRecord, DocumentRejection, ReadyFacts, Upload
from shared.documents.types import DocumentStatus
from shared.errors import ConditionFailedError
from shared.job import Caller

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_CONDITION_FAILED = "ConditionalCheckFailedException"
_UNPINNED = "attribute_exists(#pk) AND attribute_not_exists(#pins)"
# The string set of the ids of the jobs that pin a document (DynamoDB drops an emptied set).
PINNED_BY = "pinnedBy"
# How long pins keep a document (RFC 3339): written with the TTL by a pin that raises it.
KEPT_UNTIL = "keptUntil"


def ttl_after(instant: datetime) -> int:
    """The TTL (epoch seconds) of an item that must live until `instant`: rounded up, so that
    TTL never removes it before."""
    return math.ceil(instant.timestamp())


def document_ttl(document: DocumentRecord) -> int:
    """The TTL of a document's item: its expiry, or how long its pins keep it when later."""
    expiry = epoch_seconds(document.expires_at)
    return expiry if document.kept_until is None else max(expiry, ttl_after(document.kept_until))


def document_key(owner: Caller, document_id: str) -> dict[str, Any]:
    """The primary key of a document item, in attribute-value form."""
    return serialize({r.DOCUMENTS_PARTITION_KEY: owner.owner_key, r.DOCUMENTS_SORT_KEY: document_id})


def document_to_item(document: DocumentRecord) -> dict[str, Any]:
    """A document as an item (attribute-value form); absent fields are absent attributes."""
    ready, error, upload = document.ready, document.error, document.upload
    values: dict[str, Any] = {
        r.DOCUMENTS_PARTITION_KEY: document.owner.owner_key,
        r.DOCUMENTS_SORT_KEY: document.document_id,
        r.DOCUMENTS_LIST_INDEX_SORT: list_key(document.created_at, document.sequence_id),
        "filename": document.filename,
        "contentType": document.content_type.value,
        "declaredBytes": document.declared_bytes,
        "status": document.status.value,
        "createdAt": to_iso(document.created_at),
        "updatedAt": to_iso(document.updated_at),
        "expiresAt": to_iso(document.expires_at),
        r.TTL_ATTRIBUTE: document_ttl(document),
        KEPT_UNTIL: to_iso(document.kept_until) if document.kept_until else None,
        "uploadEtag": upload.etag if upload else None,
        "uploadBytes": upload.bytes if upload else None,
        "pages": ready.pages if ready else None,
        "bytes": ready.bytes if ready else None,
        "textBytes": ready.text_bytes if ready else None,
        "sha256": ready.sha256 if ready else None,
        "errorCode": error.code.value if error else None,
        "errorMessage": error.message if error else None,
        PINNED_BY: set(document.pinned_by) or None,
        "revision": document.revision,
    }
    return serialize(values)


def item_to_document(item: Mapping[str, Any]) -> DocumentRecord:
    """The document an item holds."""
    values = deserialize(item)
    tenant, _, sub = str(values[r.DOCUMENTS_PARTITION_KEY]).partition("#")
    sequence_id = str(values[r.DOCUMENTS_LIST_INDEX_SORT]).rpartition("#")[2]
    status = DocumentStatus(values["status"])
    return DocumentRecord(
        document_id=values[r.DOCUMENTS_SORT_KEY],
        owner=Caller(tenant=tenant, sub=sub),
        filename=values["filename"],
        content_type=values["contentType"],
        declared_bytes=values["declaredBytes"],
        status=status,
        created_at=from_iso(values["createdAt"]),
        updated_at=from_iso(values["updatedAt"]),
        expires_at=from_iso(values["expiresAt"]),
        sequence_id=sequence_id,
        upload=Upload(etag=values["uploadEtag"], bytes=values["uploadBytes"])
        if "uploadEtag" in values
        else None,
        ready=ReadyFacts(
            pages=values.get("pages"),
            bytes=values["bytes"],
            text_bytes=values["textBytes"],
            sha256=values["sha256"],
        )
        if status is DocumentStatus.READY
        else None,
        error=DocumentRejection(code=values["errorCode"], message=values["errorMessage"])
        if "errorCode" in values
        else None,
        pinned_by=frozenset(values.get(PINNED_BY, ())),
        kept_until=from_iso(values[KEPT_UNTIL]) if KEPT_UNTIL in values else None,
        revision=values.get("revision", 1),
    )


class DynamoDocumentRepository:
    """Documents in the documents table; takes an injected low-level DynamoDB client."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table

    def create(self, document: DocumentRecord) -> None:
        """One conditional PutItem: a document id is never written twice."""
        try:
            with storage_errors():
                self._client.put_item(
                    TableName=self._table,
                    Item=document_to_item(document),
                    ConditionExpression="attribute_not_exists(#pk)",
                    ExpressionAttributeNames={"#pk": r.DOCUMENTS_PARTITION_KEY},
                )
        except ClientError as error:
            if error_code(error) == _CONDITION_FAILED:
                raise ConditionFailedError("A document with this id exists.") from None
            raise

    def get(self, owner: Caller, document_id: str) -> DocumentRecord | None:
        """GetItem, strongly consistent: the ingest decides from what the last write left."""
        with storage_errors():
            response = self._client.get_item(
                TableName=self._table, Key=document_key(owner, document_id), ConsistentRead=True
            )
        item = response.get("Item")
        return item_to_document(item) if item else None

    def transition(self, transition: UploadTransition) -> DocumentRecord:
        """One conditional UpdateItem; when refused, the document as it stood comes back with the
        refusal (ReturnValuesOnConditionCheckFailure), so no second read is needed."""
        builder = _transition_update(transition)
        try:
            with storage_errors():
                response = self._client.update_item(
                    TableName=self._table,
                    Key=document_key(transition.owner, transition.document_id),
                    ReturnValues="ALL_NEW",
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                    **builder.request(),
                )
        except ClientError as error:
            if error_code(error) != _CONDITION_FAILED:
                raise
            stored: Any = error.response.get("Item")
            raise DocumentConflictError(item_to_document(stored) if stored else None) from None
        return item_to_document(response["Attributes"])

    def list_page(
        self, owner: Caller, limit: int, after: ListPosition | None, now: datetime
    ) -> DocumentPageSlice:
        """A consistent Query of the creation-order LSI, newest first, expired documents filtered
        out (so a page may be short while LastEvaluatedKey says there is more): a document past
        its expiry stays while a job pins it and its pins keep it."""
        arguments: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": r.DOCUMENTS_LIST_INDEX,
            "KeyConditionExpression": "#pk = :owner",
            "FilterExpression": "#expiresAt > :now OR (attribute_exists(#pins) AND #kept > :now)",
            "ExpressionAttributeNames": {
                "#pk": r.DOCUMENTS_PARTITION_KEY,
                "#expiresAt": "expiresAt",
                "#pins": PINNED_BY,
                "#kept": KEPT_UNTIL,
            },
            "ExpressionAttributeValues": serialize({":owner": owner.owner_key, ":now": to_iso(now)}),
            "ScanIndexForward": False,
            "ConsistentRead": True,
            "Limit": limit,
        }
        if after is not None:
            # The cursor's position names a document by the field jobs' cursors call job_id.
            arguments["ExclusiveStartKey"] = serialize(
                {
                    r.DOCUMENTS_PARTITION_KEY: owner.owner_key,
                    r.DOCUMENTS_SORT_KEY: after.job_id,
                    r.DOCUMENTS_LIST_INDEX_SORT: after.list_key,
                }
            )
        with storage_errors():
            response = self._client.query(**arguments)
        last = response.get("LastEvaluatedKey")
        next_position = (
            ListPosition(
                list_key=last[r.DOCUMENTS_LIST_INDEX_SORT]["S"], job_id=last[r.DOCUMENTS_SORT_KEY]["S"]
            )
            if last
            else None
        )
        return DocumentPageSlice(
            items=[item_to_document(item) for item in response.get("Items", [])], next_position=next_position
        )

    def pin(self, pin: DocumentPin) -> None:
        """One conditional UpdateItem while the document is Ready and takes jobs: the job joins
        the pin set, the pin index's keys are set, and keptUntil with the TTL rise to the job's
        expiry when the TTL is earlier. When only that last clause failed (the document already
        lives long enough), the same write without the raise: a TTL is never lowered.
        DocumentConflictError with the document as it stands otherwise."""
        try:
            self._pin_write(pin.owner, pin.document_id, _pin_update(pin, raise_ttl=True))
        except DocumentConflictError as refused:
            current = refused.current
            if (
                current is None
                or current.status is not DocumentStatus.READY
                or not current.takes_jobs(pin.now)
            ):
                raise
            self._pin_write(pin.owner, pin.document_id, _pin_update(pin, raise_ttl=False))

    def unpin(self, owner: Caller, document_id: str, job_id: str) -> None:
        """One UpdateItem removing the job from the pin set; nothing when the document is gone.
        The index keys stay: the sweeper drops them when it finds no pin left. keptUntil and the
        TTL stay too: an unpinned document past its expiry is gone in code, and TTL removes it."""
        try:
            self._pin_write(
                owner,
                document_id,
                {
                    "UpdateExpression": "DELETE #pins :job",
                    "ConditionExpression": "attribute_exists(#pk)",
                    "ExpressionAttributeNames": {"#pk": r.DOCUMENTS_PARTITION_KEY, "#pins": PINNED_BY},
                    "ExpressionAttributeValues": {":job": {"SS": [job_id]}},
                },
            )
        except DocumentConflictError:
            return

    def pins_due(self, shard: str, now: datetime, limit: int) -> list[tuple[Caller, str]]:
        """A Query of the sparse pin index: the shard's documents whose check is due."""
        with storage_errors():
            response = self._client.query(
                TableName=self._table,
                IndexName=r.DOCUMENTS_PIN_INDEX,
                KeyConditionExpression="#shard = :shard AND #check <= :now",
                ExpressionAttributeNames={
                    "#shard": r.DOCUMENTS_PIN_INDEX_PARTITION,
                    "#check": r.DOCUMENTS_PIN_INDEX_SORT,
                },
                ExpressionAttributeValues=serialize({":shard": shard, ":now": to_iso(now)}),
                Limit=limit,
            )
        due: list[tuple[Caller, str]] = []
        for item in response.get("Items", []):
            tenant, _, sub = item[r.DOCUMENTS_PARTITION_KEY]["S"].partition("#")
            due.append((Caller(tenant=tenant, sub=sub), item[r.DOCUMENTS_SORT_KEY]["S"]))
        return due

    def reschedule_pin_check(self, owner: Caller, document_id: str, check_at: datetime) -> None:
        """Drop the index keys when no pin is left (conditional REMOVE), else move the check."""
        names = {
            "#pk": r.DOCUMENTS_PARTITION_KEY,
            "#pins": PINNED_BY,
            "#shard": r.DOCUMENTS_PIN_INDEX_PARTITION,
            "#check": r.DOCUMENTS_PIN_INDEX_SORT,
        }
        if self._updated_if(
            owner,
            document_id,
            UpdateExpression="REMOVE #shard, #check",
            ConditionExpression="attribute_exists(#pk) AND attribute_not_exists(#pins)",
            ExpressionAttributeNames=names,
        ):
            return
        # Pins are left (or the document is gone, or its last pin went meanwhile: the next
        # sweep drops the keys then).
        self._updated_if(
            owner,
            document_id,
            UpdateExpression="SET #check = :check",
            ConditionExpression="attribute_exists(#pk) AND attribute_exists(#pins)",
            ExpressionAttributeNames={k: v for k, v in names.items() if k != "#shard"},
            ExpressionAttributeValues=serialize({":check": to_iso(check_at)}),
        )

    def _updated_if(self, owner: Caller, document_id: str, **update: Any) -> bool:
        """One conditional UpdateItem; False when its condition did not hold."""
        try:
            with storage_errors():
                self._client.update_item(
                    TableName=self._table, Key=document_key(owner, document_id), **update
                )
        except ClientError as error:
            if error_code(error) != _CONDITION_FAILED:
                raise
            return False
        return True

    def _pin_write(self, owner: Caller, document_id: str, update: dict[str, Any]) -> None:
        try:
            with storage_errors():
                self._client.update_item(
                    TableName=self._table,
                    Key=document_key(owner, document_id),
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                    **update,
                )
        except ClientError as error:
            if error_code(error) != _CONDITION_FAILED:
                raise
            stored: Any = error.response.get("Item")
            raise DocumentConflictError(item_to_document(stored) if stored else None) from None

    def delete(self, owner: Caller, document_id: str) -> None:
        """One conditional DeleteItem: the document exists and no job pins it."""
        try:
            with storage_errors():
                self._client.delete_item(
                    TableName=self._table,
                    Key=document_key(owner, document_id),
                    ConditionExpression=_UNPINNED,
                    ExpressionAttributeNames={"#pk": r.DOCUMENTS_PARTITION_KEY, "#pins": PINNED_BY},
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
        except ClientError as error:
            if error_code(error) != _CONDITION_FAILED:
                raise
            stored: Any = error.response.get("Item")
            raise DocumentConflictError(item_to_document(stored) if stored else None) from None


def pin_shard(document_id: str) -> str:
    """The pin index shard of a document (its id is random: an even spread)."""
    return str(int(document_id.replace("-", "")[-4:], 16) % r.DOCUMENTS_PIN_SHARDS)


def _pin_update(pin: DocumentPin, *, raise_ttl: bool) -> dict[str, Any]:
    """ADD the job id with the check's index keys, while the document is Ready and takes jobs;
    with `raise_ttl`, also keptUntil and the TTL, only while the TTL is earlier than the job's."""
    condition = "attribute_exists(#pk) AND #status = :ready AND #expiresAt > :now"
    names = {
        "#pk": r.DOCUMENTS_PARTITION_KEY,
        "#pins": PINNED_BY,
        "#status": "status",
        "#expiresAt": "expiresAt",
        "#shard": r.DOCUMENTS_PIN_INDEX_PARTITION,
        "#check": r.DOCUMENTS_PIN_INDEX_SORT,
    }
    values: dict[str, Any] = {
        ":job": {"SS": [pin.job_id]},
        ":ready": {"S": DocumentStatus.READY.value},
        ":now": {"S": to_iso(pin.now)},
        ":shard": {"S": pin_shard(pin.document_id)},
        ":check": {"S": to_iso(pin.check_at)},
    }
    expression = "ADD #pins :job SET #shard = :shard, #check = :check"
    if raise_ttl:
        condition += " AND (attribute_not_exists(#ttl) OR #ttl < :ttl)"
        names |= {"#ttl": r.TTL_ATTRIBUTE, "#kept": KEPT_UNTIL}
        values |= {":ttl": {"N": str(ttl_after(pin.keep_until))}, ":kept": {"S": to_iso(pin.keep_until)}}
        expression += ", #kept = :kept, #ttl = :ttl"
    return {
        "UpdateExpression": expression,
        "ConditionExpression": condition,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }


def _transition_update(transition: UploadTransition) -> UpdateBuilder:
    """Take or settle an upload, only while the document awaits one and has taken no other."""
    builder = UpdateBuilder()
    status, etag = builder.name("status"), builder.name("uploadEtag")
    builder.require(f"{status} = {builder.value(DocumentStatus.AWAITING_UPLOAD.value)}")
    builder.require(f"attribute_not_exists({etag}) OR {etag} = {builder.value(transition.upload.etag)}")
    builder.set("status", transition.target.value)
    builder.set("uploadEtag", transition.upload.etag)
    builder.set("uploadBytes", transition.upload.bytes)
    builder.set("updatedAt", to_iso(transition.now))
    builder.add("revision", 1)
    if transition.ready is not None:
        if transition.ready.pages is not None:
            builder.set("pages", transition.ready.pages)
        builder.set("bytes", transition.ready.bytes)
        builder.set("textBytes", transition.ready.text_bytes)
        builder.set("sha256", transition.ready.sha256)
    if transition.error is not None:
        builder.set("errorCode", transition.error.code.value)
        builder.set("errorMessage", transition.error.message)
    return builder
