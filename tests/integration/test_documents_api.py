"""The documents API through its handler on moto: the presigned POST it answers stores the file,
the owner reads, lists and deletes, and everyone else gets 404 (DESIGN.md, "Documents")."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
import requests

from functions.documents.handler import lambda_handler as documents_handler
from shared import resources as r
from shared.documents.keys import DocumentPart, object_key
from shared.job import Caller
from tests.support.answers import QUIET_METRICS, Answer, assert_problem
from tests.support.aws import REGION, DocumentResources, create_document_resources
from tests.support.events import api_event
from tests.support.lambda_context import FakeLambdaContext

pytestmark = [pytest.mark.integration, QUIET_METRICS]

ALICE = Caller(tenant="acme", sub="3b7c1d2e-8f4a-4c6b-9d1e-2f3a4b5c6d7e")  # the sample events' caller
BOB_SUB = "bob-sub"
PDF = "application/pdf"


@pytest.fixture
def documents(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> DocumentResources:
    created = create_document_resources(moto_endpoint)
    secret = boto3.client("secretsmanager", endpoint_url=moto_endpoint, region_name=REGION).create_secret(
        Name=f"cursor-{created.table}", SecretString="k" * 32
    )
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    monkeypatch.setenv(r.ENV_DOCUMENTS_TABLE, created.table)
    monkeypatch.setenv(r.ENV_DOCUMENTS_BUCKET, created.bucket)
    monkeypatch.setenv(r.ENV_CURSOR_SECRET, secret["ARN"])
    # Path-style addressing is what moto serves; the signer's virtual-hosted URL would name a host
    # that does not resolve here. Local mode's upload front takes this place.
    monkeypatch.setenv(r.ENV_UPLOAD_ENDPOINT_URL, moto_endpoint)
    return created


def _call(event: dict[str, Any]) -> Answer:
    response = documents_handler(event, FakeLambdaContext())
    headers = {key: str(value) for key, value in (response.get("headers") or {}).items()}
    return Answer(event=event, status=response["statusCode"], headers=headers, raw_body=response["body"])


def _create(body: dict[str, Any] | None = None, **overrides: Any) -> Answer:
    sent = {"filename": "report.pdf", "contentType": PDF, "bytes": 1000} | (body or {})
    return _call(api_event("create_document", body=sent, **overrides))


def _on(name: str, document_id: str, **overrides: Any) -> Answer:
    path = f"/v1/documents/{document_id}"
    event = api_event(name, path=path, **overrides)
    event["pathParameters"] = {"documentId": document_id}
    return _call(event)


def test_create_answers_a_post_that_uploads_the_file_to_the_owners_key(
    documents: DocumentResources, moto_endpoint: str
) -> None:
    created = _create()

    assert created.status == 201, created.raw_body
    body = created.body
    document_id = body["documentId"]
    assert created.header("Location") == f"/v1/documents/{document_id}"
    assert body["status"] == "AwaitingUpload"
    fields = body["upload"]["fields"]
    assert fields["key"] == object_key(ALICE, document_id, DocumentPart.ORIGINAL)
    assert fields["Content-Type"] == PDF
    assert {"policy", "x-amz-signature", "x-amz-credential"} <= set(fields)

    posted = requests.post(
        body["upload"]["url"], data=fields, files={"file": ("report.pdf", b"%PDF-1.7 x")}, timeout=10
    )
    assert posted.status_code in {200, 201, 204}, posted.text
    s3 = boto3.client("s3", endpoint_url=moto_endpoint, region_name=REGION)
    stored = s3.get_object(Bucket=documents.bucket, Key=fields["key"])
    assert stored["ContentType"] == PDF


def test_the_owner_reads_an_awaiting_document_with_retry_after(documents: DocumentResources) -> None:
    document_id = _create().body["documentId"]

    read = _on("get_document", document_id)

    assert read.status == 200
    assert read.body["status"] == "AwaitingUpload"
    assert read.body["bytes"] == 1000
    assert read.body["ready"] is None
    assert read.header("Retry-After") == "2"


@pytest.mark.parametrize("name", ["get_document", "delete_document"])
def test_another_caller_gets_404(documents: DocumentResources, name: str) -> None:
    document_id = _create().body["documentId"]

    assert_problem(_on(name, document_id, sub=BOB_SUB), 404, "document_not_found")
    assert_problem(_on(name, document_id, tenant="other"), 404, "document_not_found")
    assert _on("get_document", document_id).status == 200


def test_the_list_shows_only_the_callers_documents_in_signed_pages(documents: DocumentResources) -> None:
    ids = [_create().body["documentId"] for _ in range(3)]
    _create(sub=BOB_SUB)

    first = _call(api_event("list_documents", query={"limit": "2"}))
    assert first.status == 200, first.raw_body
    assert [d["documentId"] for d in first.body["items"]] == [ids[2], ids[1]]
    cursor = first.body["nextCursor"]
    second = _call(api_event("list_documents", query={"limit": "2", "cursor": cursor}))
    assert [d["documentId"] for d in second.body["items"]] == [ids[0]]
    assert second.body["nextCursor"] is None

    stolen = _call(api_event("list_documents", query={"limit": "2", "cursor": cursor}, sub=BOB_SUB))
    assert_problem(stolen, 400, "invalid_cursor")


def test_delete_removes_the_document_and_a_pinned_one_is_409(
    documents: DocumentResources, moto_endpoint: str
) -> None:
    kept, gone = _create().body["documentId"], _create().body["documentId"]
    dynamodb = boto3.client("dynamodb", endpoint_url=moto_endpoint, region_name=REGION)
    dynamodb.update_item(
        TableName=documents.table,
        Key={r.DOCUMENTS_PARTITION_KEY: {"S": ALICE.owner_key}, r.DOCUMENTS_SORT_KEY: {"S": kept}},
        UpdateExpression="ADD pinnedBy :job",
        ExpressionAttributeValues={":job": {"SS": ["a-job"]}},
    )

    assert _on("delete_document", gone).status == 204
    assert_problem(_on("get_document", gone), 404, "document_not_found")
    assert_problem(_on("delete_document", kept), 409, "document_in_use")
    assert _on("get_document", kept).status == 200


@pytest.mark.parametrize("content_type", ["image/png", "application/zip", "text/html"])
def test_a_type_outside_the_list_is_415(documents: DocumentResources, content_type: str) -> None:
    assert_problem(_create({"contentType": content_type}), 415, "unsupported_document_type")


def test_a_declared_size_over_the_maximum_is_413(documents: DocumentResources) -> None:
    assert_problem(_create({"bytes": 25 * 1024 * 1024 + 1}), 413, "document_too_large")


@pytest.mark.parametrize(
    "body", [{"bytes": 0}, {"filename": ""}, {"extra": 1}, {"bytes": "10"}, {"filename": None}]
)
def test_a_bad_create_body_is_400(documents: DocumentResources, body: dict[str, Any]) -> None:
    assert_problem(_create(body), 400, "invalid_request")


def test_an_id_that_is_not_a_uuid_is_400(documents: DocumentResources) -> None:
    assert_problem(_on("get_document", "not-a-uuid"), 400, "invalid_document_id")
